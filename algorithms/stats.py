"""How the stats of micro-batches combine into the stats of one optimizer update.

`recipe.loss` returns a dict of 0-dim tensors (never `.item()`), with two counts:
`tokens` (valid tokens of the micro-batch) and `sequences` (completions with at least one valid
token). The rule, implemented by `merge_stats`:

- `tokens`, `sequences` and `loss/*` add up (micro-batch losses carry full-batch weights, so their
  sum is the full-batch loss);
- `*_max` take the max, `*_min` the min;
- `*_seq` (policy/clip_frac_seq) and `policy/seq_*` (policy/seq_ratio_mean) are means over
  sequences: weighted by `sequences`;
- everything else (clip fractions, ratio mean, entropy, kl/k1, kl/k3) is a mean over valid
  tokens: weighted by `tokens`.
"""

from __future__ import annotations

import torch
from torch import Tensor

COUNTS = ("tokens", "sequences")


def rule(key: str) -> str:
    """'sum', 'max', 'min', 'seq' or 'token' for a stats key."""
    if key in COUNTS or key.startswith("loss/"):
        return "sum"
    if key.endswith("_max"):
        return "max"
    if key.endswith("_min"):
        return "min"
    if key.endswith("_seq") or key.startswith("policy/seq_"):
        return "seq"
    return "token"


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
        else:
            w = torch.stack([p["sequences" if how == "seq" else "tokens"].to(torch.float64) for p in have])
            out[key] = (vals * w).sum() / w.sum().clamp_min(1)
    return out
