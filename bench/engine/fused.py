"""A hand-fused forward for Qwen2/Llama-style decoders: the model's own weights, far fewer ops.

At the engine's tiny scales (0.14M-4M parameters) a transformers forward spends most of its time
in Python and per-op overhead (mask building, rotary module, cache bookkeeping, a dozen small
modules per layer), not in matmuls. This forward reads the same parameters (so gradients flow to
them and an optimizer step is seen at once) and does per layer: one RMSNorm, one fused QKV
matmul, rotary on q and k together, one SDPA call, one output matmul, one RMSNorm, one fused
gate/up matmul, one down matmul. The result matches the transformers forward to float rounding
(tests/engine/test_fused.py). Models it does not cover (other architectures, sliding windows,
scaled rotary embeddings) keep the transformers forward: `FusedLM.of(model)` returns None.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F

_ARCHS = ("qwen2", "llama")


def unsupported(model: torch.nn.Module) -> str | None:
    """Why the fused forward cannot stand in for this model's forward, or None when it can.
    BENCH_FUSED=0 in the environment turns it off everywhere (the transformers forward: for
    before/after comparisons such as benchmarks/gpu_check.py, and to rule it out when debugging)."""
    if os.environ.get("BENCH_FUSED", "1") == "0":
        return "disabled by BENCH_FUSED=0"
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", None) not in _ARCHS:
        return f"architecture {getattr(cfg, 'model_type', type(model).__name__)!r} (fused: {', '.join(_ARCHS)})"
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"activation {cfg.hidden_act!r}"
    if getattr(cfg, "use_sliding_window", False) or any(t != "full_attention" for t in getattr(cfg, "layer_types", None) or []):
        return "sliding-window attention"
    rot = getattr(model.model, "rotary_emb", None)
    if rot is None or getattr(rot, "rope_type", "default") != "default" or getattr(rot, "attention_scaling", 1.0) != 1.0:
        return "scaled rotary embedding"
    if getattr(cfg, "mlp_bias", False):
        return "MLP bias"
    return None


def rope_table(inv_freq: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (n, d) for positions 0..n-1, sin's first half negated (the sign of rotate_half), so
    a decode step's rotary is one gather, one cat and two multiplies."""
    f = torch.arange(n, device=inv_freq.device).float()[:, None] * inv_freq
    half = f.shape[-1]
    emb = torch.cat([f, f], -1)
    return emb.cos(), torch.cat([-emb[:, :half].sin(), emb[:, half:].sin()], -1)


