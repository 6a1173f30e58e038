"""Objectives: the per-token loss ℓ_{i,t} before aggregation, and its clipping statistics.

`objective.per_token(logp, logp_old, adv, mask) -> (ℓ (B, T), stats)`, with δ = log π_θ − log π_old,
ρ = e^δ. Every objective reports policy/ratio_{mean,min,max} of the token ratio ρ (one meaning
across recipes) and policy/clip_frac_{low,high} (convention 7: the share of valid tokens where the
clip binds, (A<0 ∧ below range) → low, (A>0 ∧ above range) → high; 0 for objectives with no clip).
gspo adds policy/clip_frac_seq, cispo policy/weight_capped_frac. On-policy (ρ ≡ 1) every objective
has the gradient of −A·log π_θ and every clip fraction is exactly 0.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from .parts import Part, fail, nonnegative, part, positive

Stats = dict[str, Tensor]

# Numerical guard, not a tuning knob: |δ| is clamped at 20 (ρ ∈ [2e-9, 5e8], verl's value) before
# exponentiating, so one wild token cannot turn into inf · 0 = NaN in the backward pass. It changes
# nothing unless a token's probability moved by a factor of 5e8.
MAX_LOG_RATIO = 20.0


def log_ratio(logp: Tensor, logp_old: Tensor) -> Tensor:
    """(B, T) δ = log π_θ − log π_old (π_old detached), clamped to ±MAX_LOG_RATIO."""
    return (logp - logp_old.detach()).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)


def token_mean(x: Tensor, m: Tensor) -> Tensor:
    """Mean of x over valid tokens (0 when there are none), detached, in float."""
    x = x.detach().to(torch.float64) if not x.is_floating_point() else x.detach()
    return torch.where(m, x, 0.0).sum() / m.sum().clamp_min(1)


def ratio_stats(ratio: Tensor, m: Tensor) -> Stats:
    r = ratio.detach()
    inf = torch.tensor(float("inf"), dtype=r.dtype, device=r.device)
    return {
        "policy/ratio_mean": token_mean(r, m),
        "policy/ratio_min": torch.where(m, r, inf).min() if r.numel() else inf,
        "policy/ratio_max": torch.where(m, r, -inf).max() if r.numel() else -inf,
    }


def clip_stats(low: Tensor | None, high: Tensor | None, m: Tensor, like: Tensor) -> Stats:
    zero = torch.zeros((), dtype=like.dtype, device=like.device)
    return {
        "policy/clip_frac_low": zero if low is None else token_mean(low & m, m).to(like.dtype),
        "policy/clip_frac_high": zero if high is None else token_mean(high & m, m).to(like.dtype),
    }


def seq_log_ratio(delta: Tensor, m: Tensor, normalise: bool) -> Tensor:
    """(B,) Σ_t m δ (full sequence ratio, log) or its mean over the completion (geometric mean)."""
    s = torch.where(m, delta, 0.0).sum(-1)
    return s / m.sum(-1).clamp_min(1) if normalise else s


def token_mean_rows(x: Tensor, m: Tensor) -> Tensor:
    """(B,) share of each row's valid tokens where x holds."""
    return (x & m).sum(-1).to(torch.float64) / m.sum(-1).clamp_min(1)


class Objective(Part):
    """Base class of objectives."""

    def per_token(self, logp: Tensor, logp_old: Tensor, adv: Tensor, mask: Tensor) -> tuple[Tensor, Stats]:
        raise NotImplementedError


@part("ppo_clip")
class PPOClip(Objective):
    """ℓ = −min(ρA, clip(ρ, 1−eps_low, 1+eps_high)A). Dual clip c (A < 0 only) caps the loss at
    −cA, i.e. the objective is max(min(ρA, clip(ρ)A), cA) (Ye et al. 2020; verl's clip_ratio_c)."""

    eps_low: float = 0.2
    eps_high: float = 0.2
    dual_clip: float | None = None

    def check(self) -> None:
        for name in ("eps_low", "eps_high"):
            nonnegative(f"PPOClip.{name}", getattr(self, name))
        if self.eps_low > 1:
            fail("PPOClip.eps_low", f"must be <= 1 (1 − eps_low is a ratio), got {self.eps_low!r}")
        if self.dual_clip is not None and not self.dual_clip > 1:
            fail("PPOClip.dual_clip", f"must be > 1 or None, got {self.dual_clip!r}")

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        ratio = torch.exp(log_ratio(logp, logp_old))
        loss = -torch.min(ratio * adv, ratio.clamp(1 - self.eps_low, 1 + self.eps_high) * adv)
        if self.dual_clip is not None:
            loss = torch.where(adv < 0, torch.min(loss, -self.dual_clip * adv), loss)
        low = (adv < 0) & (ratio < 1 - self.eps_low)
        high = (adv > 0) & (ratio > 1 + self.eps_high)
        return loss, {**clip_stats(low, high, m, logp), **ratio_stats(ratio, m)}


