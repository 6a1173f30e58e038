"""Telemetry every recipe logs, whatever its objective: how far the policy being trained is from
the policy that sampled (off-policy drift), and how the gradient weight spreads over prompt groups.
Detached tensors only; the engine calls `.item()` once per step.

Off-policy stats (from `Recipe.loss`, per micro-batch; merged by algorithms.stats.rule):
    policy/ratio_dev_frac     share of valid tokens with |ρ − 1| > RATIO_DEV
    policy/log_ratio_abs_mean mean |δ| = |log π_θ − log π_old| over valid tokens
    policy/seq_ratio_mean     mean over sequences of s_i = exp(mean_t δ_{i,t}) (GSPO's sequence ratio)
    policy/seq_ratio_max      its max
On-policy with one update (logp_old = logp) these are exactly 0, 0, 1, 1.

Group stats (from the engine, once per step over the batch it trains on), over the groups whose
reward std is nonzero (the all-equal ones are adv/zero_std_group_frac; group baselines give them no
gradient, and counting them would put the median at 0 whenever most groups tie):
    adv/group_std_q10|q50|q90 quantiles of the group's reward std (Bessel, as GroupNorm divides by)
    adv/low_std_weight_frac   share of the batch's gradient weight Σ_i w_i Σ_t m_{i,t} |A_{i,t}| (all
                              groups; w_i the aggregation weights over the whole batch) that falls on
                              groups whose std is below the median: above adv/low_std_group_frac, low-
                              variance groups are up-weighted (std normalisation, per Dr. GRPO)
    adv/low_std_group_frac    share of those groups below the median
NaN when no group has a nonzero std (or, for the weight share, when every advantage is 0).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .advantages import group_stats
from .aggregation import group_index
from .objectives import MAX_LOG_RATIO, Stats, seq_log_ratio, token_mean
from .rollouts import Rollouts

RATIO_DEV = 0.2  # the usual PPO clip width: tokens beyond it are where a ±0.2 clip would bind


def off_policy_stats(logp: Tensor, logp_old: Tensor, mask: Tensor) -> Stats:
    """Ratio telemetry of logp (B, T) against logp_old (B, T) over the valid tokens of mask."""
    m = mask.bool()
    delta = (logp.detach() - logp_old.detach()).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    seq = torch.exp(seq_log_ratio(delta, m, normalise=True))
    valid = m.any(-1)
    dtype = logp.dtype
    return {
        "policy/ratio_dev_frac": token_mean((delta.exp() - 1).abs() > RATIO_DEV, m).to(dtype),
        "policy/log_ratio_abs_mean": token_mean(delta.abs(), m).to(dtype),
        "policy/seq_ratio_mean": (torch.where(valid, seq, 0.0).sum() / valid.sum().clamp_min(1)).to(dtype),
        "policy/seq_ratio_max": torch.where(valid, seq, torch.full_like(seq, -torch.inf)).max().to(dtype)
        if seq.numel() else torch.tensor(-torch.inf, dtype=dtype),
    }


def group_weight_stats(batch: Rollouts, adv: Tensor, weights: Tensor) -> Stats:
    """Per-group reward std quantiles and the share of gradient weight on low-std groups.

    adv (B, T) the advantages the update uses; weights (B,) aggregation weights over `batch`.
    """
    idx, G = group_index(batch.group)
    _, std_row, _, flat_row = group_stats(batch.rewards.to(torch.float64), batch.group)
    std = torch.zeros(G, dtype=torch.float64, device=std_row.device).index_copy(0, idx, std_row)  # one per group
    spread = torch.zeros(G, dtype=torch.bool, device=std.device).index_copy(0, idx, ~flat_row)
    nan = torch.tensor(torch.nan, dtype=torch.float64, device=std.device)
    if not spread.any():
        return {k: nan for k in ("adv/group_std_q10", "adv/group_std_q50", "adv/group_std_q90",
                                 "adv/low_std_weight_frac", "adv/low_std_group_frac")}
    q = torch.quantile(std[spread], torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64, device=std.device))
    per_row = torch.where(batch.mask.bool(), adv.detach().abs().to(torch.float64), 0.0).sum(-1) * weights.to(torch.float64)
    total = per_row.sum()
    low_row = ~flat_row & (std_row < q[1])
    frac = torch.where(total > 0, per_row[low_row].sum() / total.clamp_min(1e-30), nan)
    return {"adv/group_std_q10": q[0], "adv/group_std_q50": q[1], "adv/group_std_q90": q[2],
            "adv/low_std_weight_frac": frac,
            "adv/low_std_group_frac": (spread & (std < q[1])).sum().to(torch.float64) / spread.sum()}
