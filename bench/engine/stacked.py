"""Many runs, one kernel: R replicas of one architecture as stacked weights (issue 27).

R runs of one cell that differ only in their seed have the same shapes. `StackedLM` holds their
weights as leaf tensors with a leading replica dimension (R, ...), so each projection of the fused
forward (bench/engine/fused.py) becomes one batched matmul over the replicas and each op's Python
and dispatch cost is paid once for all R. Rows never mix across replicas: each replica computes
with the same ops in the same order as its own model; only float rounding can differ, and at equal
padded widths it does not (tests/engine/test_stacked.py states what differs and by how much).

    stack = StackedLM.from_models(models)                          # R models of one config
    logp, ent = stack.logprobs(prompt_ids, prompt_mask, tokens)    # (R, B, P), (R, B, P), (R, B, T) -> (R, B, T)
    gens = stack.generate(prompts, params, seeds, pad_id, eos_id)  # one Generation per replica
    opt = torch.optim.AdamW(stack.parameters(), lr=...)            # elementwise: R optimisers in one
    norms = stack.clip_grad_norm_(1.0)                             # (R,): each replica clipped on its own norm
    model.load_state_dict(stack.replica_state_dict(r))             # replica r back in a transformers model

What it buys on a CPU (benchmarks/stacked_speed.py: math-small's 16 prompts x 8 per replica, one
thread, CPU seconds, three runs on a shared 2-core box): rollouts 1.3-1.6x at nano for R = 4..16 and
1.0-1.5x at micro (a decode step over 128 rows is small enough for per-op cost to matter); the clipped
AdamW step 1.6-3.9x, but it is ~1% of a step; the training forward and backward nothing (0.8-1.0x):
at 128 rows a replica they are matmul- and memory-bound, per-op cost is a few % of them, and a pass
over several replicas holds more activations at once. A whole step: 0.95-1.2x.

Weights are kept in the fused layout: per layer one (R, (H + 2·Hkv)·d, D) QKV leaf and one (R, 2·I, D)
gate/up leaf; `replica_state_dict` splits them into the transformers names. A tied model's lm_head
is its embedding (one leaf, as in the model). The stack copies the weights: the models it was built
from do not follow it (`load_replica` / `replica_state_dict` move weights either way).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bench.engine.fused import full_mask, rope_table, unsupported
from bench.engine.padding import left_pad
from bench.engine.rollout import DROP_AT, Generation, NativeBackend, SamplingParams

# Largest activation one stacked training pass may allocate. glibc hands out blocks above 32 MB
# (its largest mmap threshold on 64-bit) as fresh pages and returns them on free, so a pass over all R
# replicas at once faulted in ~1 GB per step (nano, R=8, math-small's batch: 0.7 s of system time, 1.5x
# the wall time of R separate passes) while blocks under it are reused. `logprobs` runs as many
# replicas per pass as fit; the sampler keeps its one large block, the KV cache, between calls.
PASS_BYTES = 32 << 20

# The fewest rows per replica the sampler decodes once rows start leaving. A CPU matmul with 1-3 rows
# takes another kernel path than one with 4 or more and rounds differently (measured: every
# (in, out) shape of nano..small), so with this floor a replica's rows always take the same path,
# whichever replicas share the stack (bitwise replica independence on this machine's CPU; another CPU's
# BLAS may draw its kernel lines elsewhere and round ~1e-6 apart, as CI's did; NativeBackend drops to 1).
MIN_ROWS = 4


def _signature(model: torch.nn.Module) -> dict:
    """Everything the stacked forward reads from a model besides its weights' values."""
    cfg, inner = model.config, model.model
    at = inner.layers[0].self_attn
    return {
        "model_type": cfg.model_type, "layers": len(inner.layers), "embed": tuple(inner.embed_tokens.weight.shape),
        "heads": cfg.num_attention_heads, "kv_heads": cfg.num_key_value_heads,
        "head_dim": getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        "intermediate": tuple(inner.layers[0].mlp.gate_proj.weight.shape), "rms_norm_eps": cfg.rms_norm_eps,
        "qkv_bias": at.q_proj.bias is not None, "o_bias": at.o_proj.bias is not None,
        "tied": model.lm_head.weight is inner.embed_tokens.weight, "eos_token_id": getattr(cfg, "eos_token_id", None),
        "inv_freq": tuple(inner.rotary_emb.inv_freq.tolist()), "dtype": inner.embed_tokens.weight.dtype,
        "device": inner.embed_tokens.weight.device,
    }


