"""The twelve named recipes, with the defaults of ALGORITHMS.md.

Each builder's docstring becomes the recipe's `description`: the paper, then where this recipe
departs from it. Shared departure, stated once: the critic-free recipes take one optimizer update
per rollout batch (Updates(1, 1)), so ρ ≡ 1 and clip fractions are exactly 0 (convention 8);
papers that used several updates say so below, and `replace(updates=Updates(...))` restores them.
"""

from __future__ import annotations

from .advantages import GAE, GPG, RLOO, BatchMean, GroupNorm, LengthAdaptiveGAE, Raw, ReinforcePP, ReMax
from .aggregation import Aggregation
from .corrections import OffPolicySequenceMask, RolloutCorrection
from .critic import Critic
from .filters import AffineReward, DynamicSampling, OverlongPenalty
from .kl import KL
from .objectives import CISPO, DPPO, GMPO, GSPO, ISPG, SAPO, TOPR, VESPO, ClipCov, Kimi, KLCov, PPOClip
from .recipe import Recipe, Updates
from .registry import recipe

NO_KL = KL()


@recipe("ppo")
def ppo() -> Recipe:
    """PPO with a critic, RLHF form. Schulman et al. 2017 (1707.06347); GAE, Schulman et al. 2015
    (1506.02438); KL-in-reward per token as in Ouyang et al. 2022 (2203.02155). Defaults are TRL's
    PPOConfig: γ = 1, λ = 0.95, ε = 0.2, k1 in the reward with β = 0.05, value coef 0.1 and value
    clip 0.2; advantages whitened over the batch's tokens.

    Departures: 4 updates per batch as 1 epoch × 4 mini-batches (TRL: 4 epochs over the whole
    batch; same number of updates, each sample used once); token_mean over the optimizer-step
    batch; the critic's targets use the policy's λ = 0.95 (coupled, as TRL; VAPO decouples);
    no dual clip (verl applies c = 3 by default).
    """
    return Recipe(
        advantage=GAE(gamma=1.0, lam=0.95),
        objective=PPOClip(eps_low=0.2, eps_high=0.2),
        aggregation=Aggregation("token_mean"),
        kl=KL(coef=0.05, estimator="k1", placement="reward"),
        critic=Critic(value_coef=0.1, value_clip=0.2, lam=0.95, pretrain_steps=0),
        updates=Updates(epochs=1, minibatches=4),
    )


@recipe("grpo")
def grpo() -> Recipe:
    """GRPO, outcome supervision. Shao et al. 2024, DeepSeekMath (2402.03300) §4.1-4.2:
    A = (r − mean_G)/std_G, token-ratio clip, per-sequence length mean then mean over the group
    (seq_mean_token_mean), k3 KL in the loss with β = 0.04, a single update per rollout batch.

    Departures: ε = 0.2 (the paper gives no value; TRL's and Dr. GRPO's convention); the group std
    is Bessel-corrected with eps = 1e-6 (verl; the paper does not say).
    """
    return Recipe(
        advantage=GroupNorm(scale="std"),
        objective=PPOClip(eps_low=0.2, eps_high=0.2),
        aggregation=Aggregation("seq_mean_token_mean"),
        kl=KL(coef=0.04, estimator="k3", placement="loss"),
    )


@recipe("dr_grpo")
def dr_grpo() -> Recipe:
    """Dr. GRPO. Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective"
    (2503.20783): no std in the advantage (A = r − mean_G), no 1/L_i in the loss (token sum divided
    by the generation cap L_max, then the batch mean), β = 0, ε = 0.2, one inner epoch.

    Departures: none in the math. The normaliser is B · L_max as in TRL's dr_grpo (verl's older
    seq-mean-token-sum-norm omitted the 1/B).
    """
    return Recipe(
        advantage=GroupNorm(scale="none"),
        objective=PPOClip(eps_low=0.2, eps_high=0.2),
        aggregation=Aggregation("seq_mean_token_sum_norm"),
        kl=NO_KL,
    )


@recipe("dapo")
def dapo() -> Recipe:
    """DAPO. Yu et al. 2025 (2503.14476): clip-higher (ε_low 0.2, ε_high 0.28), token-level loss,
    dynamic sampling (drop groups with accuracy 0 or 1 and refill), soft overlong punishment
    (buffer 4096 of L_max = 20480, i.e. 20%), no KL.

    Departures: token_mean over the whole optimizer-step batch (verl / TRL) rather than the
    paper's per-prompt token mean (that is Aggregation("prompt_mean")); one update per rollout batch
    (the paper takes 16 mini-batch updates); dynamic sampling gives up after 10 generation rounds
    (verl's max_num_gen_batches); no overlong filtering (verl: the best runs use the soft penalty
    alone). The paper's reward is ±1: with 0/1 rewards the penalty (down to −1) weighs twice as
    much relative to correctness.
    """
    return Recipe(
        advantage=GroupNorm(scale="std"),
        objective=PPOClip(eps_low=0.2, eps_high=0.28),
        aggregation=Aggregation("token_mean"),
        kl=NO_KL,
        filter=DynamicSampling(metric="correct", max_generation_rounds=10),
        shaping=(OverlongPenalty(buffer_frac=0.2),),
    )


