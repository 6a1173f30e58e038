"""The 2026 family (issue 25): the objectives, corrections and masks the field's trainers ship now.

Corrections and controllers are parts of their own (corrections.py, entropy.py); each recipe here is
one of the twelve plus the part its paper adds, so a contrast with its base changes one thing. Each
builder's docstring is the recipe's description: the paper, then where it departs from it.
"""

from __future__ import annotations

from ..advantages import GPG, GroupNorm
from ..aggregation import Aggregation
from ..corrections import OffPolicySequenceMask, RolloutCorrection
from ..kl import KL
from ..objectives import DPPO, GMPO, ISPG, SAPO, VESPO, ClipCov, Kimi, KLCov, PPOClip
from ..recipe import Recipe
from ..registry import recipe
from ..search_spaces import BETA, CLIP
from .family_2025 import NO_KL, grpo, gspo


@recipe("grpo_tis", space={**CLIP, **BETA})
def grpo_tis() -> Recipe:
    """GRPO with truncated importance sampling against the train–inference mismatch (Yao et al. 2025,
    "Your efficient RL framework secretly brings you off-policy RL training", blog; Liu et al. 2025,
    2512.23075): every token's policy term × min(π_old/μ, 2), μ the sampler's log-probs (verl's token
    TIS, cap 2.0).

    Departures: grpo's defaults otherwise; the correction multiplies the policy term only (TRL and verl
    alike). TRL's default is a sequence-level mask with cap 3 (RolloutCorrection(level="sequence",
    mode="mask", c_max=3.0)). In fp32 on-policy rollouts μ = π_old and the weight is exactly 1.
    """
    return grpo().replace(corrections=(RolloutCorrection(level="token", mode="truncate", c_max=2.0),))


@recipe("decoupled_ppo", space={**CLIP})
def decoupled_ppo() -> Recipe:
    """Decoupled PPO (AReaL, Fu et al. 2025, 2505.24298, use_decoupled_loss): for stale rollouts the
    clip acts on r = π_θ/π_prox, the proximal policy being the weights the update starts from
    (recomputed by one more forward), and each token is weighted by sg(π_prox/μ) against the stale
    behaviour policy μ; tokens with π_prox/μ > 5 are rejected (AReaL's rejection_sampling, token level,
    mask action, upper 5). Group-normalised advantages, token-mean loss, no KL (AReaL's GRPO examples).

    Departures: rejected tokens stay in the token-mean's denominator (AReaL drops them from the
    loss mask); ε = 0.2 both sides. On-policy (lag 0, one update) it is grpo-with-token-mean exactly.
    """
    return Recipe(
        advantage=GroupNorm(scale="std"),
        objective=PPOClip(eps_low=0.2, eps_high=0.2),
        aggregation=Aggregation("token_mean"),
        kl=NO_KL,
        corrections=(RolloutCorrection(level="token", mode="mask", c_max=5.0),),
    )


@recipe("sapo", space={
    "recipe.objective.tau_pos": {"low": 0.5, "high": 2.0, "log": True},
    "recipe.objective.tau_neg": {"low": 0.5, "high": 2.0, "log": True},
})
def sapo() -> Recipe:
    """SAPO, Soft Adaptive Policy Optimization. Gao et al. 2025 (2511.20347): the hard clip replaced by a
    soft gate, ℓ = −(4/τ)·σ(τ(ρ − 1))·A, τ = 1.0 for A > 0 and 1.05 for A < 0 (the gate closes faster on
    negative tokens); group-normalised advantages, per-sequence length mean, no KL (TRL and verl `sapo`).

    Departures: one update per batch, where ρ ≡ 1 and the gate's gradient equals the plain policy
    gradient (4·σ'(0) = 1): SAPO differs from grpo-without-KL only off-policy (the stale regimes).
    """
    return Recipe(
        advantage=GroupNorm(scale="std"),
        objective=SAPO(tau_pos=1.0, tau_neg=1.05),
        aggregation=Aggregation("seq_mean_token_mean"),
        kl=NO_KL,
    )