def _lin(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear per replica: x (R, M, in), w (R, out, in), b (R, out) -> (R, M, out). Bitwise
    F.linear's result for each replica (the same BLAS kernel, batched)."""
    return torch.bmm(x, w.mT) if b is None else torch.baddbmm(b[:, None], x, w.mT)


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """F.rms_norm per replica, weight (R, D) on x (R, M, D) (bitwise F.rms_norm with that weight; one
    replica takes its fused kernel, one pass over x instead of two)."""
    if w.shape[0] == 1:
        return F.rms_norm(x, (x.shape[-1],), w[0], eps)
    return F.rms_norm(x, (x.shape[-1],), None, eps) * w[:, None]


class StackedLM:
    """R replicas' weights as (R, ...) leaves, with the fused forward, decode and sampler over all."""

    def __init__(self, like: torch.nn.Module, R: int):
        """Zero weights for R replicas shaped like `like` (use `from_models`)."""
        why = unsupported(like)
        if why is not None:
            raise ValueError(f"StackedLM covers what the fused forward does; this model has {why}")
        self.R = R
        self.sig = _signature(like)
        cfg = like.config
        self.H, self.Hkv, self.d = self.sig["heads"], self.sig["kv_heads"], self.sig["head_dim"]
        self.V, self.D = self.sig["embed"]
        self.I = self.sig["intermediate"][0]
        self.eps = cfg.rms_norm_eps
        self.eos = cfg.eos_token_id if isinstance(cfg.eos_token_id, int) else None  # as FusedLM
        self.inv_freq = like.model.rotary_emb.inv_freq.detach().clone()
        self.tied = self.sig["tied"]
        self.n_layers = self.sig["layers"]
        shapes = {"embed": (self.V, self.D), "norm": (self.D,)}
        if not self.tied:
            shapes["lm_head"] = (self.V, self.D)
        qkv = (self.H + 2 * self.Hkv) * self.d
        for i in range(self.n_layers):
            shapes |= {f"{i}.ln1": (self.D,), f"{i}.wqkv": (qkv, self.D), f"{i}.wo": (self.D, self.H * self.d),
                       f"{i}.ln2": (self.D,), f"{i}.wgu": (2 * self.I, self.D), f"{i}.wdown": (self.D, self.I)}
            if self.sig["qkv_bias"]:
                shapes[f"{i}.bqkv"] = (qkv,)
            if self.sig["o_bias"]:
                shapes[f"{i}.bo"] = (self.D,)
        kw = {"dtype": self.sig["dtype"], "device": self.sig["device"]}
        self.params = {k: torch.zeros((R, *s), **kw, requires_grad=True) for k, s in shapes.items()}

    @classmethod
    def from_models(cls, models: list[torch.nn.Module]) -> StackedLM:
        """A stack holding a copy of each model's weights, replica r = models[r]."""
        if not models:
            raise ValueError("StackedLM.from_models needs at least one model")
        stack = cls(models[0], len(models))
        for r, m in enumerate(models):
            stack.load_replica(r, m)
        return stack

    # ------------------------------------------------------------------ weights
    def parameters(self) -> list[torch.Tensor]:
        return list(self.params.values())

    def named_parameters(self) -> list[tuple[str, torch.Tensor]]:
        return list(self.params.items())

    def _hf_names(self) -> list[tuple[str, str, slice | None]]:
        """(transformers name, stacked name, rows of the stacked leaf) for every model weight."""
        H, Hkv, d = self.H, self.Hkv, self.d
        q, k = slice(0, H * d), slice(H * d, (H + Hkv) * d)
        v, gate, up = slice((H + Hkv) * d, (H + 2 * Hkv) * d), slice(0, self.I), slice(self.I, 2 * self.I)
        out = [("model.embed_tokens.weight", "embed", None), ("model.norm.weight", "norm", None),
               ("lm_head.weight", "embed" if self.tied else "lm_head", None)]
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            out += [(p + "input_layernorm.weight", f"{i}.ln1", None), (p + "post_attention_layernorm.weight", f"{i}.ln2", None),
                    (p + "self_attn.q_proj.weight", f"{i}.wqkv", q), (p + "self_attn.k_proj.weight", f"{i}.wqkv", k),
                    (p + "self_attn.v_proj.weight", f"{i}.wqkv", v), (p + "self_attn.o_proj.weight", f"{i}.wo", None),
                    (p + "mlp.gate_proj.weight", f"{i}.wgu", gate), (p + "mlp.up_proj.weight", f"{i}.wgu", up),
                    (p + "mlp.down_proj.weight", f"{i}.wdown", None)]
            if self.sig["qkv_bias"]:
                out += [(p + "self_attn.q_proj.bias", f"{i}.bqkv", q), (p + "self_attn.k_proj.bias", f"{i}.bqkv", k),
                        (p + "self_attn.v_proj.bias", f"{i}.bqkv", v)]
            if self.sig["o_bias"]:
                out.append((p + "self_attn.o_proj.bias", f"{i}.bo", None))
        return out

    def _unstack(self, r: int, grad: bool) -> dict[str, torch.Tensor]:
        out = {}
        for name, key, rows in self._hf_names():
            t = self.params[key].grad if grad else self.params[key]
            if t is None:
                continue
            t = t.detach()[r]
            out[name] = (t if rows is None else t[rows]).clone()
        return out

    def replica_state_dict(self, r: int) -> dict[str, torch.Tensor]:
        """Replica r's weights under the transformers model's own names (copies): load them with
        `model.load_state_dict(...)` to evaluate or save replica r with the existing code."""
        return self._unstack(r, grad=False)

    def replica_grads(self, r: int) -> dict[str, torch.Tensor]:
        """Replica r's gradients under the transformers names (copies; names without a gradient left out)."""
        return self._unstack(r, grad=True)

    @torch.no_grad()
    def load_replica(self, r: int, model: torch.nn.Module) -> None:
        """Copy `model`'s weights into replica r (the model must match the stack's configuration)."""
        why = unsupported(model)
        if why is not None:
            raise ValueError(f"StackedLM covers what the fused forward does; model for replica {r} has {why}")
        sig = _signature(model)
        for k, v in sig.items():
            if v != self.sig[k]:
                shown = "differs" if k == "inv_freq" else f"{v!r}, the stack has {self.sig[k]!r}"
                raise ValueError(f"model for replica {r} does not match the stack: {k} {shown}")
        weights = dict(model.named_parameters())
        for name, key, rows in self._hf_names():
            if name in weights:  # a tied lm_head is not a parameter of its own
                dst = self.params[key][r]
                (dst if rows is None else dst[rows]).copy_(weights[name])

    @torch.no_grad()
    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """torch.nn.utils.clip_grad_norm_ per replica: each replica's gradient norm over all its
        weights (R,), and its gradients scaled by min(1, max_norm / (norm + 1e-6)) on their own."""
        grads = [p.grad for p in self.params.values() if p.grad is not None]
        norms = torch.stack([torch.linalg.vector_norm(g.reshape(self.R, -1), dim=1) for g in grads])
        total = torch.linalg.vector_norm(norms, dim=0)
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view(self.R, *[1] * (g.dim() - 1)))
        return total

    # ------------------------------------------------------------------ forward
    # The forward pieces take the weights `w` to use: self.params, or slices of it (k replicas of R)
    @staticmethod
    def _layer(w: dict, i: int) -> tuple:
        return (w[f"{i}.ln1"], w[f"{i}.wqkv"], w.get(f"{i}.bqkv"), w[f"{i}.wo"], w.get(f"{i}.bo"), w[f"{i}.ln2"],
                w[f"{i}.wgu"], w[f"{i}.wdown"])

    def _embed(self, w: dict, ids: torch.Tensor) -> torch.Tensor:
        """(k, M) ids -> (k, M, D): each replica's own embedding rows (one gather over k·V rows)."""
        k = ids.shape[0]
        off = torch.arange(k, device=ids.device)[:, None] * self.V
        return F.embedding(ids + off, w["embed"].reshape(k * self.V, self.D))

    def rope(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (..., 1, d) for positions (...), as FusedLM.rope."""
        f = pos[..., None].float() * self.inv_freq
        emb = torch.cat([f, f], -1)
        return emb.cos()[..., None, :], emb.sin()[..., None, :]

    def _trunk(self, w: dict, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attend) -> torch.Tensor:
        """The layers over x (R, M, D) with rotary cos, sin (R, M, 1, d); `attend(i, qkv)` maps the
        rotated (R, M, H + 2·Hkv, d) projections to attention outputs (R, M, H·d)."""
        R, M, _ = x.shape
        H, Hkv, d = self.H, self.Hkv, self.d
        for i in range(self.n_layers):
            ln1, wqkv, bqkv, wo, bo, ln2, wgu, wdown = self._layer(w, i)
            h = _rms(x, ln1, self.eps)
            qkv = _lin(h, wqkv, bqkv).view(R, M, H + 2 * Hkv, d)
            qk, v = qkv[:, :, :H + Hkv], qkv[:, :, H + Hkv:]
            x1, x2 = qk.chunk(2, -1)
            qkv = torch.cat([qk * cos.to(qk.dtype) + torch.cat([-x2, x1], -1) * sin.to(qk.dtype), v], 2)
            x = x + _lin(attend(i, qkv), wo, bo)
            h = _rms(x, ln2, self.eps)
            g, u = _lin(h, wgu).chunk(2, -1)
            x = x + _lin(F.silu(g) * u, wdown)
        return x

    def _head(self, w: dict, h: torch.Tensor) -> torch.Tensor:
        return _lin(_rms(h, w["norm"], self.eps), w["embed" if self.tied else "lm_head"])

    def logprobs(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion: torch.Tensor,
                 temperature: float = 1.0, with_entropy: bool = False, entropy_grad: bool = False,
                 replicas: slice | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`sequence_logprobs` for every replica at once: per-token log-probs (R, B, T) of
        `completion` (R, B, T) after left-padded prompts (R, B, P) with masks (R, B, P), and the
        entropy (R, B, T) of the tempered distribution when asked (detached unless entropy_grad).

        The fused `completion_logits` per replica, batched: each replica's distinct prompts run
        once (prefix sharing) and only its real completion tokens (up to the first EOS) are
        computed; replica r's rows are [its U prompts · P | its real tokens], padded to the
        largest U and real-token count of the stack with rows that nothing reads (the padding's
        cost: a pass runs at its longest replica's size). 0 on padding after EOS, as there.
        On a CPU, replicas run k at a time, as many as keep a pass's largest activation under
        PASS_BYTES; elsewhere all at once.

        replicas: only these replicas (R = their number), e.g. slice(i, i + k) to run a forward and
        backward per group of replicas and so hold one group's activations at a time; a backward
        through part of the stack still writes a zero gradient for the rest of each leaf.
        """
        R, B, T = completion.shape
        params = self.params
        if replicas is not None:
            params = {n: t[replicas] for n, t in params.items()}
        n = len(range(self.R)[replicas or slice(None)])
        if not prompt_ids.shape[:2] == prompt_mask.shape[:2] == completion.shape[:2] == (n, B):
            raise ValueError(f"prompts {tuple(prompt_ids.shape)} and completions {tuple(completion.shape)} must be "
                             f"(R={n}, B, ...) each")
        U, N = self._sizes(prompt_ids, prompt_mask, completion)
        per = (U * prompt_ids.shape[-1] + N).max() * max(2 * self.I, self.V) * self.params["embed"].element_size()
        # the cap is the CPU allocator's (PASS_BYTES); a GPU's caching allocator reuses blocks of any size
        k = max(1, min(R, PASS_BYTES // int(per))) if completion.device.type == "cpu" else R
        if k == R:
            return self._logprobs(params, prompt_ids, prompt_mask, completion, temperature, with_entropy,
                                  entropy_grad)
        # split, not slices: its backward assembles each leaf's gradient once, where a slice's would
        # fill a zero gradient of the whole leaf for every pass
        ws = [dict(zip(params, part)) for part in zip(*(t.split(k) for t in params.values()))]
        parts = [self._logprobs(w, prompt_ids[i:i + k], prompt_mask[i:i + k], completion[i:i + k], temperature,
                                with_entropy, entropy_grad) for w, i in zip(ws, range(0, R, k))]
        return torch.cat([p[0] for p in parts]), None if not with_entropy else torch.cat([p[1] for p in parts])

    def _real(self, completion: torch.Tensor) -> torch.Tensor:
        """(R, B·T) bool: completion tokens after each row's first EOS (right padding, not scored)."""
        R, B, T = completion.shape
        if self.eos is None:
            return torch.zeros((R, B * T), dtype=torch.bool, device=completion.device)
        is_eos = (completion == self.eos).long()
        return ((is_eos.cumsum(-1) - is_eos) > 0).view(R, B * T)

    def _sizes(self, prompt_ids, prompt_mask, completion) -> tuple[torch.Tensor, torch.Tensor]:
        """Distinct prompts (R,) and real completion tokens (R,) per replica."""
        R, B, P = prompt_ids.shape
        U = torch.tensor([len(torch.unique(torch.cat([prompt_ids[r], prompt_mask[r].long()], 1), dim=0))
                          for r in range(R)])
        return U, (~self._real(completion)).sum(1).cpu()

    def _logprobs(self, w: dict, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion: torch.Tensor,
                  temperature: float, with_entropy: bool, entropy_grad: bool):
        R, B, T = completion.shape
        P = prompt_ids.shape[-1]
        H, Hkv, d, D = self.H, self.Hkv, self.d, self.D
        dev = completion.device
        # distinct prompts per replica: torch.unique sorts by replica first, so each replica's are a block
        rep = torch.arange(R, device=dev).repeat_interleave(B)
        keys, inv = torch.unique(torch.cat([rep[:, None], prompt_ids.reshape(R * B, P),
                                            prompt_mask.reshape(R * B, P).long()], 1), dim=0, return_inverse=True)
        owner = keys[:, 0]
        counts = torch.bincount(owner, minlength=R)
        U = int(counts.max())
        first = counts.cumsum(0) - counts
        slot = owner * U + torch.arange(len(keys), device=dev) - first[owner]  # each distinct prompt's row in (R·U)
        local = inv - first[rep]  # (R·B,): index of each row's prompt among its replica's U
        g = rep * U + local  # (R·B,): its row among the R·U prompt rows
        uniq = torch.zeros((R * U, P), dtype=torch.long, device=dev).index_copy_(0, slot, keys[:, 1:P + 1])
        patt = torch.zeros((R * U, P), dtype=torch.bool, device=dev).index_copy_(0, slot, keys[:, P + 1:].bool())
        # real completion tokens, up to and including each row's first EOS, in (b, t) order per replica,
        # then each replica padded to the stack's most real tokens N with some of its non-real positions
        flat_c = completion.reshape(R, B * T)
        after = self._real(completion)
        n_real = (~after).sum(1)
        N = int(n_real.max())
        order = torch.sort(after.to(torch.uint8), dim=1, stable=True).indices[:, :N]  # (R, N) into B·T
        valid = torch.arange(N, device=dev) < n_real[:, None]
        flat = (order + torch.arange(R, device=dev)[:, None] * (B * T)).flatten()  # into R·B·T, distinct
        targets = flat_c.gather(1, order)

        ppos = (patt.long().cumsum(-1) - 1).clamp(min=0)
        cpos = patt.sum(-1).index_select(0, g)[:, None] + torch.arange(T, device=dev)  # (R·B, T)
        (cos_p, sin_p), (cos_c, sin_c) = self.rope(ppos.view(R, U * P)), self.rope(cpos.view(R, B * T))
        idx = order[..., None, None].expand(R, N, 1, d)
        cos = torch.cat([cos_p, cos_c.gather(1, idx)], 1)
        sin = torch.cat([sin_p, sin_c.gather(1, idx)], 1)
        mask_p = full_mask(patt)
        causal = torch.ones((T, T), dtype=torch.bool, device=dev).tril()
        mask_c = torch.cat([patt.index_select(0, g)[:, None, None, :].expand(R * B, 1, T, P),
                            causal.expand(R * B, 1, T, T)], -1)
        UP = U * P

        def attend(i, qkv):  # prompts: (R·U) rows; completions: (R·B) rows over their prompt's keys and their own
            C = qkv.shape[2]
            qp, kp, vp = qkv[:, :UP].reshape(R * U, P, C, d).transpose(1, 2).split([H, Hkv, Hkv], 1)
            grid = qkv.new_zeros((R * B * T, C, d)).index_copy(0, flat, qkv[:, UP:].reshape(R * N, C, d))
            qc, kc, vc = grid.view(R * B, T, C, d).transpose(1, 2).split([H, Hkv, Hkv], 1)
            ap = F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask_p, enable_gqa=Hkv != H)
            kf = torch.cat([kp.index_select(0, g), kc], 2)
            vf = torch.cat([vp.index_select(0, g), vc], 2)
            ac = F.scaled_dot_product_attention(qc, kf, vf, attn_mask=mask_c, enable_gqa=Hkv != H)
            return torch.cat([ap.transpose(1, 2).reshape(R, UP, H * d),
                              ac.transpose(1, 2).reshape(R * B * T, H * d).index_select(0, flat).view(R, N, H * d)], 1)

        x = torch.cat([self._embed(w, uniq.view(R, UP)), self._embed(w, targets)], 1)
        x = self._trunk(w, x, cos, sin, attend)
        # the state that scores real token n = (b, j): its prompt's last for j == 0, else real token n - 1
        j = order % T
        last = local.view(R, B).gather(1, order // T) * P + P - 1
        src = torch.where(j == 0, last, UP + torch.arange(N, device=dev) - 1)
        logits = self._head(w, x.gather(1, src[..., None].expand(R, N, D)))  # (R, N, V)
        logits = logits.float() / temperature
        logprobs = logits.log_softmax(-1)
        logp = logprobs.gather(-1, targets[..., None]).squeeze(-1)
        entropy = None
        if with_entropy:
            with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
                entropy = -(logprobs.exp() * logprobs).sum(-1)

        def grid(t: torch.Tensor) -> torch.Tensor:  # (R, N) -> (R, B, T), 0 off the real tokens
            t = torch.where(valid, t, 0.0)
            return t.new_zeros(R * B * T).index_copy(0, flat, t.flatten()).view(R, B, T)

        return grid(logp), None if entropy is None else grid(entropy)

    # ------------------------------------------------------------------ sampling
    def rope_table(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """As FusedLM.rope_table: cos, sin (n, d), sin's first half negated."""
        return rope_table(self.inv_freq, n)

    def decode(self, tok: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, bias: torch.Tensor,
               cache: torch.Tensor, start: int) -> torch.Tensor:
        """FusedLM.decode over the stack: logits (R·n, V) after `tok` (R·n,), rows grouped by replica
        (n per replica); cos, sin (R·n, 1, d); bias (R·n, Hkv, 1, W); cache (layers, 2, R·n, Hkv, W, d)."""
        Bn = tok.shape[0]
        R, H, Hkv, d = self.R, self.H, self.Hkv, self.d
        n = Bn // R
        K = start + 1
        bias = bias[..., :K].reshape(Bn * Hkv, 1, K)
        w = self.params
        x = self._embed(w, tok.view(R, n))
        for i in range(self.n_layers):
            ln1, wqkv, bqkv, wo, bo, ln2, wgu, wdown = self._layer(w, i)
            h = _rms(x, ln1, self.eps)
            qkv = _lin(h, wqkv, bqkv).view(Bn, H + 2 * Hkv, d)
            qk = qkv[:, :H + Hkv]
            rot = torch.cat([qk[..., d // 2:], qk[..., :d // 2]], -1)
            qk.mul_(cos).addcmul_(rot, sin)
            cache[i, :, :, :, start] = qkv[:, H:].view(Bn, 2, Hkv, d).transpose(0, 1)
            k, v = cache[i, 0, :, :, :K].reshape(Bn * Hkv, K, d), cache[i, 1, :, :, :K].reshape(Bn * Hkv, K, d)
            s = torch.baddbmm(bias, qkv[:, :H].reshape(Bn * Hkv, H // Hkv, d), k.transpose(1, 2), alpha=d**-0.5)
            a = torch.bmm(s.softmax(-1), v).view(R, n, H * d)
            x = x + _lin(a, wo, bo)
            h = _rms(x, ln2, self.eps)
            g, u = _lin(h, wgu).chunk(2, -1)
            x = x + _lin(F.silu(g).mul_(u), wdown)
        return self._head(w, x).view(Bn, self.V)

    def _cache_buffers(self, n: int, dtype: torch.dtype, device: torch.device) -> list[torch.Tensor]:
        """Two flat buffers of at least n elements, kept from call to call: the KV cache and the one
        that dropping rows copies it into (see PASS_BYTES: a fresh cache of R·B rows is fresh pages,
        0.55M page faults and ~1.4 s of system time per rollout at micro, R=16, copied at each drop)."""
        bufs = getattr(self, "_bufs", None)
        if bufs is None or bufs[0].numel() < n or bufs[0].dtype != dtype or bufs[0].device != device:
            bufs = self._bufs = [torch.empty(n, dtype=dtype, device=device) for _ in range(2)]
        return list(bufs)

    @torch.no_grad()
    def generate(self, prompts: list[list[list[int]]], params: SamplingParams, seeds: list[int | torch.Generator],
                 pad_id: int, eos_id: int, drop_finished: bool | None = None) -> list[Generation]:
        """NativeBackend.generate for every replica at once: replica r samples prompts[r] with
        SamplingParams(seed=seeds[r]) (params.seed unused), the same random stream (its own
        generator, one torch.rand(B) per token) and the same inverse-CDF pick, so its tokens are
        NativeBackend's for its weights and seed (up to float rounding of logits flipping a token).
        A seed may be a generator on the stack's device: its stream goes on from where it is (as
        NativeBackend's one generator goes on across the chunks of one call).

        Every replica needs the same number B of prompts. All R·B rows decode as one batch, B per
        replica. On the CPU (drop_finished None) finished rows leave once DROP_AT of the rows could:
        each replica keeps its live rows, padded with its own finished ones (decoding on, masked out) to
        the most live rows of any replica, and never fewer than MIN_ROWS (see there). Draws are per
        replica and per prompt index, so no replica's stream shifts when rows leave.
        """
        R = self.R
        if len(prompts) != R or len(seeds) != R:
            raise ValueError(f"generate() needs {R} prompt lists and {R} seeds, got {len(prompts)} and {len(seeds)}")
        B = len(prompts[0])
        if B == 0 or any(len(p) != B for p in prompts):
            raise ValueError(f"generate() needs the same number (> 0) of prompts per replica, got {[len(p) for p in prompts]}")
        device = self.inv_freq.device
        drop = device.type == "cpu" if drop_finished is None else drop_finished
        gens = [s if isinstance(s, torch.Generator) else torch.Generator(device=device).manual_seed(s) for s in seeds]
        H, Hkv, d, L = self.H, self.Hkv, self.d, params.max_new_tokens
        # prefix sharing: each replica's distinct prompts prefilled once; replicas padded to the most (U)
        index = [{} for _ in range(R)]
        inv = [[index[r].setdefault(tuple(p), len(index[r])) for p in prompts[r]] for r in range(R)]
        U = max(len(ix) for ix in index)
        uniq = [list(p) for ix in index for p in (list(ix) + [()] * (U - len(ix)))]
        ids, att = left_pad(uniq, pad_id)
        ids, att = ids.to(device), att.to(device)
        P = ids.shape[1]
        pos = (att.cumsum(-1) - 1).clamp(min=0)
        mask_p = full_mask(att)
        kvs = []

        def attend(i, qkv):
            q, k, v = qkv.view(R * U, P, -1, d).transpose(1, 2).split([H, Hkv, Hkv], 1)
            kvs.append((k, v))
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask_p, enable_gqa=Hkv != H)
            return a.transpose(1, 2).reshape(R, U * P, H * d)

        cos, sin = self.rope(pos.view(R, U * P))
        w = self.params
        x = self._trunk(w, self._embed(w, ids.view(R, U * P)), cos, sin, attend)
        logits = self._head(w, x.view(R, U, P, self.D)[:, :, -1])  # (R, U, V)
        g = torch.tensor([r * U + j for r in range(R) for j in inv[r]], device=device)  # (R·B,)
        shape = (self.n_layers, 2, R * B, Hkv, P + L, d)
        bufs = self._cache_buffers(math.prod(shape), kvs[0][0].dtype, device)
        cache = bufs[0][:math.prod(shape)].view(shape)
        for i, (k, v) in enumerate(kvs):
            cache[i, 0, :, :, :P] = k.index_select(0, g)
            cache[i, 1, :, :, :P] = v.index_select(0, g)
        keys = torch.cat([att.index_select(0, g).bool(), torch.ones((R * B, L), dtype=torch.bool, device=device)], 1)
        bias = torch.zeros(keys.shape, device=device).masked_fill_(~keys, float("-inf"))
        bias = bias[:, None, None].expand(R * B, Hkv, 1, P + L).contiguous()
        logits = logits.reshape(R * U, self.V).index_select(0, g)
        next_pos = pos[:, -1].index_select(0, g) + 1
        cos_t, sin_t = self.rope_table(int(next_pos.max()) + L)
        tokens = torch.full((R * B, L), pad_id, dtype=torch.long, device=device)
        logp = torch.zeros((R * B, L), device=device)
        mask = torch.zeros((R * B, L), device=device)
        live = torch.ones(R * B, dtype=torch.bool, device=device)
        rows = torch.arange(R * B, device=device)  # r·B + prompt index of each row; n rows per replica, in blocks
        n = B
        for t in range(L):
            logits = logits.float() / params.temperature
            u = None
            if not params.greedy:  # every replica draws for all its B prompts every step, as NativeBackend
                u = torch.stack([torch.rand(B, device=device, generator=gen) for gen in gens]).view(R * B)
                u = u.index_select(0, rows) if n < B else u
            tok = NativeBackend._pick(logits, params, u)
            lp = logits.log_softmax(-1).gather(-1, tok[:, None]).squeeze(-1)
            tokens[rows, t] = torch.where(live, tok, pad_id)
            logp[rows, t] = torch.where(live, lp, 0.0)
            mask[rows, t] = live.float()
            live = live & (tok != eos_id)
            if drop:
                per = live.view(R, n).sum(1)
                m = int(per.max())  # host sync once per token, as NativeBackend on the CPU
                if m == 0:
                    break
                m = max(m, min(n, MIN_ROWS))
                if n - m >= max(1, int(n * DROP_AT)) and t + 1 < L:
                    # per replica: its live rows first (in order), then finished ones up to m; rows are
                    # whole contiguous blocks of a (layers·2, rows, rest) view, copied to the other buffer
                    keep = torch.sort((~live).view(R, n).to(torch.uint8), dim=1, stable=True).indices[:, :m]
                    keep = (keep + torch.arange(R, device=device)[:, None] * n).flatten()
                    src = cache.view(2 * self.n_layers, R * n, -1)
                    bufs = bufs[::-1]
                    dst = bufs[0][:src[:, :R * m].numel()].view(src.shape[0], R * m, src.shape[2])
                    cache = torch.index_select(src, 1, keep, out=dst).view(*shape[:2], R * m, *shape[3:])
                    rows, bias, next_pos, tok, live = rows[keep], bias[keep], next_pos[keep], tok[keep], live[keep]
                    n = m
            elif (t + 1) % 8 == 0 and not bool(live.any()):
                break
            if t + 1 == L:
                break
            cos, sin = cos_t.index_select(0, next_pos)[:, None], sin_t.index_select(0, next_pos)[:, None]
            logits = self.decode(tok, cos, sin, bias, cache, start=P + t)
            next_pos = next_pos + 1
        ended = torch.ones(R * B, dtype=torch.bool, device=device).index_copy_(0, rows, ~live)
        out = []
        for r in range(R):
            sl = slice(r * B, (r + 1) * B)
            m_r = mask[sl]
            width = max(1, int(m_r.sum(0).nonzero().max()) + 1) if bool(m_r.any()) else 1
            out.append(Generation(tokens=tokens[sl, :width], mask=m_r[:, :width], logp=logp[sl, :width],
                                  truncated=~ended[sl]))
        return out