@recipe("gspo")
def gspo() -> Recipe:
    """GSPO. Zheng et al. 2025, Group Sequence Policy Optimization (2507.18071): PPO's clip on the
    length-normalised sequence ratio s_i, ranges 3e-4 / 4e-4, sequence mean, no KL.

    Departures: implemented in the GSPO-token form (identical with one advantage per completion);
    one update per rollout batch (the paper splits each batch into 4 mini-batches), so by default
    s_i ≡ 1 and GSPO reduces to GRPO without KL. ScaleRL found 3e-4 / 4e-4 too tight at 8B and used
    4e-3 / 5e-3.
    """
    return Recipe(
        advantage=GroupNorm(scale="std"),
        objective=GSPO(eps_low=3e-4, eps_high=4e-4),
        aggregation=Aggregation("seq_mean_token_mean"),
        kl=NO_KL,
    )


@recipe("cispo")
def cispo() -> Recipe:
    """CISPO. MiniMax 2025, MiniMax-M1 (2506.13585) §3.1, in ScaleRL's form (Khatri et al. 2025,
    2510.13786): −sg(min(ρ, ε_max))·A·log π with an absolute cap ε_max = 5, no lower bound,
    token-level loss, group-normalised advantages, no KL.

    Departures: MiniMax caps at 1 + ε_high with an undisclosed ε_high (ScaleRL / TRL use the
    absolute cap); MiniMax also used DAPO's dynamic sampling and length penalty, not included
    here; one update per rollout batch (MiniMax: 16 off-policy rounds), so the cap never binds by
    default.
    """
    return Recipe(
        advantage=GroupNorm(scale="std"),
        objective=CISPO(ratio_max=5.0),
        aggregation=Aggregation("token_mean"),
        kl=NO_KL,
    )


@recipe("rloo")
def rloo() -> Recipe:
    """RLOO. Ahmadian et al. 2024, Back to Basics (2402.14740), after Kool et al. 2019: leave-one-out
    baseline, the whole completion as one action (token sum, mean over completions), no clipping,
    sequence-level k1 KL in the reward; β = 0.05 (TRL's RLOOTrainer; the paper used 0.03-0.1).

    Departures: the importance weight is per token (ρA, is_pg) rather than TRL's clipped full
    sequence ratio; the two are identical on-policy, the default here.
    """
    return Recipe(
        advantage=RLOO(),
        objective=ISPG(),
        aggregation=Aggregation("seq_mean_token_sum"),
        kl=KL(coef=0.05, estimator="k1", placement="reward"),
    )


@recipe("remax")
def remax() -> Recipe:
    """ReMax. Li et al. 2023 (2310.10505): REINFORCE with the reward of the greedy completion of the
    same prompt as baseline (one extra greedy rollout per prompt, counted as compute), the
    completion as one action, no critic, no clipping; k1 KL in the reward with β = 0.001 (verl's
    example).

    Departures: the greedy baseline's reward is used as given, without its own KL penalty (as verl).
    """
    return Recipe(
        advantage=ReMax(),
        objective=ISPG(),
        aggregation=Aggregation("seq_mean_token_sum"),
        kl=KL(coef=0.001, estimator="k1", placement="reward"),
    )


@recipe("reinforce")
def reinforce() -> Recipe:
    """REINFORCE with a batch-mean baseline. Williams 1992: A = r − mean over the batch, on-policy
    policy gradient, per-sequence length mean, no KL. The plain baseline the family improves on.

    Departures: the rlhf-book's reference code uses no baseline (advantage Raw()).
    """
    return Recipe(
        advantage=BatchMean(),
        objective=ISPG(),
        aggregation=Aggregation("seq_mean_token_mean"),
        kl=NO_KL,
    )


@recipe("reinforce_pp")
def reinforce_pp() -> Recipe:
    """REINFORCE++. Hu et al. 2025 (2501.03262): token returns r − β·Σ_{s≥t} k1_s with k1 per token in
    the reward (β = 0.001, γ = 1), whitened over all tokens of the batch, PPO clip ε = 0.2,
    token-level loss.

    Departures: whitening divides by the Bessel std + 1e-6 (OpenRLHF / verl use rsqrt(var + 1e-8)).
    The paper's "w/ baseline" variant for reasoning is advantage=ReinforcePPBaseline().
    """
    return Recipe(
        advantage=ReinforcePP(gamma=1.0),
        objective=PPOClip(eps_low=0.2, eps_high=0.2),
        aggregation=Aggregation("token_mean"),
        kl=KL(coef=0.001, estimator="k1", placement="reward"),
    )


