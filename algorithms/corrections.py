"""Corrections: detached per-token factors on the policy term, applied before aggregation.

`correction.weight(logp, batch, adv, entropy) -> c (B, T)`, c ≥ 0 and detached; a token with c = 0 is
masked out of the policy-gradient term but still counted by the aggregation's normaliser (the weights
w_i are computed from the mask). That is TRL's convention for all of these (it multiplies the per-token
loss) and verl's for its IS weights and IcePop; verl's rejection sampling (rollout_rs) and AReaL's M2PO
instead remove the tokens from the loss mask, so their token-mean denominators shrink. The KL, entropy,
NLL and value terms are never corrected. A recipe's corrections multiply: c = Π_k c_k.

Notation: μ = Rollouts.logp_behav, the behaviour policy's log-probs (the inference engine's numbers, or
a stale policy's); logp_old = the trainer's log-probs under the weights at the start of the update (the
proximal policy); logp = the policy being trained. A correction that reads μ sets `uses_behaviour`;
the engine then provides logp_behav, and with stale rollouts recomputes logp_old (one more forward, charged).

Stats (merged as token means, convention 7's denominators): correction/weight_mean (mean of c over
valid tokens), correction/masked_frac (share of valid tokens with c = 0), correction/changed_frac
(share of valid tokens with |c − 1| > 1%: the tokens whose gradient the corrections change, the
engagement a claim reads). With several corrections they describe the product.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from torch import Tensor

from .objectives import MAX_LOG_RATIO, Stats, seq_log_ratio, token_mean
from .parts import Part, fail, nonnegative, part, positive, unit
from .rollouts import Rollouts


class Correction(Part):
    """Base class of corrections. `uses_behaviour`: needs Rollouts.logp_behav;
    `uses_entropy`: needs the per-token entropy (detached is enough)."""

    uses_behaviour: ClassVar[bool] = False
    uses_entropy: ClassVar[bool] = False

    def weight(self, logp: Tensor, batch: Rollouts, adv: Tensor, entropy: Tensor | None) -> Tensor:
        """(B, T) detached factor ≥ 0 per token (0 on padding is not required)."""
        raise NotImplementedError


def behaviour(batch: Rollouts, who: str) -> Tensor:
    if batch.logp_behav is None:
        raise ValueError(f"{who} needs Rollouts.logp_behav (the behaviour policy's log-probs); the engine "
                         "provides it when the recipe's needs.behaviour is set")
    return batch.logp_behav


def behaviour_log_ratio(batch: Rollouts, who: str) -> Tensor:
    """(B, T) log(π_old/μ) per token, clamped like every log-ratio; 0 on padding."""
    d = (batch.logp_old - behaviour(batch, who)).detach().clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    return torch.where(batch.mask.bool(), d, torch.zeros_like(d))


CHANGED_TOL = 0.01  # a factor within 1% of 1 leaves its token's gradient (nearly) as it was


def correction_stats(c: Tensor, m: Tensor) -> Stats:
    return {"correction/weight_mean": token_mean(c, m).to(c.dtype),
            "correction/masked_frac": token_mean(c == 0, m).to(c.dtype),
            "correction/changed_frac": token_mean((c - 1).abs() > CHANGED_TOL, m).to(c.dtype)}


@part("rollout_correction")
class RolloutCorrection(Correction):
    """Train–inference mismatch correction by importance sampling: ρ = π_old / μ per token
    ("token") or Π_t over the completion ("sequence", exp Σ_t log ρ_t).

    mode "truncate" (TIS): c = clamp(ρ, c_min, c_max) (no bound where None).
    mode "mask" (MIS): c = ρ · 1[c_min ≤ ρ ≤ c_max] (outside the range the token, or the whole
    sequence, leaves the policy term). IcePop is token-level MIS on [0.5, 5].

    Defaults are verl's decoupled_token_is preset (token TIS, cap 2.0; verl's config default is the
    sequence level at 2.0). TRL's field default is sequence MIS with c_max 3 and no lower bound (its
    docstring says token truncation); OpenRLHF's IcePop range is [0.5, 5]. With c_min = c_max = None in
    "truncate" mode c = ρ itself: the decoupled objective's unclipped behaviour weight π_prox / μ (AReaL).

    Numerics as verl: token log ρ clamped to ±20 before exp; the sequence's Σ_t log ρ_t summed unclamped,
    then clamped to ±20. TRL clamps neither, so a ratio beyond e^±20 that no bound catches reads e^±20
    here and its exact value there (no difference inside the guard). verl's own
    MIS is its rejection sampling (rollout_rs "token_k1"/"seq_sum_k1" with "lo_hi"), which bounds
    μ/π_old, i.e. keeps ρ in [1/hi, 1/lo], and drops the tokens from the denominator (see above).
    """

    uses_behaviour: ClassVar[bool] = True

    level: Literal["token", "sequence"] = "token"
    mode: Literal["truncate", "mask"] = "truncate"
    c_min: float | None = None
    c_max: float | None = 2.0

    def check(self) -> None:
        if self.c_min is not None:
            nonnegative("RolloutCorrection.c_min", self.c_min)
        if self.c_max is not None:
            positive("RolloutCorrection.c_max", self.c_max)
        if self.c_min is not None and self.c_max is not None and not self.c_min < self.c_max:
            fail("RolloutCorrection.c_min", f"must be < c_max ({self.c_max!r}), got {self.c_min!r}")
        if self.mode == "mask" and self.c_min is None and self.c_max is None:
            fail("RolloutCorrection.c_max", "mode 'mask' needs a range: set c_min, c_max or both")

    def weight(self, logp, batch, adv, entropy):
        if self.level == "sequence":
            d = (batch.logp_old - behaviour(batch, "RolloutCorrection")).detach()
            log_rho = torch.where(batch.mask.bool(), d, torch.zeros_like(d)).sum(-1, keepdim=True)
            log_rho = log_rho.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO).expand_as(d)
        else:
            log_rho = behaviour_log_ratio(batch, "RolloutCorrection")
        rho = log_rho.exp()
        if self.mode == "truncate":
            unbounded = self.c_min is None and self.c_max is None  # torch.clamp refuses two Nones
            return rho if unbounded else rho.clamp(min=self.c_min, max=self.c_max)
        inside = torch.ones_like(rho, dtype=torch.bool)
        if self.c_min is not None:
            inside &= rho >= self.c_min
        if self.c_max is not None:
            inside &= rho <= self.c_max
        return torch.where(inside, rho, torch.zeros_like(rho))


@part("opsm")
class OffPolicySequenceMask(Correction):
    """OPSM (DeepSeek-V3.2, 2512.02556, Eq. 9): drop token t of completion i from the policy term when
    A_{i,t} < 0 and the completion has drifted: mean_t (log μ − sg log π_θ) > threshold (the KL term is
    not masked). With outcome advantages (one sign per completion) the whole completion goes.

    against "behaviour": μ = Rollouts.logp_behav (TRL's off_policy_mask_threshold, which suggests 0.5;
    TRL falls back to logp_old when there are no sampler log-probs); against "old": μ = logp_old
    (slime's use_opsm, opsm_delta 1e-4), so no behaviour log-probs are needed. The default follows TRL;
    on-policy with one update and against "old" nothing is ever masked. The per-token sign is the
    paper's and slime's; TRL tests one advantage per sequence (the same for outcome advantages).
    The drift is not clamped (as TRL and slime; no exp is taken).
    """

    threshold: float = 0.5
    against: Literal["behaviour", "old"] = "behaviour"

    @property
    def uses_behaviour(self) -> bool:  # type: ignore[override]
        return self.against == "behaviour"

    def check(self) -> None:
        nonnegative("OffPolicySequenceMask.threshold", self.threshold)

    def weight(self, logp, batch, adv, entropy):
        m = batch.mask.bool()
        mu = behaviour(batch, "OffPolicySequenceMask") if self.against == "behaviour" else batch.logp_old
        drift = seq_log_ratio((mu - logp).detach(), m, normalise=True)
        drop = (adv < 0) & (drift > self.threshold)[:, None]
        return torch.where(drop, 0.0, 1.0).to(logp.dtype)


@part("top_entropy_mask")
class TopEntropyMask(Correction):
    """The 80/20 rule (Wang et al. 2025, 2506.01939; TRL top_entropy_quantile): keep a token's policy
    term only if its entropy is at least the (1 − share) quantile of the entropies of the valid tokens
    the loss sees (one micro-batch; TRL gathers the micro-batch's entropies across processes); the
    normaliser still counts all. share = 1 keeps everything. The quantile (linear interpolation) is taken
    in float64; TRL's in float32, which can move a token lying exactly on the cut. TRL also restricts its
    entropy bonus to the kept tokens; ours is never corrected."""

    uses_entropy: ClassVar[bool] = True

    share: float = 0.2

    def check(self) -> None:
        unit("TopEntropyMask.share", self.share, open_low=True)

    def weight(self, logp, batch, adv, entropy):
        if entropy is None:
            raise ValueError("TopEntropyMask needs the per-token entropy (pass entropy= to recipe.loss)")
        m = batch.mask.bool()
        ent = entropy.detach()
        if not m.any() or self.share >= 1:
            return torch.ones_like(logp)
        cut = torch.quantile(ent[m].to(torch.float64), 1.0 - self.share)
        return (ent.to(torch.float64) >= cut).to(logp.dtype)


@part("m2po")
class M2PO(Correction):
    """M2PO (Zheng et al. 2025, 2510.01161) in AReaL's form (m2_threshold, _get_m2po_loss_mask): with
    d_t = (log μ − log π_old)² the squared behaviour–proximal log-ratio, mask the tokens with the largest
    d_t, largest first, until the mean of d over the remaining valid tokens is < threshold (strictly);
    if no such point exists, all but the one smallest are masked (AReaL's rule, never an empty loss).
    Ties are masked in token order (AReaL's sort does not fix an order). d is not clamped (as AReaL).
    AReaL's form is the one its trainer ships for stale rollouts; the paper's reference code masks by the
    second moment of the whole batch in one pass and differs in the tie and stopping rules. Departure:
    AReaL removes masked tokens from the loss mask (and so from token-mean denominators); we count them."""

    uses_behaviour: ClassVar[bool] = True

    threshold: float = 0.04

    def check(self) -> None:
        positive("M2PO.threshold", self.threshold)

    def weight(self, logp, batch, adv, entropy):
        m = batch.mask.bool()
        d = (batch.logp_old - behaviour(batch, "M2PO")).detach().to(torch.float64).square()
        vals = d[m]
        keep = torch.ones_like(d, dtype=torch.bool)
        if vals.numel():
            order = torch.sort(vals, descending=True).values
            n = vals.numel()
            # mean of the n − j smallest values, for j = 0..n−1 masked from the top
            tail = torch.flip(torch.cumsum(torch.flip(order, [0]), 0), [0])
            means = tail / torch.arange(n, 0, -1, device=d.device, dtype=torch.float64)
            ok = torch.nonzero(means < self.threshold)
            j = int(ok[0]) if ok.numel() else n - 1
            if j > 0:  # mask the j largest (ties in token order)
                flat = torch.nonzero(m.flatten()).squeeze(-1)
                top = flat[torch.argsort(vals, descending=True, stable=True)[:j]]
                keep = keep.flatten().index_fill(0, top, False).view_as(d)
        return keep.to(logp.dtype)

