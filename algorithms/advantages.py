"""Advantage estimators: `estimator.compute(batch, penalty) -> (B, T)`, zero on padding.

`penalty` is the (B, T) reward-placed KL β·k at sampling time (or None); outcome estimators
subtract its sum over the completion from the reward, token estimators (reinforce_pp, gae) keep it
per token. Outcome advantages are broadcast over the completion's tokens. Conventions: group std
is Bessel-corrected with a named eps; a group whose rewards are all equal, or a group of one, gets
A = 0 from the group estimators; batch whitening divides by the Bessel std over valid tokens + eps.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from .aggregation import group_index
from .errors import ConfigError
from .parts import Part, nonnegative, part, positive, unit
from .rollouts import Rollouts


class Advantage(Part):
    """Base class of advantage estimators."""

    uses_critic = False  # needs Rollouts.values and a Critic part
    uses_greedy_baseline = False  # needs Rollouts.baseline_rewards from a greedy rollout

    def compute(self, batch: Rollouts, penalty: Tensor | None = None) -> Tensor:
        r = outcome(batch, penalty)
        return broadcast(self.outcome(r, batch), batch.mask)

    def outcome(self, r: Tensor, batch: Rollouts) -> Tensor:
        """(B,) advantage of each completion from its (KL-adjusted) outcome reward r."""
        raise NotImplementedError


# ---------------------------------------------------------------------------- helpers

def outcome(batch: Rollouts, penalty: Tensor | None) -> Tensor:
    """(B,) r_i − Σ_t β·k_{i,t} in the dtype of logp_old."""
    r = batch.rewards.to(batch.logp_old.dtype)
    return r if penalty is None else r - penalty.sum(-1)


def broadcast(a: Tensor, mask: Tensor) -> Tensor:
    """(B,) -> (B, T), zero on padding."""
    return torch.where(mask.bool(), a[:, None].expand(mask.shape), 0.0)


def group_stats(r: Tensor, group: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per row: group mean, Bessel std (0 for a group of one), group size, all-equal flag."""
    idx, G = group_index(group)
    zeros = torch.zeros(G, dtype=r.dtype, device=r.device)
    n = zeros.index_add(0, idx, torch.ones_like(r))
    mean = zeros.index_add(0, idx, r) / n
    dev = r - mean[idx]
    var = zeros.index_add(0, idx, dev * dev) / (n - 1).clamp_min(1)
    hi = zeros.scatter_reduce(0, idx, r, "amax", include_self=False)
    lo = zeros.scatter_reduce(0, idx, r, "amin", include_self=False)
    flat = (hi == lo) | (n < 2)
    return mean[idx], var.sqrt()[idx], n[idx], flat[idx]


def centred(r: Tensor, group: Tensor) -> Tensor:
    """r − mean_G r, exactly 0 in all-equal groups and groups of one."""
    mean, _, _, flat = group_stats(r, group)
    return torch.where(flat, torch.zeros_like(r), r - mean)


def whiten(x: Tensor, mask: Tensor, eps: float) -> Tensor:
    """(x − mean) / (std + eps) over the valid tokens of the batch (Bessel std), 0 on padding."""
    m = mask.bool()
    n = m.sum()
    mean = torch.where(m, x, 0.0).sum() / n.clamp_min(1)
    var = (torch.where(m, x - mean, 0.0) ** 2).sum() / (n - 1).clamp_min(1)
    return torch.where(m, (x - mean) / (var.sqrt() + eps), 0.0)


def token_rewards(r: Tensor, mask: Tensor, penalty: Tensor | None) -> Tensor:
    """(B, T): the outcome reward r_i on the last valid token, minus the per-token KL penalty."""
    m = mask.bool()
    pos = torch.arange(m.shape[1], device=m.device).expand(m.shape)
    last = torch.where(m, pos, -1).max(-1).values
    out = torch.zeros(m.shape, dtype=r.dtype, device=r.device)
    rows = torch.nonzero(last >= 0).squeeze(-1)
    out[rows, last[rows]] = r[rows]
    return out if penalty is None else out - penalty


