"""KL to the reference policy: estimator, placement and coefficient.

u = log π_ref − log π per token (the TRL / verl / OpenRLHF sign, convention 2):
k1 = −u, k2 = u²/2, k3 = e^u − 1 − u (≥ 0).

placement "loss":   β · k(log π_θ, log π_ref) is added to every token's loss and aggregated with
                    the policy term's weights (GRPO).
placement "reward": β · k(log π_old, log π_ref), taken at sampling time and detached, is
                    subtracted from the reward: summed over the completion for outcome
                    estimators, per token for gae / reinforce_pp (PPO, RLOO, ReMax, REINFORCE++).
β = 0 turns the term off; KL is still logged whenever `logp_ref` is given.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from .parts import Part, nonnegative, part

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
    """β · k, placed in the loss or in the reward."""

    coef: float = 0.0
    estimator: Estimator = "k3"
    placement: Literal["loss", "reward"] = "loss"

    def check(self) -> None:
        nonnegative("KL.coef", self.coef)

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

    def loss_term(self, logp: Tensor, logp_ref: Tensor | None) -> Tensor | None:
        """(B, T) β·k(π_θ, π_ref) per token when the KL sits in the loss, else None."""
        if not (self.active and self.placement == "loss"):
            return None
        require_reference(logp_ref)
        return self.coef * kl_estimate(logp, logp_ref.detach(), self.estimator)


def require_reference(logp_ref: Tensor | None) -> None:
    if logp_ref is None:
        raise ValueError("this recipe has a KL term (kl.coef > 0) but Rollouts.logp_ref is None; "
                         "the engine must provide reference log-probs (recipe.needs.reference)")
