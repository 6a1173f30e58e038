"""Sample filters (`keep`) and reward shaping (`apply`), run by the engine before advantages.

Filters answer which completions enter the update: `keep(batch) -> (B,) bool`. A group is dropped
when its metric is the same for every completion: `correct` (the verifier verdict, as DAPO's
"0 < #correct < G"; falls back to `rewards > 0`) or `reward` (the shaped reward). A group of one
is kept (its variance is undefined, not zero; verl does the same). dynamic_sampling also declares
that the engine must refill the batch with new prompts, up to `max_generation_rounds` rounds.

Shaping maps a batch to a batch: overlong_penalty adds DAPO's soft length penalty to the reward,
mask_truncated zeroes the mask of completions that hit L_max without EOS ("overlong filtering").
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from .aggregation import group_index
from .parts import Part, fail, nonnegative, part, unit
from .rollouts import Rollouts

Metric = Literal["correct", "reward"]


def varied_groups(values: Tensor, group: Tensor) -> Tensor:
    """(B,) bool: the row's group has at least two different values, or has one member."""
    idx, G = group_index(group)
    v = values.to(torch.float64)
    zeros = torch.zeros(G, dtype=v.dtype, device=v.device)
    hi = zeros.scatter_reduce(0, idx, v, "amax", include_self=False)
    lo = zeros.scatter_reduce(0, idx, v, "amin", include_self=False)
    n = zeros.index_add(0, idx, torch.ones_like(v))
    return ((hi > lo) | (n < 2))[idx]


class Filter(Part):
    """Base class of sample filters."""

    refill = False

    @property
    def rounds(self) -> int:
        """How many generation rounds the engine may run to fill one batch."""
        return 1

    def keep(self, batch: Rollouts) -> Tensor:
        return torch.ones(batch.size, dtype=torch.bool, device=batch.mask.device)


@part("no_filter")
class NoFilter(Filter):
    """Keep every completion."""


class ZeroVarianceBase(Filter):
    def keep(self, batch: Rollouts) -> Tensor:
        values = batch.is_correct if self.metric == "correct" else batch.rewards
        return varied_groups(values, batch.group)


@part("drop_zero_variance")
class DropZeroVariance(ZeroVarianceBase):
    """Drop groups whose metric is all equal; the batch shrinks (ScaleRL's zero-variance filter)."""

    metric: Metric = "correct"


@part("dynamic_sampling")
class DynamicSampling(ZeroVarianceBase):
    """DAPO: drop groups whose metric is all equal and refill the batch with new prompts, up to
    `max_generation_rounds` generation rounds (verl's max_num_gen_batches); every generated token
    counts as compute."""

    metric: Metric = "correct"
    max_generation_rounds: int = 10

    refill = True

    def check(self) -> None:
        if self.max_generation_rounds < 1:
            fail("DynamicSampling.max_generation_rounds", f"must be >= 1, got {self.max_generation_rounds!r}")

    @property
    def rounds(self) -> int:
        return self.max_generation_rounds


class Shaping(Part):
    """Base class of reward shaping steps."""

    uses_truncated = False  # needs Rollouts.truncated

    def apply(self, batch: Rollouts) -> Rollouts:
        raise NotImplementedError


@part("overlong_penalty")
class OverlongPenalty(Shaping):
    """DAPO's soft overlong punishment, added to the reward (L_max = batch.max_new_tokens):
    0 if L ≤ L_max − buf; (L_max − buf − L)/buf inside the buffer; −1 beyond L_max; × factor.
    The buffer is `buffer` tokens or `buffer_frac` · L_max (DAPO: 4096 of 20480 = 0.2); set one.
    A truncated completion counts as L ≥ L_max even if its mask was already zeroed."""

    buffer: int | None = None
    buffer_frac: float | None = 0.2
    factor: float = 1.0

    def check(self) -> None:
        if (self.buffer is None) == (self.buffer_frac is None):
            fail("OverlongPenalty.buffer", "set exactly one of buffer (tokens) and buffer_frac")
        if self.buffer is not None and self.buffer < 1:
            fail("OverlongPenalty.buffer", f"must be >= 1 token, got {self.buffer!r}")
        if self.buffer_frac is not None:
            unit("OverlongPenalty.buffer_frac", self.buffer_frac, open_low=True)
        nonnegative("OverlongPenalty.factor", self.factor)

    def penalty(self, lengths: Tensor, max_new_tokens: int) -> Tensor:
        """(B,) the penalty (≤ 0) for completion lengths L."""
        buf = float(self.buffer) if self.buffer is not None else self.buffer_frac * max_new_tokens
        if buf > max_new_tokens:
            fail("OverlongPenalty.buffer", f"{buf} exceeds max_new_tokens={max_new_tokens}")
        return ((max_new_tokens - buf - lengths) / buf).clamp(-1.0, 0.0) * self.factor

    def apply(self, batch: Rollouts) -> Rollouts:
        L = batch.mask.to(torch.float64).sum(-1)
        if batch.truncated is not None:
            L = torch.where(batch.truncated.bool(), L.clamp_min(batch.max_new_tokens), L)
        pen = self.penalty(L, batch.max_new_tokens)
        return batch.replace(rewards=batch.rewards + pen.to(batch.rewards.dtype))


@part("mask_truncated")
class MaskTruncated(Shaping):
    """Zero the mask of truncated completions (DAPO's overlong filtering, TRL's
    mask_truncated_completions). They still count in group statistics and in B."""

    uses_truncated = True

    def apply(self, batch: Rollouts) -> Rollouts:
        if batch.truncated is None:
            raise ValueError("mask_truncated needs Rollouts.truncated")
        keep = ~batch.truncated.bool()[:, None]
        mask = batch.mask * keep if batch.mask.dtype != torch.bool else batch.mask & keep
        return batch.replace(mask=mask)


@part("affine_reward")
class AffineReward(Shaping):
    """r ← scale·r + shift: maps a verifier's 0/1 reward to another convention, e.g. TOPR's ±1
    (scale=2, shift=−1). Filters on `correct` are unaffected (they read the verdict)."""

    scale: float = 2.0
    shift: float = -1.0

    def check(self) -> None:
        if not self.scale > 0:
            fail("AffineReward.scale", f"must be > 0 (a reward map must keep the order), got {self.scale!r}")

    def apply(self, batch: Rollouts) -> Rollouts:
        return batch.replace(rewards=batch.rewards * self.scale + self.shift)
