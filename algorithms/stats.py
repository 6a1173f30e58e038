"""How the stats of micro-batches combine into the stats of one optimizer update.

`recipe.loss` returns a dict of 0-dim tensors (never `.item()`), with two counts:
`tokens` (valid tokens of the micro-batch) and `sequences` (completions with at least one valid
token). Each key is a metric declared in algorithms/metrics.py, whose `merge` says how it combines
(`rule`, implemented by `merge_stats`):

- sum: counts and `loss/*` add up (micro-batch losses carry full-batch weights, so their sum is the
  full-batch loss);
- max, min: the extremes (policy/ratio_max, policy/ratio_min);
- seq: means over sequences (policy/clip_frac_seq, policy/seq_ratio_mean), weighted by `sequences`;
- token: means over valid tokens (clip fractions, ratio mean, entropy, kl/k1, kl/k3), weighted by
  `tokens`;
- mean: a plain mean (values computed once per update, such as grad/norm).

A key that is not declared, or declared without a merge rule, raises instead of being guessed.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import metrics


def rule(key: str) -> str:
    """'sum', 'max', 'min', 'seq', 'token' or 'mean' for a stats key: its declared `merge`."""
    try:
        m = metrics.get(key)
    except metrics.UnknownMetricError:
        raise metrics.UnknownMetricError(
            f"{key}: a stat that is not a declared metric; declare it once with algorithms.metrics.declare({key!r}, "
            f"kind='step', merge=..., unit=..., doc=...); merge: {', '.join(metrics.MERGES)}") from None
    if m.merge is None:
        raise metrics.MetricError(f"{key}: merge None: declared as computed once per step, yet merged as a stat; "
                                  f"declare it with merge= one of {', '.join(metrics.MERGES)}")
    return m.merge


def merge_stats(parts: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Combine per-micro-batch stats by `rule`. Keys missing from a part are skipped for it."""
    if not parts:
        return {}
    keys = sorted({k for p in parts for k in p})
    out: dict[str, Tensor] = {}
    for key in keys:
        have = [p for p in parts if key in p]
        vals = torch.stack([p[key].detach().to(torch.float64) for p in have])
        how = rule(key)
        if how == "sum":
            out[key] = vals.sum()
        elif how == "max":
            out[key] = vals.max()
        elif how == "min":
            out[key] = vals.min()
        elif how == "mean":
            out[key] = vals.mean()
        else:
            w = torch.stack([p["sequences" if how == "seq" else "tokens"].to(torch.float64) for p in have])
            out[key] = (vals * w).sum() / w.sum().clamp_min(1)
    return out