def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """(B, T) R_t = Σ_{s≥t} γ^(s−t) r_s over valid tokens (padding is skipped, returns 0 there)."""
    m = mask.bool()
    out = torch.zeros_like(rewards)
    run = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        run = torch.where(m[:, t], rewards[:, t] + gamma * run, run)
        out[:, t] = torch.where(m[:, t], run, 0.0)
    return out


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: Tensor | float) -> Tensor:
    """(B, T) GAE: δ_t = r_t + γV_{t+1} − V_t, Â_t = δ_t + γλÂ_{t+1}, zero past the end.

    Padding is skipped (the next valid token is t+1), so left padding and holes are handled.
    `lam` is a float or a (B,) tensor (VAPO's per-completion λ).
    """
    m = mask.bool()
    lam = torch.as_tensor(lam, dtype=rewards.dtype, device=rewards.device).expand(rewards.shape[:1])
    out = torch.zeros_like(rewards)
    next_v = torch.zeros_like(rewards[:, 0])
    next_a = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        a = rewards[:, t] + gamma * next_v - values[:, t] + gamma * lam * next_a
        out[:, t] = torch.where(m[:, t], a, 0.0)
        next_v = torch.where(m[:, t], values[:, t], next_v)
        next_a = torch.where(m[:, t], a, next_a)
    return out


# ---------------------------------------------------------------------------- outcome estimators

@part("group_norm")
class GroupNorm(Advantage):
    """A_i = (r_i − mean_G r) / (s + eps): s = group std ("std", GRPO), 1 ("none", Dr. GRPO),
    or the std of all rewards in the batch ("batch", TRL's scale_rewards="batch", LitePPO)."""

    scale: Literal["std", "none", "batch"] = "std"
    eps: float = 1e-6

    def check(self) -> None:
        nonnegative("GroupNorm.eps", self.eps)

    def outcome(self, r: Tensor, batch: Rollouts) -> Tensor:
        mean, std, _, flat = group_stats(r, batch.group)
        if self.scale == "std":
            a = (r - mean) / (std + self.eps)
        elif self.scale == "batch":
            a = (r - mean) / (r.std(correction=1 if r.numel() > 1 else 0) + self.eps)
        else:
            a = r - mean
        return torch.where(flat, torch.zeros_like(a), a)


@part("rloo")
class RLOO(Advantage):
    """A_i = r_i − mean of the other completions of the group = G/(G−1) · (r_i − mean_G r)."""

    def outcome(self, r: Tensor, batch: Rollouts) -> Tensor:
        mean, _, n, flat = group_stats(r, batch.group)
        a = n / (n - 1).clamp_min(1) * (r - mean)
        return torch.where(flat, torch.zeros_like(a), a)


@part("remax")
class ReMax(Advantage):
    """A_i = r_i − r(greedy completion of the same prompt), from `Rollouts.baseline_rewards`."""

    uses_greedy_baseline = True

    def outcome(self, r: Tensor, batch: Rollouts) -> Tensor:
        if batch.baseline_rewards is None:
            raise ValueError("remax advantages need Rollouts.baseline_rewards (the greedy rollout's "
                             "reward per completion; recipe.needs.greedy_baseline)")
        return r - batch.baseline_rewards.to(r.dtype)


@part("batch_mean")
class BatchMean(Advantage):
    """A_i = r_i − mean over the batch (REINFORCE with a batch-mean baseline)."""

    def outcome(self, r: Tensor, batch: Rollouts) -> Tensor:
        return r - r.mean()


@part("none")
class Raw(Advantage):
    """A_i = r_i − baseline (a constant; 0 gives the raw reward, e.g. ±1 as TOPR uses)."""

    baseline: float = 0.0

    def outcome(self, r: Tensor, batch: Rollouts) -> Tensor:
        return r - self.baseline


# ---------------------------------------------------------------------------- token estimators

