"""The twelve named recipes of early 2025, with the defaults of ALGORITHMS.md.

Each builder's docstring becomes the recipe's `description`: the paper, then where this recipe
departs from it. Shared departure, stated once: the critic-free recipes take one optimizer update
per rollout batch (Updates(1, 1)), so ρ ≡ 1 and clip fractions are exactly 0 (convention 8);
papers that used several updates say so below, and `replace(updates=Updates(...))` restores them.
"""

from __future__ import annotations

from ..advantages import GAE, RLOO, BatchMean, GroupNorm, LengthAdaptiveGAE, Raw, ReinforcePP, ReMax
from ..aggregation import Aggregation
from ..critic import Critic
from ..filters import AffineReward, DynamicSampling, OverlongPenalty
from ..kl import KL
from ..objectives import CISPO, GSPO, ISPG, TOPR, PPOClip
from ..recipe import Recipe, Updates
from ..registry import recipe
from ..search_spaces import BETA, CLIP

NO_KL = KL()


@recipe("ppo", space={
    **CLIP,
    **BETA,
    "recipe.advantage.lam": {"low": 0.9, "high": 1.0},
    "train.critic_lr": {"low": 1e-4, "high": 2e-3, "log": True},
})
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


@recipe("grpo", space={**CLIP, **BETA})
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


@recipe("dr_grpo", space={**CLIP})
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


@recipe("dapo", space={
    "recipe.objective.eps_low": {"low": 0.1, "high": 0.3},
    "recipe.objective.eps_high": {"low": 0.2, "high": 0.4},
})
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


@recipe("gspo", space={
    "recipe.objective.eps_low": {"low": 1e-4, "high": 1e-2, "log": True},
    "recipe.objective.eps_high": {"low": 1e-4, "high": 1e-2, "log": True},
})
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


@recipe("cispo", space={"recipe.objective.ratio_max": {"low": 1.5, "high": 10.0, "log": True}})
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


@recipe("rloo", space={**BETA})
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


@recipe("remax", space={**BETA})
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


@recipe("reinforce", space={})
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


@recipe("reinforce_pp", space={**CLIP, **BETA})
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


@recipe("topr", space={})
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


# vapo's λ = 1 − 1/(α·L): the paper's α = 0.05 suits L ~ 1000; short answers need α up to ~1
@recipe("vapo", space={
    **CLIP,
    "recipe.advantage.alpha": {"low": 0.01, "high": 2.0, "log": True},
    "recipe.nll_coef": {"low": 0.0, "high": 0.3},
    "train.critic_lr": {"low": 1e-4, "high": 2e-3, "log": True},
})
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