@recipe("gmpo", space={
    "recipe.objective.eps_low": {"low": 0.1, "high": 0.8},
    "recipe.objective.eps_high": {"low": 0.1, "high": 0.8},
})
def gmpo() -> Recipe:
    """GMPO, Geometric-Mean Policy Optimization. Zhao et al. 2025 (2507.20673): the sequence objective
    uses the geometric mean of the token ratios, each clipped in log space to [−0.4, 0.4] on the side
    that limits A's sign; group-normalised advantages, mean over sequences, no KL (verl `geo_mean`).

    Departures: written per token in the GSPO-token form (exact under seq_mean_token_mean).
    """
    return Recipe(
        advantage=GroupNorm(scale="std"),
        objective=GMPO(eps_low=0.4, eps_high=0.4),
        aggregation=Aggregation("seq_mean_token_mean"),
        kl=NO_KL,
    )


@recipe("luspo", space={
    "recipe.objective.eps_low": {"low": 1e-4, "high": 1e-2, "log": True},
    "recipe.objective.eps_high": {"low": 1e-4, "high": 1e-2, "log": True},
})
def luspo() -> Recipe:
    """LUSPO, length-unbiased sequence policy optimization (2602.05261; TRL `luspo`): GSPO's clipped
    sequence ratio with the loss summed over each completion's tokens (length-weighted) and averaged
    over completions, undoing GSPO's per-token length normalisation.

    Departures: none in the math: it is gspo's objective with the seq_mean_token_sum aggregation
    (tests/algorithms/test_algorithms_2026_objectives.py proves the equality with TRL's formula), so
    luspo vs gspo is a one-part contrast.
    """
    return gspo().replace(aggregation=Aggregation("seq_mean_token_sum"))


@recipe("vespo", space={})
def vespo() -> Recipe:
    """VESPO (2602.10693; TRL `vespo`, get_gamma_weights): a stop-gradient sequence weight
    φ = e^λ·W^k·e^(−λW) of the sequence ratio W (with the behaviour policy's ratio folded in),
    (k, λ) = (2, 3) for A ≥ 0 and (3, 2) for A < 0, on ℓ = −φ·A·log π; group-normalised advantages,
    a token sum over the batch's token count (token_mean), no KL.

    Departures: the behaviour term is on (behaviour=True, as TRL folds in its vLLM ratio): in fp32
    on-policy rollouts it is exactly 0. TRL truncates that ratio before use; we use it as is.
    """
    return Recipe(
        advantage=GroupNorm(scale="std"),
        objective=VESPO(behaviour=True),
        aggregation=Aggregation("token_mean"),
        kl=NO_KL,
    )


@recipe("dppo_tv", space={"recipe.objective.delta": {"low": 0.05, "high": 0.5, "log": True}})
def dppo_tv() -> Recipe:
    """DPPO with the total-variation trust region (2602.04879; verl `dppo_tv`, prime-rl's default loss):
    ℓ = −A·sg(min(ρ, 3))·log π, with a token dropped when its probability moved past δ = 0.2 in the
    direction its advantage pushes; group-normalised advantages, token mean, no KL.

    Departures: δ = 0.2 (prime-rl; verl's example uses 0.15); ratio cap 3 (verl's actor config).
    """
    return Recipe(
        advantage=GroupNorm(scale="std"),
        objective=DPPO(divergence="tv"),
        aggregation=Aggregation("token_mean"),
        kl=NO_KL,
    )


@recipe("dppo_kl", space={"recipe.objective.delta": {"low": 0.01, "high": 0.3, "log": True}})
def dppo_kl() -> Recipe:
    """DPPO with the binary-KL trust region (2602.04879; verl `dppo_kl`): as dppo_tv, with a token
    dropped when the binary KL between its old and new probability exceeds δ = 0.05.

    Departures: δ = 0.05 from verl's example script (the paper sweeps it); ratio cap 3.
    """
    return dppo_tv().replace(objective=DPPO(divergence="kl"))


