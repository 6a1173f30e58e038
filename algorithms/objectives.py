"""Objectives: the per-token loss ℓ_{i,t} before aggregation, and its clipping statistics.

`objective.per_token(logp, logp_old, adv, mask) -> (ℓ (B, T), stats)`, with δ = log π_θ − log π_old,
ρ = e^δ. Every objective reports policy/ratio_{mean,min,max} of the token ratio ρ (one meaning
across recipes) and policy/clip_frac_{low,high} (convention 7: the share of valid tokens where the
clip binds, (A<0 ∧ below range) → low, (A>0 ∧ above range) → high; 0 for objectives with no clip;
for dppo, tokens its trust-region mask drops). gspo adds policy/clip_frac_seq; cispo and dppo
policy/weight_capped_frac (share of tokens whose stop-gradient IS weight is capped); clip_cov and
kl_cov policy/cov_frac (share of tokens their covariance rule selects). On-policy (ρ ≡ 1) every
objective has the gradient of −A·log π_θ and every clip fraction is exactly 0, except clip_cov,
which detaches its covariance-selected tokens whatever the ratio (the paper's intent).

A sequence quantity (gspo's and gmpo's ratio) is written per token in the GSPO-token form: its
value on every token of the row and, on token t, only the gradient that flows through log π_t.
Summed over a row this is exactly the sequence loss times L_i, so under any aggregation (all are
per-sequence weights) the loss and gradient equal the sequence-level formula's.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import torch
from torch import Tensor

from .parts import Part, fail, nonnegative, part, positive, unit

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
    """Base class of objectives. `inputs` names what per_token takes beyond its four tensors, as
    keywords: "logp_behav" (Rollouts.logp_behav, the behaviour policy's log-probs; the engine then
    provides it, recomputing logp_old as the proximal policy) and "entropy" ((B, T), detached).
    Recipes read it on the instance, so a part whose inputs depend on a field makes it a property
    (vespo's behaviour term)."""

    inputs: ClassVar[tuple[str, ...]] = ()
    uses_global_rng: ClassVar[bool] = False  # draws from torch's global generator (Needs.global_rng)

    def per_token(self, logp: Tensor, logp_old: Tensor, adv: Tensor, mask: Tensor) -> tuple[Tensor, Stats]:
        raise NotImplementedError


@part("ppo_clip")
class PPOClip(Objective):
    """ℓ = −min(ρA, clip(ρ, 1−eps_low, 1+eps_high)A). Dual clip c (A < 0 only) caps the loss at
    −cA, i.e. the objective is max(min(ρA, clip(ρ)A), cA) (Ye et al. 2020; verl's clip_ratio_c).

    delta (INTELLECT-2's two-sided clip, TRL's `delta`): ρ ← min(ρ, δ) in the unclipped term before
    PPO's min, δ > 1 + eps_high. It binds only for A < 0 and ρ > δ, where the loss becomes the
    constant −δA: the same cap as dual_clip = δ (TRL and verl name one idea twice); with both set
    the smaller binds. Added December 2026 (LATER: ids of recipes without it are unchanged)."""

    eps_low: float = 0.2
    eps_high: float = 0.2
    dual_clip: float | None = None
    delta: float | None = None

    LATER = ("delta",)

    def check(self) -> None:
        for name in ("eps_low", "eps_high"):
            nonnegative(f"PPOClip.{name}", getattr(self, name))
        if self.eps_low > 1:
            fail("PPOClip.eps_low", f"must be <= 1 (1 − eps_low is a ratio), got {self.eps_low!r}")
        if self.dual_clip is not None and not self.dual_clip > 1:
            fail("PPOClip.dual_clip", f"must be > 1 or None, got {self.dual_clip!r}")
        if self.delta is not None and not self.delta > 1 + self.eps_high:
            fail("PPOClip.delta", f"must be > 1 + eps_high ({1 + self.eps_high!r}) or None, "
                                  f"got {self.delta!r}")

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        ratio = torch.exp(log_ratio(logp, logp_old))
        capped = ratio if self.delta is None else ratio.clamp(max=self.delta)
        loss = -torch.min(capped * adv, ratio.clamp(1 - self.eps_low, 1 + self.eps_high) * adv)
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


# ------------------------------------------------------------------ the 2026 family


def row_mean(x: Tensor, m: Tensor) -> Tensor:
    """(B, 1) mean of x over each row's valid tokens (0 for an empty row), keeping the graph."""
    return (torch.where(m, x, 0.0).sum(-1) / m.sum(-1).clamp_min(1))[:, None]


def covariance(adv: Tensor, logp: Tensor, m: Tensor) -> Tensor:
    """(B, T) Cov_t = (A − mean A)(log π − mean log π), detached; the means are over the valid
    tokens of this (micro-)batch, as verl computes them per micro-batch (NaN if there are none)."""
    a, lp = adv.detach(), logp.detach()
    return (a - a[m].mean()) * (lp - lp[m].mean())


GATE_TOL = 0.01  # SAPO's gate acts on a token when it damps its gradient by more than 1%


@part("sapo")
class SAPO(Objective):
    """SAPO (Gao et al. 2025, arXiv 2511.20347): a soft gate instead of a hard clip,
    ℓ = −(4/τ)·σ(τ(ρ−1))·A, τ = tau_pos where A > 0 and tau_neg where A ≤ 0. The gradient flows
    through σ (no stop-gradient, as in TRL's and verl's `sapo`): ∂ℓ/∂log π = −4σ(1−σ)·ρ·A, which
    is −A at ρ = 1 and decays smoothly off-policy (policy/gate_damped_frac: the share of tokens whose
    factor 4σ(1−σ) is below 0.99, i.e. that the gate acts on). Both anchors aggregate seq_mean_token_mean (verl
    forces it); TRL's mean counts fully masked rows as our B does, verl's excludes them. Nothing
    clips, so the clip fractions are 0 (verl's pg_clipfrac is 0 too)."""

    tau_pos: float = 1.0
    tau_neg: float = 1.05

    def check(self) -> None:
        for name in ("tau_pos", "tau_neg"):
            positive(f"SAPO.{name}", getattr(self, name))

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        ratio = torch.exp(log_ratio(logp, logp_old))
        tau = torch.full_like(logp, self.tau_neg).masked_fill(adv > 0, self.tau_pos)
        gate = torch.sigmoid(tau * (ratio - 1))
        loss = -gate * (4 / tau) * adv
        # the gate's factor on the gradient against the unclipped ratio objective: 4σ(1−σ), 1 at ρ = 1
        g = gate.detach()
        damped = 4 * g * (1 - g) < 1 - GATE_TOL
        return loss, {**clip_stats(None, None, m, logp), **ratio_stats(ratio, m),
                      "policy/gate_damped_frac": token_mean(damped & m, m).to(logp.dtype)}


@part("gmpo")
class GMPO(Objective):
    """GMPO (Zhao et al. 2025, arXiv 2507.20673): the geometric mean of the token ratios,
    ℓ_i = −Ā_i·exp(mean_t δ̃_{i,t}), with each δ clipped in log space on the side that limits A's
    sign: δ̃ = min(δ, eps_high) where A > 0, max(δ, −eps_low) where A < 0, 0 where A = 0 (verl's
    `geo_mean`, sgn·min(sgn·δ, sgn·clip(δ)); TRL's experimental GMPO agrees). Ā_i is the row's mean
    advantage (one advantage per completion, as verl assumes).

    Per token (the GSPO-token form, see the module docstring):
    ℓ_{i,t} = −Ā_i·sg(g_i)·e^(δ̃_t − sg δ̃_t), g_i = exp(mean_t δ̃): its value is ℓ_i on every token
    and Σ_t ∇ℓ_{i,t} = L_i·∇ℓ_i. With
    Aggregation("seq_mean_token_mean") (w_i = 1/(B·L_i)) the loss is mean_i ℓ_i over every row, which
    is verl's geo_mean exactly (loss and gradient; verl also divides by every row, masked ones
    included). Departure: δ is clamped to ±20 first (MAX_LOG_RATIO; verl leaves that commented out).
    policy/clip_frac_{low,high}: tokens whose log-ratio clip binds (verl's pg_clipfrac_lower and
    pg_clipfrac count every out-of-range token by A's sign, binding or not).
    """

    eps_low: float = 0.4
    eps_high: float = 0.4

    def check(self) -> None:
        for name in ("eps_low", "eps_high"):
            nonnegative(f"GMPO.{name}", getattr(self, name))

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        delta = log_ratio(logp, logp_old)
        clipped = delta.clamp(-self.eps_low, self.eps_high)
        zero = torch.zeros_like(delta)
        d = torch.where(adv > 0, torch.min(delta, clipped),
                        torch.where(adv < 0, torch.max(delta, clipped), zero))
        log_g = row_mean(d.detach(), m)
        loss = -row_mean(adv, m) * torch.exp(log_g + d - d.detach())
        low = (adv < 0) & (delta < -self.eps_low)
        high = (adv > 0) & (delta > self.eps_high)
        return loss, {**clip_stats(low, high, m, logp), **ratio_stats(torch.exp(delta), m)}


# VESPO's clamp of the sequence log-weight: [log 1e-8, 20], TRL's values ("matching the original").
VESPO_LOG_W_MIN = math.log(1e-8)


@part("vespo")
class VESPO(Objective):
    """VESPO (arXiv 2602.10693): ℓ = −φ_i·A·log π_θ with a stop-gradient sequence weight
    φ = e^λ·W^k·e^(−λW) (a Gamma shape, φ(1) = 1), W_i = exp(Σ_t δ [+ Σ_t log ρ_behav]) clamped to
    [1e-8, e^20]; (k, λ) = (k_pos, lambda_pos) where A ≥ 0, (k_neg, lambda_neg) where A < 0.
    Reference: TRL's `get_gamma_weights` (token δ clamped to ±20, then summed; φ computed in log
    space; NaN/inf → 0) with TRL's `vespo` aggregation, a token sum over the global token count:
    Aggregation("token_mean") here.

    behaviour=True adds the behaviour-policy term log ρ_behav = clamp(log π_old − log μ, log 1e-8, 20)
    per valid token (μ = Rollouts.logp_behav): `inputs` is then ("logp_behav",), so the recipe
    declares needs.behaviour and the engine provides μ. It equals TRL fed its token-level vLLM
    importance ratio untruncated; TRL truncates or masks that ratio first (vllm_importance_sampling_
    mode token_truncate / token_mask). The weight already corrects for μ: do not add a behaviour
    correction on top (TRL skips its IS correction for vespo). Nothing clips: clip fractions are 0.
    """

    k_pos: float = 2.0
    lambda_pos: float = 3.0
    k_neg: float = 3.0
    lambda_neg: float = 2.0
    behaviour: bool = False

    def check(self) -> None:
        for name in ("k_pos", "k_neg"):
            nonnegative(f"VESPO.{name}", getattr(self, name))
        for name in ("lambda_pos", "lambda_neg"):
            positive(f"VESPO.{name}", getattr(self, name))

    @property
    def inputs(self) -> tuple[str, ...]:  # per instance, unlike the ClassVar of other objectives
        return ("logp_behav",) if self.behaviour else ()

    def per_token(self, logp, logp_old, adv, mask, logp_behav: Tensor | None = None):
        m = mask.bool()
        if self.behaviour and logp_behav is None:
            raise ValueError("VESPO(behaviour=True) needs logp_behav= (B, T)")
        delta = log_ratio(logp, logp_old)
        with torch.no_grad():
            log_w = torch.where(m, delta, 0.0).sum(-1, keepdim=True)
            if self.behaviour:
                log_rho = (logp_old - logp_behav).clamp(VESPO_LOG_W_MIN, MAX_LOG_RATIO)
                log_w = log_w + torch.where(m, log_rho, 0.0).sum(-1, keepdim=True)
            log_w = log_w.clamp(VESPO_LOG_W_MIN, MAX_LOG_RATIO)
            k = torch.full_like(logp, self.k_neg).masked_fill(adv >= 0, self.k_pos)
            lam = torch.full_like(logp, self.lambda_neg).masked_fill(adv >= 0, self.lambda_pos)
            phi = torch.exp(lam + k * log_w - lam * log_w.exp()).nan_to_num(0.0, 0.0, 0.0)
        loss = -phi * adv * logp
        return loss, {**clip_stats(None, None, m, logp), **ratio_stats(torch.exp(delta), m)}


# DPPO's default thresholds: TV 0.2 (prime-rl's dppo_mask_low/high); binary KL 0.05 (verl's
# examples/dppo_trainer script; it uses TV 0.15). verl's function itself takes PPO's clip_ratio.
DPPO_DELTA = {"tv": 0.2, "kl": 0.05}
DPPO_EPS = 1e-8  # verl's guard inside the binary KL's log((1 − p_old + ε)/(1 − p + ε))


@part("dppo")
class DPPO(Objective):
    """DPPO-Binary (Qi et al. 2026, arXiv 2602.04879): ℓ = −A·sg(min(ρ, ratio_cap))·log π_θ·M, a
    trust-region mask on the token probability p = π_θ(y_t) instead of PPO's ratio clip.
    divergence "tv": M = 1[p − p_old ≤ δ] where A > 0, 1[p − p_old ≥ −δ] where A ≤ 0.
    divergence "kl": with the binary KL D = p_old·log(p_old/p) + (1−p_old)·log((1−p_old)/(1−p)),
    M = 1[D ≤ δ ∨ p ≤ p_old] where A > 0, 1[D ≤ δ ∨ p ≥ p_old] where A ≤ 0.
    Exactly verl's `dppo_tv` / `dppo_kl` with clip_ratio_low = clip_ratio_high = δ.

    delta None means DPPO_DELTA[divergence] (TV 0.2, prime-rl; KL 0.05, verl's example script).
    ratio_cap: verl's clip_ratio_c, 3.0 in its actor config (the function's own fallback is 20 and
    the example script sets 10000; the paper, §5.4, recommends a large cap). Stats:
    policy/clip_frac_{high,low} the masked tokens with A > 0 / A < 0 (verl's pg_clipfrac is their
    sum), policy/weight_capped_frac the kept tokens with ρ > ratio_cap (verl's pg_clipfrac_lower).
    """

    divergence: Literal["tv", "kl"] = "tv"
    delta: float | None = None
    ratio_cap: float = 3.0

    def check(self) -> None:
        if self.delta is not None:
            positive("DPPO.delta", self.delta)
        if not self.ratio_cap >= 1:
            fail("DPPO.ratio_cap", f"must be >= 1 (so on-policy ρ = 1 is never capped), "
                                   f"got {self.ratio_cap!r}")

    @property
    def threshold(self) -> float:
        return DPPO_DELTA[self.divergence] if self.delta is None else self.delta

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        ratio = torch.exp(log_ratio(logp, logp_old))
        lp, lp_old = logp.detach(), logp_old.detach()
        p, p_old = lp.exp(), lp_old.exp()
        if self.divergence == "tv":
            keep_pos = p - p_old <= self.threshold
            keep_neg = p - p_old >= -self.threshold
        else:
            kl = (p_old * (lp_old - lp)
                  + (1 - p_old) * torch.log((1 - p_old + DPPO_EPS) / (1 - p + DPPO_EPS)))
            keep_pos = (kl <= self.threshold) | (p <= p_old)
            keep_neg = (kl <= self.threshold) | (p >= p_old)
        keep = torch.where(adv > 0, keep_pos, keep_neg)
        weight = ratio.detach().clamp(max=self.ratio_cap)
        loss = torch.where(keep, -adv * weight * logp, torch.zeros_like(logp))
        stats = clip_stats((adv < 0) & ~keep_neg, (adv > 0) & ~keep_pos, m, logp)
        capped = keep & (ratio > self.ratio_cap)
        stats["policy/weight_capped_frac"] = token_mean(capped, m).to(logp.dtype)
        return loss, {**stats, **ratio_stats(ratio, m)}


@part("kimi")
class Kimi(Objective):
    """Kimi k1.5 (arXiv 2501.12599) / DRO: ℓ = −A·log π_θ + (tau/2)·(log π_θ − log π_old)², a
    policy gradient with a quadratic pull towards the sampling policy instead of a clip. verl's
    `dro` (its policy_loss.dro_beta = tau, which verl requires to be set); tau 0.1 is ROLL's
    kimi15_tau default. The penalty uses the raw log-ratio (no ±20 clamp: nothing is exponentiated),
    as both do. On-policy the penalty and its gradient are 0. Nothing clips."""

    tau: float = 0.1

    def check(self) -> None:
        nonnegative("Kimi.tau", self.tau)

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        loss = -adv * logp + 0.5 * self.tau * (logp - logp_old.detach()).square()
        ratio = torch.exp(log_ratio(logp, logp_old))
        return loss, {**clip_stats(None, None, m, logp), **ratio_stats(ratio, m)}


@part("clip_cov")
class ClipCov(Objective):
    """Clip-Cov (Cui et al. 2025, arXiv 2505.22617): PPO's clip (no dual clip), then a random
    max(⌊frac·N⌋, 1) of the tokens with cov_low < Cov_t < cov_high (and where the PPO clip does not
    bind) lose their loss and gradient (`covariance`, over this micro-batch's N valid tokens).
    Exactly verl's `clip_cov`, including its randomness: the pick is torch.randperm on the global CPU
    generator, drawn only when some token qualifies, so a run seeded like verl (our engine seeds
    torch per run) detaches the same tokens. CPU-GPU sync point: the count and the candidate list.
    Not the on-policy invariant: tokens are detached whatever the ratio. policy/cov_frac: their share."""

    uses_global_rng: ClassVar[bool] = True  # the pick: torch.randperm on the global CPU generator, as verl

    eps_low: float = 0.2
    eps_high: float = 0.2
    frac: float = 2e-4
    cov_low: float = 1.0
    cov_high: float = 5.0

    def check(self) -> None:
        for name in ("eps_low", "eps_high"):
            nonnegative(f"ClipCov.{name}", getattr(self, name))
        if self.eps_low > 1:
            fail("ClipCov.eps_low", f"must be <= 1 (1 − eps_low is a ratio), got {self.eps_low!r}")
        unit("ClipCov.frac", self.frac, open_low=True)
        if not self.cov_low < self.cov_high:
            fail("ClipCov.cov_high", f"must be > cov_low ({self.cov_low!r}), got {self.cov_high!r}")

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        ratio = torch.exp(log_ratio(logp, logp_old))
        loss = -torch.min(ratio * adv, ratio.clamp(1 - self.eps_low, 1 + self.eps_high) * adv)
        low = (adv < 0) & (ratio < 1 - self.eps_low)
        high = (adv > 0) & (ratio > 1 + self.eps_high)
        cov = covariance(adv, logp, m)
        candidates = torch.nonzero(m & ~low & ~high & (cov > self.cov_low) & (cov < self.cov_high))
        detach = torch.zeros_like(m)
        if len(candidates) > 0:
            n = max(int(self.frac * int(m.sum())), 1)
            pick = candidates[torch.randperm(len(candidates))[:n].to(candidates.device)]
            detach[pick[:, 0], pick[:, 1]] = True
        loss = torch.where(detach, torch.zeros_like(loss), loss)
        stats = clip_stats(low, high, m, logp)
        stats["policy/cov_frac"] = token_mean(detach, m).to(logp.dtype)
        return loss, {**stats, **ratio_stats(ratio, m)}


@part("kl_cov")
class KLCov(Objective):
    """KL-Cov (Cui et al. 2025, arXiv 2505.22617): ℓ = −ρA, plus kl_coef·|δ| on the
    max(⌊frac·N⌋, 1) valid tokens of largest Cov_t (`covariance`, over this micro-batch). No clip.
    Exactly verl's `kl_cov` (torch.topk over the valid tokens in row-major order). kl_coef 0.1 is
    verl's config default (PolicyLossConfig.ppo_kl_coef); its function docstring and fallback say 1.
    CPU-GPU sync point: the count. policy/cov_frac: the share of tokens penalised."""

    frac: float = 2e-4
    kl_coef: float = 0.1

    def check(self) -> None:
        unit("KLCov.frac", self.frac, open_low=True)
        nonnegative("KLCov.kl_coef", self.kl_coef)

    def per_token(self, logp, logp_old, adv, mask):
        m = mask.bool()
        delta = log_ratio(logp, logp_old)
        ratio = torch.exp(delta)
        flat = torch.nonzero(m.reshape(-1), as_tuple=True)[0]
        penalised = torch.zeros_like(m)
        if len(flat) > 0:
            cov = covariance(adv, logp, m).reshape(-1)[flat]
            top = torch.topk(cov, max(1, int(len(flat) * self.frac)), largest=True).indices
            penalised.view(-1)[flat[top]] = True
        penalty = torch.where(penalised, self.kl_coef * delta.abs(), torch.zeros_like(delta))
        loss = -ratio * adv + penalty
        stats = clip_stats(None, None, m, logp)
        stats["policy/cov_frac"] = token_mean(penalised, m).to(logp.dtype)
        return loss, {**stats, **ratio_stats(ratio, m)}