class FusedLM:
    """The fused forward over `model`'s parameters. Build one per pass: building only gathers
    references (and concatenates the QKV and gate/up weights, differentiably)."""

    def __init__(self, model: torch.nn.Module):
        cfg = model.config
        self.H, self.Hkv = cfg.num_attention_heads, cfg.num_key_value_heads
        self.d = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.H
        self.D = cfg.hidden_size
        self.eps = cfg.rms_norm_eps
        inner = model.model
        self.embed = inner.embed_tokens.weight
        self.norm = inner.norm.weight
        self.lm_head = model.lm_head.weight
        self.inv_freq = inner.rotary_emb.inv_freq
        eos = getattr(cfg, "eos_token_id", None)
        self.eos = eos if isinstance(eos, int) else None  # a list of EOS ids: no padding skipped
        self.layers = []
        for layer in inner.layers:
            at, mlp = layer.self_attn, layer.mlp
            bias = None
            if at.q_proj.bias is not None:
                bias = torch.cat([at.q_proj.bias, at.k_proj.bias, at.v_proj.bias])
            self.layers.append((
                layer.input_layernorm.weight,
                torch.cat([at.q_proj.weight, at.k_proj.weight, at.v_proj.weight]), bias,
                at.o_proj.weight, at.o_proj.bias,
                layer.post_attention_layernorm.weight,
                torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]), mlp.down_proj.weight,
            ))

    @classmethod
    def of(cls, model: torch.nn.Module) -> FusedLM | None:
        return None if unsupported(model) else cls(model)

    def rope(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (B, 1, S, d) for positions (B, S)."""
        f = pos[..., None].float() * self.inv_freq
        emb = torch.cat([f, f], -1)
        return emb.cos()[:, None], emb.sin()[:, None]

    def rope_table(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return rope_table(self.inv_freq, n)

    def decode(self, tok: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, bias: torch.Tensor,
               cache: torch.Tensor, start: int) -> torch.Tensor:
        """Logits (B, V) of the token after `tok` (B,): one decode step over a static KV cache.

        cos, sin (B, 1, d) rows of `rope_table` at each row's position; bias (B, Hkv, 1, W) float,
        0 where a cache column may be attended and -inf elsewhere; cache (layers, 2, B, Hkv, W, d)
        holds keys/values at [0, start); this step's go to column `start`. Same arithmetic as
        `forward` with S == 1, in fewer ops: per layer one rotary in place on the q/k heads, one
        cache write for k and v, attention as baddbmm (scores, scale, mask) + softmax + bmm with
        the query heads grouped by KV head (GQA: no KV head repeated). SDPA's set-up costs more
        than such a one-query attention at these sizes.
        """
        B = tok.shape[0]
        H, Hkv, d, D = self.H, self.Hkv, self.d, self.D
        K = start + 1
        bias = bias[..., :K].reshape(B * Hkv, 1, K)  # a view: bias is contiguous over (B, Hkv)
        x = F.embedding(tok, self.embed)
        for i, (ln1, wqkv, bqkv, wo, bo, ln2, wgu, wdown) in enumerate(self.layers):
            h = F.rms_norm(x, (D,), ln1, self.eps)
            qkv = F.linear(h, wqkv, bqkv).view(B, H + 2 * Hkv, d)
            qk = qkv[:, :H + Hkv]
            rot = torch.cat([qk[..., d // 2:], qk[..., :d // 2]], -1)
            qk.mul_(cos).addcmul_(rot, sin)  # rotary on q and k heads at once, in place in qkv
            cache[i, :, :, :, start] = qkv[:, H:].view(B, 2, Hkv, d).transpose(0, 1)  # k and v, one copy
            k, v = cache[i, 0, :, :, :K].reshape(B * Hkv, K, d), cache[i, 1, :, :, :K].reshape(B * Hkv, K, d)
            w = torch.baddbmm(bias, qkv[:, :H].reshape(B * Hkv, H // Hkv, d), k.transpose(1, 2), alpha=d**-0.5)
            a = torch.bmm(w.softmax(-1), v).view(B, H * d)
            x = x + F.linear(a, wo, bo)
            h = F.rms_norm(x, (D,), ln2, self.eps)
            g, u = F.linear(h, wgu).chunk(2, -1)
            x = x + F.linear(F.silu(g).mul_(u), wdown)
        return F.linear(F.rms_norm(x, (D,), self.norm, self.eps), self.lm_head)

    def forward(self, ids: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor,
                keep: int | None = None, want_kv: bool = False):
        """Logits of the last `keep` positions (all when None) of full sequences (a prefill, or
        a scoring pass; `decode` is the one-token step over a cache).

        ids (B, S); rope from `rope(pos)`; mask (B, 1, S, S) bool, True where a query may attend.
        want_kv: also return [(k, v)] per layer, (B, Hkv, S, d) each (to fill a decode cache).
        """
        B, S = ids.shape
        H, Hkv, d = self.H, self.Hkv, self.d
        cos, sin = rope
        x = F.embedding(ids, self.embed)
        kvs = []
        for ln1, wqkv, bqkv, wo, bo, ln2, wgu, wdown in self.layers:
            h = F.rms_norm(x, (self.D,), ln1, self.eps)
            qkv = F.linear(h, wqkv, bqkv).view(B, S, H + 2 * Hkv, d).transpose(1, 2)
            qk, v = qkv[:, :H + Hkv], qkv[:, H + Hkv:]
            x1, x2 = qk.chunk(2, -1)  # rotary on q and k heads at once, in their dtype (bf16 under autocast)
            qk = qk * cos.to(qk.dtype) + torch.cat([-x2, x1], -1) * sin.to(qk.dtype)
            q, k = qk[:, :H], qk[:, H:]
            if want_kv:
                kvs.append((k, v))
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=Hkv != H)
            x = x + F.linear(a.transpose(1, 2).reshape(B, S, H * d), wo, bo)
            h = F.rms_norm(x, (self.D,), ln2, self.eps)
            g, u = F.linear(h, wgu).chunk(2, -1)
            x = x + F.linear(F.silu(g) * u, wdown)
        if keep is not None:
            x = x[:, -keep:]
        logits = F.linear(F.rms_norm(x, (self.D,), self.norm, self.eps), self.lm_head)
        return (logits, kvs) if want_kv else logits


def full_mask(att: torch.Tensor) -> torch.Tensor:
    """(B, 1, S, S) bool attention mask for a padded sequence with validity `att` (B, S): causal,
    real keys only, and every query sees itself (a padding query with no real key to its left
    would otherwise give an all-masked row, whose NaN output spreads through later layers)."""
    S = att.shape[1]
    causal = torch.ones((S, S), dtype=torch.bool, device=att.device).tril()
    eye = torch.eye(S, dtype=torch.bool, device=att.device)
    return ((causal & att.bool()[:, None, :]) | eye)[:, None]


def completion_logits(lm: FusedLM, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                      completion: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logits (N, V) that score the N real tokens of `completion` (B, T) after left-padded
    prompts (B, P), and `real` (N,): their flat indices into (B·T), in order (None: all B·T
    tokens are real, N = B·T). Each distinct prompt is computed once (prefix sharing) and no
    padding after EOS is computed, nor projected onto the vocabulary.

    An RL batch holds G completions per prompt, and prompts are often as long as completions, so
    a plain forward spends most of its matmuls re-encoding the same prompt G times. Here the U
    distinct prompts run as (U, P) and the completions' real tokens as a flat list; every
    token-wise op (norms, projections, MLP) runs once over U·P + (real completion tokens) rows.
    Each completion attends to its prompt's keys/values (gathered, so their gradients sum over
    the group) and to its own causal prefix. Tokens after a row's first EOS (the model config's
    `eos_token_id`) are right padding: skipped, and absent from the logits (RL batches are often
    half padding: the vocab projection and the log-softmax after it cost the real tokens only).
    Same function as the full forward; float summation order differs.
    """
    B, T = completion.shape
    H, Hkv, d, D = lm.H, lm.Hkv, lm.d, lm.D
    dev = completion.device
    P = prompt_ids.shape[1]
    keys, inv = torch.unique(torch.cat([prompt_ids, prompt_mask.long()], 1), dim=0, return_inverse=True)
    uniq, patt = keys[:, :P], keys[:, P:].bool()
    U, Np = uniq.shape[0], uniq.shape[0] * P
    real = None  # flat indices of the completion tokens up to and including each row's first EOS
    if lm.eos is not None:
        is_eos = (completion == lm.eos).long()
        after = (is_eos.cumsum(1) - is_eos) > 0
        if bool(after.any()):
            real = (~after).flatten().nonzero().squeeze(-1)

    def keep(t: torch.Tensor) -> torch.Tensor:  # (B*T, ...) -> (real tokens, ...)
        return t if real is None else t.index_select(0, real)

    def pad(t: torch.Tensor) -> torch.Tensor:  # (real tokens, ...) -> (B*T, ...), zeros elsewhere
        return t if real is None else t.new_zeros((B * T, *t.shape[1:])).index_copy(0, real, t)

    ppos = (patt.long().cumsum(-1) - 1).clamp(min=0)
    cpos = patt.sum(-1)[inv][:, None] + torch.arange(T, device=dev)
    (cos_p, sin_p), (cos_c, sin_c) = lm.rope(ppos), lm.rope(cpos)
    cos = torch.cat([cos_p.reshape(Np, 1, d), keep(cos_c.reshape(B * T, 1, d))])
    sin = torch.cat([sin_p.reshape(Np, 1, d), keep(sin_c.reshape(B * T, 1, d))])
    mask_p = full_mask(patt)
    causal = torch.ones((T, T), dtype=torch.bool, device=dev).tril()
    mask_c = torch.cat([patt[inv][:, None, None, :].expand(B, 1, T, P), causal.expand(B, 1, T, T)], -1)
    x = torch.cat([F.embedding(uniq, lm.embed).reshape(Np, D), F.embedding(keep(completion.flatten()), lm.embed)])
    for ln1, wqkv, bqkv, wo, bo, ln2, wgu, wdown in lm.layers:
        h = F.rms_norm(x, (D,), ln1, lm.eps)
        qkv = F.linear(h, wqkv, bqkv).view(-1, H + 2 * Hkv, d)
        qk, v = qkv[:, :H + Hkv], qkv[:, H + Hkv:]
        x1, x2 = qk.chunk(2, -1)
        qkv = torch.cat([qk * cos.to(qk.dtype) + torch.cat([-x2, x1], -1) * sin.to(qk.dtype), v], 1)  # rotary: q, k
        qp, kp, vp = qkv[:Np].view(U, P, -1, d).transpose(1, 2).split([H, Hkv, Hkv], 1)
        qc, kc, vc = pad(qkv[Np:]).view(B, T, -1, d).transpose(1, 2).split([H, Hkv, Hkv], 1)
        ap = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask_p, enable_gqa=Hkv != H)
        kf = torch.cat([kp.index_select(0, inv), kc], 2)
        vf = torch.cat([vp.index_select(0, inv), vc], 2)
        ac = F.scaled_dot_product_attention(qc, kf, vf, attn_mask=mask_c, enable_gqa=Hkv != H)
        a = torch.cat([ap.transpose(1, 2).reshape(Np, H * d), keep(ac.transpose(1, 2).reshape(B * T, H * d))])
        x = x + F.linear(a, wo, bo)
        h = F.rms_norm(x, (D,), ln2, lm.eps)
        g, u = F.linear(h, wgu).chunk(2, -1)
        x = x + F.linear(F.silu(g) * u, wdown)
    # the state that scores real token (b, j): prompt b's last for j == 0, else real token (b, j-1),
    # which sits at off[b] + j - 1 among the real completion rows (each row's real tokens are a prefix)
    flat = torch.arange(B * T, device=dev) if real is None else real
    b, j = flat // T, flat % T
    lens = torch.full((B,), T, device=dev) if real is None else (~after).sum(1)
    off = lens.cumsum(0) - lens
    src = torch.where(j == 0, inv[b], U + off[b] + j - 1)
    h = torch.cat([x[:Np].view(U, P, D)[:, -1], x[Np:]]).index_select(0, src)
    return F.linear(F.rms_norm(h, (D,), lm.norm, lm.eps), lm.lm_head), real