@recipe("topr")
def topr() -> Recipe:
    """TOPR. Le Roux et al. 2025, Tapered Off-Policy REINFORCE (2503.14286): positives get
    −R·log π (no IS weight), negatives −sg(clip(π(τ)/μ(τ), 0, 1))·R·log π with the full
    trajectory ratio; raw ±1 reward, no baseline; loss divided by sequence length; no KL.

    Departures: one update per rollout batch (the paper trains off-policy, one epoch per
    generated dataset), where TOPR equals REINFORCE. Our verifiers return 0/1, so an
    AffineReward shaping maps them to the paper's ±1 (without it, negatives would get A = 0 and
    TOPR would train on positives only).
    """
    return Recipe(
        advantage=Raw(),
        objective=TOPR(ratio="full"),
        aggregation=Aggregation("seq_mean_token_mean"),
        kl=NO_KL,
        shaping=(AffineReward(scale=2.0, shift=-1.0),),
    )


@recipe("vapo")
def vapo() -> Recipe:
    """VAPO. Yue et al. 2025 (2504.05118): PPO with value pre-training (50 steps), decoupled GAE
    (critic λ = 1), length-adaptive policy λ = 1 − 1/(α·L) with α = 0.05, clip-higher 0.2 / 0.28,
    token-level loss, positive-example NLL with μ = 0.1, γ = 1, no KL.

    Departures: 1 epoch × 4 mini-batches (the paper: 512 prompts × 16 samples with mini-batch 512,
    i.e. 16 updates); λ clamped at 0 for completions shorter than 1/α = 20 tokens; the NLL is
    aggregated with the policy's token_mean weights, i.e. divided by all N tokens of the batch, not
    by the correct completions' tokens (so μ is effectively scaled by their share); value coef
    0.1 and value clip 0.2 (TRL's; the paper gives none); advantages whitened over the batch.
    """
    return Recipe(
        advantage=LengthAdaptiveGAE(alpha=0.05, gamma=1.0),
        objective=PPOClip(eps_low=0.2, eps_high=0.28),
        aggregation=Aggregation("token_mean"),
        kl=NO_KL,
        critic=Critic(value_coef=0.1, value_clip=0.2, lam=1.0, pretrain_steps=50),
        updates=Updates(epochs=1, minibatches=4),
        nll_coef=0.1,
    )


# ------------------------------------------------------------------ the 2026 family (issue 25)
# Corrections and controllers are parts of their own (corrections.py, entropy.py); each recipe below is
# one of the twelve plus the part its paper adds, so a contrast with its base changes one thing.

@recipe("grpo_tis")
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


@recipe("decoupled_ppo")
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


@recipe("sapo")
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


@recipe("gmpo")
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


@recipe("luspo")
def luspo() -> Recipe:
    """LUSPO, length-unbiased sequence policy optimization (2602.05261; TRL `luspo`): GSPO's clipped
    sequence ratio with the loss summed over each completion's tokens (length-weighted) and averaged
    over completions, undoing GSPO's per-token length normalisation.

    Departures: none in the math: it is gspo's objective with the seq_mean_token_sum aggregation
    (tests/algorithms/test_algorithms_2026_objectives.py proves the equality with TRL's formula), so
    luspo vs gspo is a one-part contrast.
    """
    return gspo().replace(aggregation=Aggregation("seq_mean_token_sum"))


@recipe("vespo")
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


@recipe("dppo_tv")
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


@recipe("dppo_kl")
def dppo_kl() -> Recipe:
    """DPPO with the binary-KL trust region (2602.04879; verl `dppo_kl`): as dppo_tv, with a token
    dropped when the binary KL between its old and new probability exceeds δ = 0.05.

    Departures: δ = 0.05 from verl's example script (the paper sweeps it); ratio cap 3.
    """
    return dppo_tv().replace(objective=DPPO(divergence="kl"))


@recipe("gpg")
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


@recipe("clip_cov")
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


@recipe("kl_cov")
def kl_cov() -> Recipe:
    """KL-Cov. Cui et al. 2025 (2505.22617; verl `kl_cov`): ℓ = −ρA plus 0.1·|log ρ| on the top 2e-4
    share of tokens by covariance; group-normalised advantages, token mean, no KL to the reference.

    Departures: coefficient 0.1 (verl's config; its docstring says 1).
    """
    return clip_cov().replace(objective=KLCov())


@recipe("kimi")
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


@recipe("opsm")
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
