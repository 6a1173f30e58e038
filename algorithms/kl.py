"""KL to the reference policy: estimator, placement and coefficient.

u = log π_ref − log π per token (the TRL / verl / OpenRLHF sign, convention 2):
k1 = −u, k2 = u²/2, k3 = e^u − 1 − u (≥ 0).

placement "loss":   β · k(log π_θ, log π_ref) is added to every token's loss and aggregated with
                    the policy term's weights (GRPO).
placement "reward": β · k(log π_old, log π_ref), taken at sampling time and detached, is
                    subtracted from the reward: summed over the completion for outcome
                    estimators, per token for gae / reinforce_pp (PPO, RLOO, ReMax, REINFORCE++).
β = 0 turns the term off; KL is still logged whenever `logp_ref` is given.

importance (placement "loss" only): the unbiased estimator of DeepSeek-V3.2 (arXiv 2512.02556,
TRL use_bias_correction_kl): β · r · k with r = π_θ/π_old per token, differentiable (through π_θ),
because the tokens were sampled from π_old, not π_θ. See KL.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from .objectives import log_ratio
from .parts import Part, fail, nonnegative, part

Estimator = Literal["k1", "k2", "k3"]


def kl_estimate(logp: Tensor, logp_ref: Tensor, estimator: Estimator) -> Tensor:
    """(B, T) per-token estimate of KL(π ‖ π_ref) from log-probs of the sampled tokens."""
    u = logp_ref - logp
    if estimator == "k1":
        return -u
    if estimator == "k2":
        return 0.5 * u * u
    return torch.expm1(u) - u


@part("kl")
class KL(Part):
    """β · k, placed in the loss or in the reward.

    importance=True (loss only) multiplies each token's k by r = exp(log π_θ − log π_old), with
    gradient: DeepSeek-V3.2's unbiased KL (2512.02556) as TRL's use_bias_correction_kl (which always
    uses k3). π_old is Rollouts.logp_old, the trainer's log-probs at the start of the update, as in
    TRL (not the behaviour policy's μ). log r is clamped to ±20 like every ratio (TRL does not clamp).
    Departure: TRL with importance_sampling_level="sequence" (GSPO) uses the sequence's
    geometric-mean ratio for every token; we always use the token ratio, the paper's form.
    """

    coef: float = 0.0
    estimator: Estimator = "k3"
    placement: Literal["loss", "reward"] = "loss"
    importance: bool = False

    LATER = ("importance",)

    def check(self) -> None:
        nonnegative("KL.coef", self.coef)
        if self.importance and self.placement != "loss":
            fail("KL.importance", "reweights the KL in the loss by π_θ/π_old; it needs placement 'loss', "
                                  f"got {self.placement!r}")

    @property
    def active(self) -> bool:
        return self.coef > 0

    def reward_penalty(self, logp_old: Tensor, logp_ref: Tensor | None, mask: Tensor) -> Tensor | None:
        """(B, T) β·k at sampling time (detached, masked) when the KL sits in the reward, else None."""
        if not (self.active and self.placement == "reward"):
            return None
        require_reference(logp_ref)
        k = kl_estimate(logp_old.detach(), logp_ref.detach(), self.estimator)
        return torch.where(mask.bool(), self.coef * k, torch.zeros_like(k))

    def loss_term(self, logp: Tensor, logp_ref: Tensor | None,
                  logp_old: Tensor | None = None) -> Tensor | None:
        """(B, T) β·k(π_θ, π_ref) per token when the KL sits in the loss, else None; times
        π_θ/π_old when `importance` (then logp_old, (B, T), is required)."""
        if not (self.active and self.placement == "loss"):
            return None
        require_reference(logp_ref)
        k = kl_estimate(logp, logp_ref.detach(), self.estimator)
        if self.importance:
            if logp_old is None:
                raise ValueError("KL.importance needs logp_old (Rollouts.logp_old) passed to loss_term")
            k = log_ratio(logp, logp_old).exp() * k
        return self.coef * k


def require_reference(logp_ref: Tensor | None) -> None:
    if logp_ref is None:
        raise ValueError("this recipe has a KL term (kl.coef > 0) but Rollouts.logp_ref is None; "
                         "the engine must provide reference log-probs (recipe.needs.reference)")