@part("gspo")
class GSPO(Objective):
    """GSPO: PPO's clip on the sequence ratio s_i = exp(mean_t δ_{i,t}), in the GSPO-token form
    w_{i,t} = sg(s_i)·π_θ/sg(π_θ): the value of s_i on every token, gradient s_i·∇log π_t. With one
    advantage per completion this equals GSPO exactly under any per-sequence-weight aggregation."""

    eps_low: float = 3e-4
    eps_high: float = 4e-4

    def check(self) -> None:
        for name in ("eps_low", "eps_high"):
            nonnegative(f"GSPO.{name}", getattr(self, name))
        if self.eps_low > 1:
            fail("GSPO.eps_low", f"must be <= 1, got {self.eps_low!r}")

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        delta = log_ratio(logp, logp_old)
        log_s = seq_log_ratio(delta.detach(), m, normalise=True)
        w = torch.exp(log_s[:, None] + logp - logp.detach())
        loss = -torch.min(w * adv, w.clamp(1 - self.eps_low, 1 + self.eps_high) * adv)
        s = log_s.exp()[:, None]
        low = (adv < 0) & (s < 1 - self.eps_low)
        high = (adv > 0) & (s > 1 + self.eps_high)
        stats = clip_stats(low, high, m, logp)
        valid = m.any(-1)
        per_seq = token_mean_rows(low | high, m)
        stats["policy/clip_frac_seq"] = (torch.where(valid, per_seq, 0.0).sum()
                                         / valid.sum().clamp_min(1)).to(logp.dtype)
        return loss, {**stats, **ratio_stats(torch.exp(delta), m)}


@part("cispo")
class CISPO(Objective):
    """CISPO: ℓ = −sg(clip(ρ, ratio_min, ratio_max))·A·log π_θ. The IS weight is capped and
    stop-gradiented, so no token ever leaves the gradient. The cap is absolute (ScaleRL, TRL's
    epsilon_high=5.0), not MiniMax's 1+ε_high; no lower bound by default (MiniMax)."""

    ratio_max: float = 5.0
    ratio_min: float | None = None

    def check(self) -> None:
        positive("CISPO.ratio_max", self.ratio_max)
        if self.ratio_min is not None:
            nonnegative("CISPO.ratio_min", self.ratio_min)
            if not self.ratio_min < self.ratio_max:
                fail("CISPO.ratio_min",
                     f"must be < ratio_max ({self.ratio_max!r}), got {self.ratio_min!r}")

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        ratio = torch.exp(log_ratio(logp, logp_old))
        weight = ratio.detach().clamp(min=self.ratio_min, max=self.ratio_max)
        loss = -weight * adv * logp
        high = ratio > self.ratio_max
        low = ratio < self.ratio_min if self.ratio_min is not None else torch.zeros_like(m)
        stats = clip_stats(low & (adv < 0), high & (adv > 0), m, logp)
        stats["policy/weight_capped_frac"] = token_mean(low | high, m).to(logp.dtype)
        return loss, {**stats, **ratio_stats(ratio, m)}


@part("topr")
class TOPR(Objective):
    """TOPR: A ≥ 0: ℓ = −A·log π_θ (no ratio); A < 0: ℓ = −sg(clip(S_i, 0, 1))·A·log π_θ, with S_i
    the full sequence ratio exp(Σ_t δ) ("full", the paper) or the geometric mean ("length_normalised",
    verl). policy/clip_frac_low counts negative tokens whose taper binds (S_i > 1)."""

    ratio: Literal["full", "length_normalised"] = "full"

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        delta = log_ratio(logp, logp_old)
        log_S = seq_log_ratio(delta.detach(), m, normalise=self.ratio == "length_normalised")[:, None]
        taper = torch.exp(log_S.clamp(max=0.0)).expand_as(logp)
        weight = torch.where(adv >= 0, torch.ones_like(taper), taper)
        loss = -weight * adv * logp
        low = (adv < 0) & (log_S > 0)
        return loss, {**clip_stats(low, None, m, logp), **ratio_stats(torch.exp(delta), m)}


@part("is_pg")
class ISPG(Objective):
    """ℓ = −ρA: the importance-weighted policy gradient, REINFORCE on-policy (RLOO, ReMax)."""

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        ratio = torch.exp(log_ratio(logp, logp_old))
        return -ratio * adv, {**clip_stats(None, None, m, logp), **ratio_stats(ratio, m)}
