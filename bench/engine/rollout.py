"""Rollout backends: turn prompts into completions with per-token log-probs.

A backend implements `RolloutBackend`: `generate(prompts, params) -> Generation` samples from the
weights it was last given by `sync(model)`, and `behaviour_logprobs(batch, ...)` says which
log-probs the update uses as logp_old. The training step sees only these three calls, so a vLLM
backend (or a producer on another worker) slots in beside `NativeBackend` without touching it.
`bench.engine.backends.make_backend` builds one by name.
"""
from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch
from transformers import DynamicCache

from bench.engine.fused import FusedLM, full_mask, unsupported
from bench.engine.padding import left_pad, pad_cat
from bench.engine.policy import sequence_logprobs

if TYPE_CHECKING:
    from bench.engine.records import Batch


# the sampler's weight precision: "fp32" samples with the trainer's weights; a lower one samples with
# them rounded (the mismatch regime: an inference engine in bf16 behind an fp32 trainer), or quantised
# to integers, weight-only (int8 / int4 rollouts behind a full-precision trainer, as FlashRL and QeRL
# sample; activations stay fp32)
FLOAT_PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16}
INT_BITS = {"int8": 8, "int4": 4}
PRECISIONS = ("fp32", *FLOAT_PRECISIONS, *INT_BITS)
# int4's scales: one per QUANT_GROUP consecutive weights of a row (GPTQ and AWQ use 128 at LLM widths;
# the nano models' rows are 64-256 wide). int8: one scale per row (per output channel).
QUANT_GROUP = 32


