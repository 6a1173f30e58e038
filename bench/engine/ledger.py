"""The compute ledger: analytic FLOPs and tokens for everything a step does.

Budgets and every curve's x-axis are in this ledger, so "matched compute" means the same FLOPs.
Per token at context position c (1-based) of a model with P parameters (tied embeddings counted
once: the output projection is a real 2·V·d matmul, the input lookup is free), `layers` layers and
attention width d:

    forward  = 2·P + 4·layers·c·d          (matmuls + QKᵀ and AV over c keys)
    training = 3 × forward                 (forward + backward ≈ 2× forward)

A sequence of n tokens therefore costs  forward_seq(n) = 2·P·n + 2·layers·d·n·(n+1).
Generation with a KV cache: the prefill is forward_seq(prompt); each generated token at context
c costs one forward token. Reference/critic passes and the log-prob recomputation are
forward_seq(prompt + completion); training is 3·forward_seq per update epoch. Prompt tokens are
counted wherever a forward processes them. Padding is not counted: FLOPs are of real tokens.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class ModelShape:
    params: int
    layers: int
    attn_width: int

    @classmethod
    def of(cls, model: torch.nn.Module) -> ModelShape:
        cfg = model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        return cls(sum(p.numel() for p in model.parameters()), cfg.num_hidden_layers, cfg.num_attention_heads * head_dim)

    def forward_seq(self, n: int, start: int = 0) -> int:
        """FLOPs of a forward over positions start+1 .. start+n (a cached continuation when start > 0)."""
        ctx_sum = (start + n) * (start + n + 1) // 2 - start * (start + 1) // 2
        return 2 * self.params * n + 4 * self.layers * self.attn_width * ctx_sum


@dataclass
class Ledger:
    """Running totals. `flops` is the budget's currency; the rest are reported beside it."""

    flops: int = 0
    gen_tokens: int = 0  # every generated token: kept, rejected (dynamic sampling) and greedy baselines
    train_tokens: int = 0  # completion tokens that received a gradient, summed over updates
    seconds: dict[str, float] = field(default_factory=dict)

    def generation(self, shape: ModelShape, prompt_lens: Iterable[int], gen_lens: Iterable[int]) -> int:
        f = 0
        n_gen = 0
        for p, g in zip(prompt_lens, gen_lens):
            f += shape.forward_seq(p) + shape.forward_seq(g, start=p)
            n_gen += g
        self.flops += f
        self.gen_tokens += n_gen
        return f

    def forward(self, shape: ModelShape, seq_lens: Iterable[int]) -> int:
        f = sum(shape.forward_seq(n) for n in seq_lens)
        self.flops += f
        return f

    def training(self, shape: ModelShape, seq_lens: Iterable[int], completion_tokens: int) -> int:
        f = 3 * sum(shape.forward_seq(n) for n in seq_lens)
        self.flops += f
        self.train_tokens += completion_tokens
        return f

    def time(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds
