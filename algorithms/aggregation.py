"""Loss aggregation: how per-token losses become one number, as per-sequence weights.

Every mode in ALGORITHMS.md has the form  L = Σ_i w_i Σ_t m_{i,t} ℓ_{i,t}. The weights are
computed once over the whole optimizer-step batch (convention 3) and sliced for micro-batches,
so summing micro-batch losses gives the full-batch loss exactly, whatever the split.

| mode                     | w_i                     |
|--------------------------|-------------------------|
| seq_mean_token_mean      | 1 / (B · L_i)           |
| token_mean               | 1 / N                   |
| seq_mean_token_sum_norm  | 1 / (B · L_max)         |
| seq_mean_token_sum       | 1 / B                   |
| prompt_mean              | 1 / (G · N_g(i))        |

B counts every row, fully masked ones included (a masked row still "counts" as a sample, as in
TRL's `grpo` loss); G counts every prompt group present; N_g(i) is the token count of row i's group.
A row or group with no valid token gets weight 0, never NaN.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from .parts import Part, part

AggregationMode = Literal["seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm",
                          "seq_mean_token_sum", "prompt_mean"]


def safe_inverse(x: Tensor) -> Tensor:
    """1/x where x > 0, else 0 (a fully masked row or an empty batch gets weight 0)."""
    return torch.where(x > 0, 1.0 / x.clamp_min(1e-30), torch.zeros_like(x))


def group_index(group: Tensor) -> tuple[Tensor, int]:
    """(B,) dense ids 0..G-1 for arbitrary prompt-group ids, and G."""
    uniq, inv = torch.unique(group, return_inverse=True)
    return inv, uniq.numel()


@part("aggregation")
class Aggregation(Part):
    """One of the five aggregation modes (see the module docstring)."""

    mode: AggregationMode = "token_mean"

    def weights(self, mask: Tensor, group: Tensor, max_new_tokens: int) -> Tensor:
        """(B,) per-sequence weights w_i over the whole optimizer-step batch."""
        m = mask.to(torch.float64) if not mask.is_floating_point() else mask
        lengths = m.sum(-1)
        B = m.shape[0]
        if self.mode == "seq_mean_token_mean":
            return safe_inverse(lengths) / B
        if self.mode == "token_mean":
            return safe_inverse(lengths.sum()).expand(B).clone()
        if self.mode == "seq_mean_token_sum_norm":
            return torch.full_like(lengths, 1.0 / (B * max_new_tokens))
        if self.mode == "seq_mean_token_sum":
            return torch.full_like(lengths, 1.0 / B)
        idx, G = group_index(group)
        per_group = torch.zeros(G, dtype=lengths.dtype, device=lengths.device)
        per_group.index_add_(0, idx, lengths)
        return safe_inverse(per_group[idx]) / G


def aggregate(per_token: Tensor, mask: Tensor, weights: Tensor) -> Tensor:
    """Σ_i w_i Σ_t m_{i,t} ℓ_{i,t}: per_token (B, T), mask (B, T), weights (B,) -> scalar.

    Masked positions are zeroed with `where`, so a NaN or inf on padding never leaks in.
    """
    m = mask.bool()
    tok = torch.where(m, per_token, torch.zeros_like(per_token))
    return (tok.sum(-1) * weights.to(per_token.dtype)).sum()
