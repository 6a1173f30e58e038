"""Tolerances for float32 results that two computations reach by summing in different orders.

Another GEMM blocking (the BLAS library picks one per CPU, shape and batch count), another vector
width (AVX2, AVX-512, NEON, the scalar `default` kernels) or another batch composition reorders the
sums inside a forward pass, and the results differ by rounding alone. For a sum of n float32 terms
each order's error is at most γ(n)·Σ|terms|, γ(n) = n·u/(1 − n·u), u = 2⁻²⁴ the unit roundoff
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §4.2, recursive summation; blocked
and pairwise orders have smaller constants), so two orders differ by at most 2γ(n)·Σ|terms|. A forward
pass is a chain of such sums; we add one γ(n) per reduction along the chain (RMSNorm over the hidden
size, each projection over its input width, attention over its keys, softmax over the vocabulary),
relative to the size of the compared values: residual pre-norm transformers keep each stage's gain
near 1, so an error relative to one stage's output carries to the next at about the same size.

These bounds are worst cases, far above the differences a machine shows (1e-7..1e-6 at nano), and
far below what a real fault gives (a wrong mask, position, temperature or replica: 1e-2..1).
Use them where two computations may run other kernels; compare bitwise only what runs the same
kernels on the same shapes in one process.
"""
from __future__ import annotations

import torch

U = 2.0 ** -24  # float32 unit roundoff: half an ulp at 1.0


def gamma(n: int) -> float:
    """Higham's γ(n): the relative error bound of a float32 sum of n terms, in any order."""
    return n * U / (1 - n * U)


def forward_terms(config, seq_len: int) -> int:
    """Σ of the reduction lengths along one causal LM forward (Llama/Qwen2 layout) to the log-probs:
    per layer two RMSNorms, the q/k/v and gate/up projections (hidden), q·k (head dim), softmax and
    attention·V (≤ seq_len keys each), o_proj (hidden), down_proj (intermediate); then the final norm,
    lm_head (hidden) and log_softmax (vocabulary)."""
    h, layers = config.hidden_size, config.num_hidden_layers
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    per_layer = 2 * h + h + head_dim + 2 * seq_len + h + h + config.intermediate_size
    return layers * per_layer + 2 * h + config.vocab_size


def reorder_atol(magnitude: float, terms: int) -> float:
    """|a − b| bound for two float32 computations of values of size `magnitude` whose reductions
    (`terms` summed terms in all, along the chain) ran in different orders: 2·γ(terms)·magnitude."""
    return 2 * gamma(terms) * float(magnitude)


def logprob_atol(config, seq_len: int, values: torch.Tensor) -> float:
    """Bound for log-probs (or entropies) of `config`'s model over `seq_len` tokens, at the size of
    `values` (the compared log-probs: |log p| is largest for the rarest sampled token)."""
    return reorder_atol(values.detach().abs().max().clamp(min=1.0), forward_terms(config, seq_len))


def grad_atol(config, seq_len: int, tokens: int, grad: torch.Tensor) -> float:
    """Bound for one parameter's gradient: the backward retraces the forward's reductions (twice:
    the activations' and the weights' paths) and sums the weight's per-token contributions over
    `tokens` positions. The magnitude is the tensor's largest |gradient|, so an element that cancels
    to near zero is held to its tensor's scale, not its own."""
    return reorder_atol(grad.detach().abs().max(), 2 * forward_terms(config, seq_len) + tokens)


def adamw_step_atol(param: torch.Tensor, lr: float, clip_rtol: float = 0.0) -> torch.Tensor:
    """Per-element bound for two AdamW steps on the same gradient whose elementwise arithmetic rounds
    differently (fused vs separate multiply-add, vector vs scalar tail: ≤ 8 roundings of ≤ u each,
    on the weight, its decay and an update of size ≤ lr), and whose gradients were scaled by clip
    coefficients that differ by `clip_rtol` relative (the first step's update lr·g/(|g| + ε) moves
    by at most lr·clip_rtol). Not for steps on gradients that differ: near g = 0 the update's
    sign follows g's, so a rounding-level difference moves the weight by up to 2·lr."""
    return 16 * U * (param.detach().abs() + lr) + lr * clip_rtol
