"""Critic settings and the clipped value loss (PPO, VAPO).

Value loss per token: c_v · max((V − R)², (clip(V, V_old ± eps_v) − R)²) / 2, aggregated with the
policy's weights; V are the new critic values (require grad), V_old = `Rollouts.values` (sampling
time), R = `recipe.returns(batch)`. The critic's targets use `Critic.lam`, decoupled from the
policy's λ (VAPO: λ_critic = 1, Monte-Carlo returns).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .aggregation import aggregate
from .parts import Part, fail, nonnegative, part, unit


@part("critic")
class Critic(Part):
    """A learned value model: loss coefficient, value clip, target λ, pre-training steps."""

    value_coef: float = 0.1
    value_clip: float | None = 0.2
    lam: float = 0.95
    pretrain_steps: int = 0

    def check(self) -> None:
        nonnegative("Critic.value_coef", self.value_coef)
        if self.value_clip is not None:
            nonnegative("Critic.value_clip", self.value_clip)
        unit("Critic.lam", self.lam)
        if self.pretrain_steps < 0:
            fail("Critic.pretrain_steps", f"must be >= 0, got {self.pretrain_steps!r}")

    def per_token(self, values: Tensor, old_values: Tensor, returns: Tensor) -> Tensor:
        """(B, T) c_v · max((V−R)², (clip(V, V_old±eps_v)−R)²)/2."""
        R = returns.detach()
        err = (values - R) ** 2
        if self.value_clip is not None:
            old = old_values.detach()
            clipped = old + (values - old).clamp(-self.value_clip, self.value_clip)
            err = torch.max(err, (clipped - R) ** 2)
        return self.value_coef * 0.5 * err

    def loss(self, values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor,
             weights: Tensor) -> Tensor:
        return aggregate(self.per_token(values, old_values, returns), mask, weights)


def explained_variance(values: Tensor, returns: Tensor, mask: Tensor) -> Tensor:
    """1 − Var(R − V) / Var(R) over valid tokens (0-dim; NaN when Var(R) = 0). Compute it once per
    step on the whole batch: it does not combine across micro-batches."""
    m = mask.bool()
    v, r = values.detach()[m], returns.detach()[m]
    return 1 - (r - v).var(correction=0) / r.var(correction=0)