@part("reinforce_pp")
class ReinforcePP(Advantage):
    """REINFORCE++: token returns R_t = Σ_{s≥t} γ^(s−t)(r·1[s=last] − β·k1_s), whitened over all
    valid tokens of the batch (global normalisation)."""

    gamma: float = 1.0
    eps: float = 1e-6

    def check(self) -> None:
        unit("ReinforcePP.gamma", self.gamma)
        nonnegative("ReinforcePP.eps", self.eps)

    def compute(self, batch: Rollouts, penalty: Tensor | None = None) -> Tensor:
        r = self.base(batch.rewards.to(batch.logp_old.dtype), batch)
        ret = discounted_returns(token_rewards(r, batch.mask, penalty), batch.mask, self.gamma)
        return whiten(ret, batch.mask, self.eps)

    def base(self, r: Tensor, batch: Rollouts) -> Tensor:
        return r


@part("reinforce_pp_baseline")
class ReinforcePPBaseline(ReinforcePP):
    """REINFORCE++-baseline: r_i − mean_G r in place of r_i, then as reinforce_pp."""

    def base(self, r: Tensor, batch: Rollouts) -> Tensor:
        return centred(r, batch.group)


class GAEBase(Advantage):
    """Critic-based estimators: need `Rollouts.values` (V_old)."""

    uses_critic = True

    def lam_of(self, batch: Rollouts) -> Tensor | float:
        raise NotImplementedError

    def raw(self, batch: Rollouts, penalty: Tensor | None, lam: Tensor | float) -> Tensor:
        if batch.values is None:
            raise ValueError(f"{self.tag} advantages need Rollouts.values (critic values at "
                             "sampling time; recipe.needs.critic)")
        r = batch.rewards.to(batch.logp_old.dtype)
        values = torch.where(batch.mask.bool(), batch.values.to(r.dtype).detach(), 0.0)
        return gae(token_rewards(r, batch.mask, penalty), values, batch.mask, self.gamma, lam)

    def compute(self, batch: Rollouts, penalty: Tensor | None = None) -> Tensor:
        a = self.raw(batch, penalty, self.lam_of(batch))
        return whiten(a, batch.mask, self.eps) if self.whiten else a

    def returns(self, batch: Rollouts, penalty: Tensor | None, lam: float) -> Tensor:
        """(B, T) value targets Â(λ) + V_old (never whitened), zero on padding."""
        a = self.raw(batch, penalty, lam)
        return torch.where(batch.mask.bool(), a + batch.values.to(a.dtype).detach(), 0.0)


@part("gae")
class GAE(GAEBase):
    """GAE(γ, λ) on a critic's values, reward on the last token; whitened over the batch's tokens."""

    gamma: float = 1.0
    lam: float = 0.95
    whiten: bool = True
    eps: float = 1e-6

    def check(self) -> None:
        unit("GAE.gamma", self.gamma)
        unit("GAE.lam", self.lam)
        nonnegative("GAE.eps", self.eps)

    def lam_of(self, batch: Rollouts) -> float:
        return self.lam


@part("length_adaptive_gae")
class LengthAdaptiveGAE(GAEBase):
    """VAPO: GAE with λ_i = 1 − 1/(α·L_i) per completion, clamped to [lam_min, 1] (short
    completions, α·L_i < 1, would otherwise get λ < 0). The critic's targets use its own λ."""

    alpha: float = 0.05
    gamma: float = 1.0
    lam_min: float = 0.0
    whiten: bool = True
    eps: float = 1e-6

    def check(self) -> None:
        positive("LengthAdaptiveGAE.alpha", self.alpha)
        unit("LengthAdaptiveGAE.gamma", self.gamma)
        unit("LengthAdaptiveGAE.lam_min", self.lam_min)
        nonnegative("LengthAdaptiveGAE.eps", self.eps)

    def lam_of(self, batch: Rollouts) -> Tensor:
        L = batch.lengths.to(batch.logp_old.dtype)
        lam = 1 - 1 / (self.alpha * L).clamp_min(1e-12)
        return lam.clamp(self.lam_min, 1.0)



# ---------------------------------------------------------------------------- the 2026 family