@recipe("gpg", space={})
def gpg() -> Recipe:
    """GPG, Group Policy Gradient. Chu et al. 2025 (2504.02546; verl `gpg`): plain policy gradient
    ℓ = −A·log π (no ratio, no clip, no KL, no reference) with A = α(r − mean_G r), α = B / #{r ≠ 0}
    rescaling for the share of zero-reward completions; token mean.

    Departures: the is_pg objective (−ρA, the same gradient as −A·log π at one update per batch);
    a lone completion's advantage is 0 (verl gives α·r).
    """
    return Recipe(
        advantage=GPG(),
        objective=ISPG(),
        aggregation=Aggregation("token_mean"),
        kl=NO_KL,
    )


@recipe("clip_cov", space={**CLIP, "recipe.objective.frac": {"low": 5e-5, "high": 2e-3, "log": True}})
def clip_cov() -> Recipe:
    """Clip-Cov. Cui et al. 2025, The Entropy Mechanism of RL for Reasoning LMs (2505.22617; verl
    `clip_cov`): PPO's clip, plus the gradient of a random 2e-4 share of the tokens whose covariance
    (A − mean A)(log π − mean log π) lies in (1, 5) is stopped, to keep entropy from collapsing;
    group-normalised advantages, token mean, no KL.

    Departures: the covariance is taken over each micro-batch (verl: each of its micro-batches too).
    """
    return Recipe(
        advantage=GroupNorm(scale="std"),
        objective=ClipCov(),
        aggregation=Aggregation("token_mean"),
        kl=NO_KL,
    )


@recipe("kl_cov", space={
    "recipe.objective.frac": {"low": 5e-5, "high": 2e-3, "log": True},
    "recipe.objective.kl_coef": {"low": 0.01, "high": 1.0, "log": True},
})
def kl_cov() -> Recipe:
    """KL-Cov. Cui et al. 2025 (2505.22617; verl `kl_cov`): ℓ = −ρA plus 0.1·|log ρ| on the top 2e-4
    share of tokens by covariance; group-normalised advantages, token mean, no KL to the reference.

    Departures: coefficient 0.1 (verl's config; its docstring says 1).
    """
    return clip_cov().replace(objective=KLCov())


@recipe("kimi", space={"recipe.objective.tau": {"low": 0.01, "high": 1.0, "log": True}})
def kimi() -> Recipe:
    """Kimi k1.5's policy loss (Kimi Team 2025, 2501.12599; verl `dro`, ROLL `kimi15`): the group-mean
    baseline A = r − mean_G r and ℓ = −A·log π + (τ/2)(log π − log π_old)² with τ = 0.1: a squared
    log-ratio penalty in place of a clip; token mean, no KL to the reference.

    Departures: τ = 0.1 (ROLL's default; verl requires it); the paper's mirror-descent derivation also
    uses a length penalty we leave out (shaping is a separate part).
    """
    return Recipe(
        advantage=GroupNorm(scale="none"),
        objective=Kimi(tau=0.1),
        aggregation=Aggregation("token_mean"),
        kl=NO_KL,
    )


@recipe("opsm", space={**CLIP, **BETA})
def opsm() -> Recipe:
    """GRPO with DeepSeek-V3.2's off-policy sequence mask and unbiased KL (2512.02556; TRL
    off_policy_mask_threshold and use_bias_correction_kl): a completion with negative advantage whose
    mean log-ratio of behaviour to current policy exceeds 0.5 leaves the policy term, and the k3 KL is
    multiplied by the token ratio π_θ/π_old.

    Departures: grpo otherwise (β = 0.04 k3 in the loss); the threshold against the behaviour log-probs
    follows TRL's docs (slime uses 1e-4 against the old log-probs: OffPolicySequenceMask(against="old")).
    """
    return grpo().replace(kl=KL(coef=0.04, estimator="k3", placement="loss", importance=True),
                          corrections=(OffPolicySequenceMask(threshold=0.5, against="behaviour"),))