def fake_quantize(w: torch.Tensor, bits: int, group: int | None = None) -> torch.Tensor:
    """`w` rounded to a symmetric integer grid of `bits` bits, returned in w's dtype: along the last
    dim, one absmax scale per row (group None) or per `group` consecutive weights (per row where the
    row's length is not a multiple of it). Each weight moves by at most half a step, scale / 2 with
    scale = absmax / (2^(bits-1) - 1): weight-only quantisation (W8A16, W4A16) as a sampler sees it."""
    qmax = 2 ** (bits - 1) - 1
    n = w.shape[-1]
    g = group if group and n % group == 0 else n
    x = w.reshape(*w.shape[:-1], n // g, g)
    scale = x.abs().amax(dim=-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny) / qmax
    return (torch.round(x / scale).clamp(-qmax, qmax) * scale).reshape(w.shape)


def rounded(w: torch.Tensor, precision: str) -> torch.Tensor:
    """A weight as a sampler in `precision` holds it, in w's dtype: cast to bf16/fp16 and back, or
    (int8 / int4) matrices quantised (`fake_quantize`) with vectors (norms, biases) kept, as
    weight-only quantisation keeps them."""
    if precision in FLOAT_PRECISIONS:
        return w.to(FLOAT_PRECISIONS[precision]).to(w.dtype)
    if w.dim() < 2:
        return w
    bits = INT_BITS[precision]
    return fake_quantize(w, bits, QUANT_GROUP if bits < 8 else None)


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    greedy: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_new_tokens <= 0:
            raise ValueError(f"max_new_tokens must be > 0, got {self.max_new_tokens}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature} (use greedy=True)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass
class Generation:
    """Completions for B prompts, right-padded to the longest completion T.

    tokens (B, T) long (pad after EOS); mask (B, T) float, 1 on generated tokens including EOS;
    logp (B, T) log-prob of each token under the tempered policy (no top-p renormalisation, as
    the trainer computes it); truncated (B,) bool: hit max_new_tokens without EOS.
    """

    tokens: torch.Tensor
    mask: torch.Tensor
    logp: torch.Tensor
    truncated: torch.Tensor

    @property
    def lengths(self) -> torch.Tensor:
        return self.mask.sum(-1).long()


@dataclass(frozen=True)
class BehaviourLogprobs:
    """logp (B, T): the behaviour policy's log-probs the update uses as logp_old; recomputed: a
    forward pass produced them (the trainer charges it to the ledger and logs the gap to the
    sampler's own numbers), else they are the sampler's, free."""

    logp: torch.Tensor
    recomputed: bool


class RolloutBackend(Protocol):
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> Generation:
        """Completions sampled from the weights of the last `sync` (the behaviour policy)."""

    def sync(self, model: torch.nn.Module) -> None:
        """Sample from `model`'s weights from now on (called after every step, and once at set-up)."""

    def behaviour_logprobs(self, batch: Batch, temperature: float, micro_batch_size: int) -> BehaviourLogprobs:
        """logp_old for the update on `batch`, whose Rollouts.logp_old hold the sampler's log-probs."""


def _top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    if top_p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(-1, descending=True)
    cum = sorted_logits.softmax(-1).cumsum(-1)
    drop = cum - sorted_logits.softmax(-1) > top_p  # keep the smallest prefix whose mass reaches top_p
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


def cache_kwarg(model: torch.nn.Module) -> str:
    """transformers >= 5.2x takes `cache=`; earlier 5.x releases take `past_key_values=`."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _out_cache(out):
    return out.cache if getattr(out, "cache", None) is not None else out.past_key_values


# A finished row leaves the CPU batch once 1/16 of the rows have finished, not at each EOS: each drop
# copies the whole KV cache (~1/6 of a decode step at micro), while one finished row costs under
# 1% of a step. Measured on micro part 1 of benchmarks/engine_speed.py: 42 -> 21 ms per rollout
# outside the forward. The samples do not change (a row's logits never depend on the other rows).
DROP_AT = 1 / 16


class NativeBackend:
    """Batched sampling in torch with a KV cache, left padding.

    Seeded: the same model, prompts and params give the same samples on the same device and
    thread count. Qwen2/Llama-style models decode with the hand-fused forward of
    `bench.engine.fused` over a static KV cache (one preallocated tensor for every layer):
    measured ~2x the tokens/s of the transformers forward at nano/micro, where per-op overhead
    dominates. Prompts repeated in a batch (the G samples of a group) are prefilled once and
    their keys/values copied to each sample (prefix sharing). Other models use transformers'
    forward with a `DynamicCache`.

    On the CPU rows that emitted EOS leave the batch and the KV cache (in bulk, see DROP_AT), so
    decoding costs the live rows only (RL batches mix lengths of 10 to the cap; measured 25-35% less
    rollout time on nano/micro than decoding finished rows). On an accelerator that check is a host sync
    per token, so rows stay (finished ones decode padding, masked out) and the loop asks whether
    all rows ended every `sync_every` tokens only; sampling draws there on the device.
    """

    def __init__(self, model: torch.nn.Module, pad_id: int, eos_id: int, chunk_size: int = 0,
                 fused: bool = True, sync_every: int = 8, drop_finished: bool | None = None,
                 precision: str = "fp32"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} is not available; valid: {', '.join(PRECISIONS)}")
        self.precision = precision
        self._rounded: torch.nn.Module | None = None
        self.sync(model)
        self.pad_id = pad_id
        self.eos_id = eos_id
        self.chunk_size = chunk_size  # 0: one batch; else split prompts to bound KV-cache memory
        self.fused = fused and unsupported(model) is None
        if sync_every < 1:
            raise ValueError(f"sync_every must be >= 1, got {sync_every}")
        self.sync_every = sync_every
        self.drop_finished = drop_finished  # None: drop on the CPU, keep on an accelerator

    def sync(self, model: torch.nn.Module) -> None:
        """Sample from `model` itself (a reference, not a copy: at lag 0 the live policy); at a lower
        precision, from a copy of its weights rounded (or quantised) to it (kept, refilled each sync)."""
        self.source = model
        if self.precision == "fp32":
            self.model = model
            return
        if self._rounded is None:
            self._rounded = copy.deepcopy(model)
        with torch.no_grad():
            for dst, src in zip(self._rounded.parameters(), model.parameters()):
                dst.copy_(rounded(src.detach(), self.precision))  # rounded or quantised, stored back in fp32
        self.model = self._rounded

    def behaviour_logprobs(self, batch: Batch, temperature: float, micro_batch_size: int) -> BehaviourLogprobs:
        """fp32: the sampler's log-probs: the behaviour weights computed them while decoding, in the
        same precision as the trainer's forward (they match a full recomputation to ~1e-6, see
        tests/engine/test_offpolicy.py), so a second forward would only cost FLOPs.
        bf16/fp16/int8/int4 (the mismatch regime): recomputed by the trainer's fp32 behaviour weights,
        as TRL and verl recompute behind an inference engine; the sampler's numbers stay in the batch."""
        if self.precision == "fp32":
            return BehaviourLogprobs(batch.rollouts.logp_old, recomputed=False)
        return recompute_logprobs(self.source, batch, temperature, micro_batch_size)

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> Generation:
        if not prompts:
            raise ValueError("generate() needs at least one prompt")
        device = next(self.model.parameters()).device
        # the fused path draws on the model's device (no host round trip per token); the
        # transformers path keeps its CPU draws. Either way: same seed, same device, same samples.
        gen = torch.Generator(device=device if self.fused else "cpu").manual_seed(params.seed)
        size = self.chunk_size or len(prompts)
        was_training = self.model.training
        self.model.eval()
        try:
            run = self._generate_fused if self.fused else self._generate_hf
            parts = [run(prompts[i:i + size], params, gen) for i in range(0, len(prompts), size)]
        finally:
            self.model.train(was_training)
        if len(parts) == 1:
            return parts[0]
        return Generation(
            tokens=pad_cat([p.tokens for p in parts], self.pad_id),
            mask=pad_cat([p.mask for p in parts], 0.0),
            logp=pad_cat([p.logp for p in parts], 0.0),
            truncated=torch.cat([p.truncated for p in parts]),
        )

    @staticmethod
    def _pick(logits: torch.Tensor, params: SamplingParams, u: torch.Tensor | None) -> torch.Tensor:
        """Next tokens from tempered logits: argmax, or inverse-CDF sampling with one uniform
        u (B,) per row (an exponential race needs B x vocab draws: measured 15% of a nano rollout)."""
        if params.greedy:
            return logits.argmax(-1)
        cdf = _top_p_filter(logits, params.top_p).softmax(-1).cumsum(-1)
        tok = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).squeeze(-1)
        return tok.clamp_(max=logits.shape[-1] - 1)  # u * total can round onto the last edge

    def _generate_fused(self, prompts: list[list[int]], params: SamplingParams, gen: torch.Generator) -> Generation:
        device = next(self.model.parameters()).device
        lm = FusedLM(self.model)
        drop = device.type == "cpu" if self.drop_finished is None else self.drop_finished  # see the class docstring
        # prefix sharing: prefill each distinct prompt once
        index: dict[tuple, int] = {}
        inv = torch.tensor([index.setdefault(tuple(p), len(index)) for p in prompts], device=device)
        uniq = list(index)
        ids, att = left_pad([list(p) for p in uniq], self.pad_id)
        ids, att = ids.to(device), att.to(device)
        pos = (att.cumsum(-1) - 1).clamp(min=0)
        logits, kvs = lm.forward(ids, lm.rope(pos), full_mask(att), keep=1, want_kv=True)
        B, P, L = len(prompts), ids.shape[1], params.max_new_tokens
        k0 = kvs[0][0]
        cache = torch.empty((len(kvs), 2, B, lm.Hkv, P + L, lm.d), dtype=k0.dtype, device=device)
        for i, (k, v) in enumerate(kvs):
            cache[i, 0, :, :, :P] = k.index_select(0, inv)
            cache[i, 1, :, :, :P] = v.index_select(0, inv)
        # the mask of the cache's columns as an additive bias, built once (rows dropped with the cache):
        # 0 on real prompt tokens and on every generated column, -inf on the prompts' left padding
        keys = torch.cat([att.index_select(0, inv).bool(), torch.ones((B, L), dtype=torch.bool, device=device)], 1)
        bias = torch.zeros(keys.shape, device=device).masked_fill_(~keys, float("-inf"))
        bias = bias[:, None, None].expand(B, lm.Hkv, 1, P + L).contiguous()
        logits = logits[:, -1].index_select(0, inv)
        next_pos = pos[:, -1].index_select(0, inv) + 1
        cos_t, sin_t = lm.rope_table(int(next_pos.max()) + L)  # one table; each step gathers its rows
        tokens = torch.full((B, L), self.pad_id, dtype=torch.long, device=device)
        logp = torch.zeros((B, L), device=device)
        mask = torch.zeros((B, L), device=device)
        live = torch.ones(B, dtype=torch.bool, device=device)  # per batch row: has not emitted EOS
        rows = torch.arange(B, device=device)  # the prompt index of each batch row (rows leave on the CPU)
        for t in range(L):
            logits = logits.float() / params.temperature
            u = None
            if not params.greedy:  # a draw for every prompt every step, ended ones included, so each
                u = torch.rand(B, device=device, generator=gen)  # row's draws never shift
                u = u.index_select(0, rows) if len(rows) < B else u
            tok = self._pick(logits, params, u)
            lp = logits.log_softmax(-1).gather(-1, tok[:, None]).squeeze(-1)
            tokens[rows, t] = torch.where(live, tok, self.pad_id)  # a finished row decodes on, masked out
            logp[rows, t] = torch.where(live, lp, 0.0)
            mask[rows, t] = live.float()
            live = live & (tok != self.eos_id)
            if drop:
                n = int(live.sum())  # host sync once per token: cheap next to a forward pass on a CPU
                if n == 0:
                    break
                if len(rows) - n >= max(1, int(len(rows) * DROP_AT)) and t + 1 < L:
                    # rows are whole contiguous blocks of a (layers·2, B, rest) view: index_select
                    # copies them ~15x faster than advanced indexing into [:, :, keep, :, :cur]
                    keep = live.nonzero().squeeze(-1)
                    new = cache.view(-1, cache.shape[2], cache[0, 0, 0].numel()).index_select(1, keep)
                    cache = new.view(*cache.shape[:2], n, *cache.shape[3:])
                    rows, bias, next_pos, tok, live = rows[keep], bias[keep], next_pos[keep], tok[keep], live[keep]
            elif (t + 1) % self.sync_every == 0 and not bool(live.any()):
                break
            if t + 1 == L:  # the cap: no forward for a token nobody samples
                break
            cos, sin = cos_t.index_select(0, next_pos)[:, None], sin_t.index_select(0, next_pos)[:, None]
            logits = lm.decode(tok, cos, sin, bias, cache, start=P + t)
            next_pos = next_pos + 1
        width = max(1, int(mask.sum(0).nonzero().max()) + 1) if bool(mask.any()) else 1
        truncated = torch.zeros(B, dtype=torch.bool, device=device).index_copy_(0, rows, live)  # dropped rows ended
        return Generation(tokens=tokens[:, :width], mask=mask[:, :width], logp=logp[:, :width], truncated=truncated)

    def _generate_hf(self, prompts: list[list[int]], params: SamplingParams, gen: torch.Generator) -> Generation:
        model = self.model
        device = next(model.parameters()).device
        ids, att = left_pad(prompts, self.pad_id)
        ids, att = ids.to(device), att.to(device)
        pos = (att.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache()
        kw = cache_kwarg(model)
        out = model(input_ids=ids, attention_mask=att, position_ids=pos, use_cache=True, logits_to_keep=1, **{kw: cache})
        B, L = ids.shape[0], params.max_new_tokens
        tokens = torch.full((B, L), self.pad_id, dtype=torch.long, device=device)
        logp = torch.zeros((B, L), device=device)
        mask = torch.zeros((B, L), device=device)
        ended = torch.zeros(B, dtype=torch.bool, device=device)  # per prompt: emitted EOS
        rows = torch.arange(B, device=device)  # prompt index of each row still decoding
        next_pos = pos[:, -1:] + 1
        width = 0
        for t in range(L):
            logits = out.logits[:, -1, :].float() / params.temperature
            logprobs = logits.log_softmax(-1)
            if params.greedy:
                tok = logits.argmax(-1)
            else:
                probs = _top_p_filter(logits, params.top_p).softmax(-1)
                if len(rows) < B:  # draw for every prompt, ended ones included, so each row gets the
                    full = torch.ones((B, probs.shape[-1]), dtype=probs.dtype, device=device)  # draw it
                    probs = full.index_copy_(0, rows, probs)  # would get in a batch that never shrinks
                # sample on CPU with the seeded generator: identical draws whatever the device
                tok = torch.multinomial(probs.cpu(), 1, generator=gen).squeeze(-1).to(device)
                tok = tok[rows] if len(rows) < B else tok
            tokens[rows, t] = tok
            logp[rows, t] = logprobs.gather(-1, tok[:, None]).squeeze(-1)
            mask[rows, t] = 1.0
            width = t + 1
            eos = tok == self.eos_id
            cache = _out_cache(out)
            if bool(eos.any()):  # host sync once per token: cheap next to a forward pass
                ended[rows[eos]] = True
                live = torch.nonzero(~eos).squeeze(-1)
                if live.numel() == 0:
                    break
                cache.batch_select_indices(live)  # in place, every layer's keys and values
                rows, att, next_pos, tok = rows[live], att[live], next_pos[live], tok[live]
            if width == L:  # the cap: no forward for a token nobody samples
                break
            att = torch.cat([att, torch.ones((len(rows), 1), dtype=att.dtype, device=device)], dim=1)
            out = model(input_ids=tok[:, None], attention_mask=att, position_ids=next_pos, use_cache=True, **{kw: cache})
            next_pos = next_pos + 1
        return Generation(tokens=tokens[:, :width], mask=mask[:, :width], logp=logp[:, :width], truncated=~ended)




@torch.no_grad()
def batch_logprobs(model: torch.nn.Module, batch: Batch, temperature: float, micro_batch_size: int) -> torch.Tensor:
    """(B, T) log-probs of `batch`'s completions under `model`, micro-batched, 0 on padding."""
    n = len(batch.tokens)
    chunks = [torch.arange(i, min(i + micro_batch_size, n)) for i in range(0, n, micro_batch_size)]
    logp = torch.cat([sequence_logprobs(model, batch.prompt_ids[i], batch.prompt_mask[i], batch.tokens[i],
                                        temperature)[0] for i in chunks])
    return logp * batch.rollouts.m


def recompute_logprobs(model: torch.nn.Module, batch: Batch, temperature: float, micro_batch_size: int) -> BehaviourLogprobs:
    """logp_old recomputed by `model` (the trainer's weights the sampler was given)."""
    return BehaviourLogprobs(batch_logprobs(model, batch, temperature, micro_batch_size), recomputed=True)