@part("gpg")
class GPG(Advantage):
    """GPG (Chu et al. 2025, arXiv 2504.02546), as verl's compute_gpg_outcome_advantage:
    A_i = α (r_i − mean_G r) with α = B / max(#{i : r_i ≠ 0}, 1) over the whole batch (no std).
    Meant with the plain −A·log π objective. Departure: a group of one or an all-equal group gets
    A = 0 (the estimators' convention); verl gives a group of one α·r_i (baseline 0)."""

    def outcome(self, r: Tensor, batch: Rollouts) -> Tensor:
        alpha = r.numel() / torch.count_nonzero(r).clamp_min(1).to(r.dtype)
        return alpha * centred(r, batch.group)


@part("opo")
class OPO(Advantage):
    """OPO (Hao et al. 2025, arXiv 2505.23585), as verl's compute_opo_outcome_advantage: the baseline
    is the length-weighted group mean b = Σ_G L_j r_j / Σ_G L_j (L = valid tokens), A_i = r_i − b.
    Departure: a group of one or an all-equal group gets A = 0 (verl: a group of one gets r_i)."""

    def outcome(self, r: Tensor, batch: Rollouts) -> Tensor:
        idx, G = group_index(batch.group)
        L = batch.lengths.to(r.dtype)
        zeros = torch.zeros(G, dtype=r.dtype, device=r.device)
        b = zeros.index_add(0, idx, L * r) / zeros.index_add(0, idx, L).clamp_min(1)
        _, _, _, flat = group_stats(r, batch.group)
        return torch.where(flat, torch.zeros_like(r), r - b[idx])


@part("gdpo")
class GDPO(Advantage):
    """GDPO (Liu et al. 2026, arXiv 2601.05242), as TRL's multi_objective_aggregation=
    "normalize_then_sum": each reward function's values (Rollouts.reward_parts, (B, K)) are z-scored
    within their group, z_k = (x_k − mean_G x_k) / (std_G x_k + eps); s = Σ_k w_k z_k; then
    A_i = (s_i − mean s) / (std s + eps) over the batch's completions (Bessel stds, eps 1e-4 both as
    TRL). `weights` () = 1 for every part, else one weight per column of reward_parts.

    Departures: an all-equal group (or a group of one) gets z_k = 0 exactly (TRL: 0 up to rounding);
    NaN parts are not supported (TRL's nan-aware means skip a function that returned None). verl's
    gdpo (not in the snapshot we read; seen in forks) z-scores with eps 1e-6 and whitens per token
    (longer completions count more), so its numbers differ. GDPO reads reward_parts only: shaping
    (which rewrites `rewards`) does not reach it, and a KL penalty in the reward is refused.
    """

    weights: tuple[float, ...] = ()
    eps: float = 1e-4

    def check(self) -> None:
        nonnegative("GDPO.eps", self.eps)

    def compute(self, batch: Rollouts, penalty: Tensor | None = None) -> Tensor:
        if penalty is not None:
            raise ConfigError("gdpo advantages normalise Rollouts.reward_parts and cannot take a KL penalty "
                              "in the reward; use KL.placement='loss'")
        return broadcast(self.outcome(batch.rewards, batch), batch.mask)

    def outcome(self, r: Tensor, batch: Rollouts) -> Tensor:
        if batch.reward_parts is None:
            raise ValueError("gdpo advantages need Rollouts.reward_parts (B, K): each reward function's "
                             "values before they were summed into Rollouts.rewards")
        parts = batch.reward_parts.to(batch.logp_old.dtype)
        K = parts.shape[1]
        if self.weights and len(self.weights) != K:
            raise ConfigError(f"GDPO.weights: {len(self.weights)} weights for {K} reward parts "
                              "(Rollouts.reward_parts has one column per reward function)")
        w = torch.tensor(self.weights or (1.0,) * K, dtype=parts.dtype, device=parts.device)
        s = torch.zeros_like(parts[:, 0])
        for k in range(K):
            mean, std, _, flat = group_stats(parts[:, k], batch.group)
            z = (parts[:, k] - mean) / (std + self.eps)
            s = s + w[k] * torch.where(flat, torch.zeros_like(z), z)
        return (s - s.mean()) / (s.std(correction=1 if s.numel() > 1 else 0) + self.eps)
