"""Advantage estimators and KL against hand-computed examples."""

import math

import pytest
import torch

import algorithms
from algorithms import (GAE, KL, Aggregation, BatchMean, Critic, LengthAdaptiveGAE, PPOClip, Raw,
                        Recipe, ReinforcePPBaseline, ReMax, Rollouts, kl_estimate)

F64 = torch.float64


def rollouts(rewards, mask, **kw):
    mask = torch.tensor(mask, dtype=F64)
    B, T = mask.shape
    kw.setdefault("logp_old", torch.zeros(B, T, dtype=F64))
    kw.setdefault("group", torch.zeros(B, dtype=torch.long))
    return Rollouts(rewards=torch.tensor(rewards, dtype=F64), mask=mask, max_new_tokens=T,
                    **{k: torch.tensor(v, dtype=F64) if isinstance(v, list) else v for k, v in kw.items()})


def gae_recipe(adv, kl=KL(), critic_lam=0.95):
    return Recipe(advantage=adv, objective=PPOClip(), aggregation=Aggregation("token_mean"), kl=kl,
                  critic=Critic(lam=critic_lam))


@pytest.mark.parametrize("gamma, expected", [
    (1.0, [0.46575, 0.385, 0.3]),
    (0.9, [0.2849575, 0.2865, 0.3]),
])
def test_gae_hand_example(gamma, expected):
    # one completion of 3 tokens, reward 1 on the last, V = [0.5, 0.6, 0.7], padding value ignored
    b = rollouts([1.0], [[1, 1, 1, 0]], values=[[0.5, 0.6, 0.7, 9.9]])
    adv = gae_recipe(GAE(gamma=gamma, lam=0.95, whiten=False)).advantages(b)
    assert torch.allclose(adv, torch.tensor([expected + [0.0]], dtype=F64), atol=1e-9)
    # left padding gives the same numbers, shifted
    left = rollouts([1.0], [[0, 1, 1, 1]], values=[[9.9, 0.5, 0.6, 0.7]])
    adv_left = gae_recipe(GAE(gamma=gamma, lam=0.95, whiten=False)).advantages(left)
    assert torch.allclose(adv_left, torch.tensor([[0.0] + expected], dtype=F64), atol=1e-9)


def test_gae_returns_and_kl_in_reward_per_token():
    # k1 = logp_old − logp_ref = [0.1, 0.2, −0.1], β = 0.5 → token rewards [−0.05, −0.1, 1.05]
    b = rollouts([1.0], [[1, 1, 1]], values=[[0.5, 0.6, 0.7]], logp_old=[[0.1, 0.2, -0.1]],
                 logp_ref=[[0.0, 0.0, 0.0]])
    r = gae_recipe(GAE(gamma=1.0, lam=1.0, whiten=False), kl=KL(0.5, "k1", "reward"), critic_lam=1.0)
    assert torch.allclose(r.advantages(b), torch.tensor([[0.4, 0.35, 0.35]], dtype=F64), atol=1e-12)
    assert torch.allclose(r.returns(b), torch.tensor([[0.9, 0.95, 1.05]], dtype=F64), atol=1e-12)
    # returns = unwhitened GAE(λ_critic) + V
    r95 = gae_recipe(GAE(gamma=1.0, lam=0.95, whiten=False))
    b0 = b.replace(logp_ref=None)
    assert torch.allclose(r95.returns(b0), r95.advantages(b0) + b0.values)


def test_gae_whitening_over_the_batch_tokens():
    b = rollouts([1.0, 0.0], [[1, 1, 1], [1, 1, 0]], values=[[0.5, 0.6, 0.7], [0.2, 0.1, 3.0]],
                 group=torch.tensor([0, 1]))
    raw = gae_recipe(GAE(whiten=False)).advantages(b)
    white = gae_recipe(GAE(whiten=True)).advantages(b)
    valid = raw[b.mask.bool()]
    expected = (valid - valid.mean()) / (valid.std() + 1e-6)
    assert torch.allclose(white[b.mask.bool()], expected, atol=1e-12)
    assert white[1, 2].item() == 0.0


def test_vapo_length_adaptive_lambda():
    est = LengthAdaptiveGAE(alpha=0.05)
    lengths = [100, 10_000, 25, 40, 20, 10]
    T = max(lengths)
    mask = (torch.arange(T)[None] < torch.tensor(lengths)[:, None]).to(F64)
    b = Rollouts(rewards=torch.zeros(6, dtype=F64), group=torch.arange(6), mask=mask,
                 logp_old=torch.zeros(6, T, dtype=F64), max_new_tokens=T)
    lam = est.lam_of(b)
    assert torch.allclose(lam, torch.tensor([0.8, 0.998, 0.2, 0.5, 0.0, 0.0], dtype=F64), atol=1e-12)


def test_vapo_policy_uses_per_completion_lambda_and_critic_uses_lambda_one():
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([25, 40, 12])
    T = 40
    mask = (torch.arange(T)[None] < lengths[:, None]).to(F64)
    values = torch.randn(3, T, generator=g, dtype=F64)
    b = Rollouts(rewards=torch.tensor([1.0, 0.0, 1.0], dtype=F64), group=torch.tensor([0, 0, 1]),
                 mask=mask, logp_old=torch.zeros(3, T, dtype=F64), max_new_tokens=T, values=values)
    vapo = algorithms.get("vapo").replace(
        advantage=LengthAdaptiveGAE(alpha=0.05, whiten=False))
    adv = vapo.advantages(b)
    for row, lam in enumerate([0.2, 0.5, 0.0]):
        ref = gae_recipe(GAE(lam=lam, whiten=False)).advantages(b)[row]
        assert torch.allclose(adv[row], ref, atol=1e-12)
    # decoupled critic: λ = 1, γ = 1, no KL → Monte-Carlo returns = the outcome reward on every token
    assert torch.allclose(vapo.returns(b), b.rewards[:, None] * mask, atol=1e-12)


def test_reinforce_pp_returns_with_token_kl_then_whitening():
    # k1 = 0.5 on every token, β = 0.1: penalty 0.05 per token
    b = rollouts([1.0, 0.0], [[1, 1, 0], [1, 1, 1]], group=torch.tensor([0, 1]),
                 logp_old=torch.full((2, 3), 0.5, dtype=F64), logp_ref=torch.zeros(2, 3, dtype=F64))
    r = algorithms.get("reinforce_pp").replace(kl=KL(0.1, "k1", "reward"))
    adv = r.advantages(b)
    returns = [0.9, 0.95, -0.15, -0.1, -0.05]   # Σ_{s≥t} rewards: row 0 [−0.05, 0.95], row 1 [−0.05]×3
    mean = sum(returns) / 5
    std = math.sqrt(sum((x - mean) ** 2 for x in returns) / 4)
    expected = [(x - mean) / (std + 1e-6) for x in returns]
    assert torch.allclose(adv[b.mask.bool()], torch.tensor(expected, dtype=F64), atol=1e-9)
    assert adv[0, 2].item() == 0.0
    valid = adv[b.mask.bool()]
    assert abs(valid.mean().item()) < 1e-12 and valid.std().item() == pytest.approx(1.0, abs=1e-5)


def test_reinforce_pp_baseline_centres_by_group_first():
    b = rollouts([1.0, 0.0, 1.0, 1.0], [[1, 1]] * 4, group=torch.tensor([0, 0, 1, 1]))
    adv = ReinforcePPBaseline().compute(b)
    # centred rewards [0.5, −0.5, 0, 0] on every token, then whitened over 8 tokens
    c = torch.tensor([0.5, -0.5, 0.0, 0.0], dtype=F64).repeat_interleave(2)
    assert torch.allclose(adv.flatten(), (c - c.mean()) / (c.std() + 1e-6), atol=1e-12)


def test_remax_uses_the_greedy_baseline():
    b = rollouts([1.0, 0.0, 1.0], [[1, 1]] * 3, group=torch.tensor([0, 0, 1]),
                 baseline_rewards=[0.0, 0.0, 1.0], logp_ref=torch.zeros(3, 2, dtype=F64))
    adv = algorithms.get("remax").advantages(b)
    assert torch.allclose(adv, torch.tensor([[1.0] * 2, [0.0] * 2, [0.0] * 2], dtype=F64))
    # KL in the reward, summed over the completion: k1 = 1 per token, β = 0.5, L = 2 → −1
    with_kl = algorithms.get("remax").replace(kl=KL(0.5, "k1", "reward"))
    adv = with_kl.advantages(b.replace(logp_old=torch.ones(3, 2, dtype=F64)))
    assert torch.allclose(adv[:, 0], torch.tensor([0.0, -1.0, -1.0], dtype=F64))
    with pytest.raises(ValueError, match="baseline_rewards"):
        ReMax().compute(b.replace(baseline_rewards=None))


def test_rloo_kl_in_reward_is_summed_over_the_completion():
    b = rollouts([1.0, 1.0], [[1, 1, 0], [1, 1, 1]], logp_old=torch.full((2, 3), 0.2, dtype=F64),
                 logp_ref=torch.zeros(2, 3, dtype=F64))
    adv = algorithms.get("rloo").replace(kl=KL(1.0, "k1", "reward")).advantages(b)
    # r' = [1 − 0.4, 1 − 0.6] → leave-one-out: ±0.2
    assert torch.allclose(adv, torch.tensor([[0.2, 0.2, 0.0], [-0.2, -0.2, -0.2]], dtype=F64))


def test_batch_mean_and_raw():
    b = rollouts([1.0, 0.0, 0.0, 0.0], [[1]] * 4, group=torch.tensor([0, 0, 1, 1]))
    assert torch.allclose(BatchMean().compute(b)[:, 0], torch.tensor([0.75, -0.25, -0.25, -0.25], dtype=F64))
    assert torch.allclose(Raw(baseline=0.5).compute(b)[:, 0], torch.tensor([0.5, -0.5, -0.5, -0.5], dtype=F64))


def test_kl_estimators():
    logp, ref = torch.tensor([-1.0], dtype=F64), torch.tensor([-1.5], dtype=F64)   # u = −0.5
    assert kl_estimate(logp, ref, "k1").item() == pytest.approx(0.5)
    assert kl_estimate(logp, ref, "k2").item() == pytest.approx(0.125)
    assert kl_estimate(logp, ref, "k3").item() == pytest.approx(math.exp(-0.5) - 1 + 0.5)


def test_kl_in_loss_value_gradient_and_stats():
    b = rollouts([1.0, 0.0], [[1, 1, 0], [1, 1, 1]], logp_old=torch.full((2, 3), -1.0, dtype=F64),
                 logp_ref=torch.full((2, 3), -1.5, dtype=F64))
    grpo = algorithms.get("grpo")   # β = 0.04, k3, seq_mean_token_mean
    logp = b.logp_old.clone().requires_grad_(True)
    loss, stats = grpo.loss(logp, b, torch.zeros(2, 3, dtype=F64))
    k3 = math.exp(-0.5) - 0.5
    assert stats["loss/kl"].item() == pytest.approx(0.04 * k3)
    assert stats["kl/k1"].item() == pytest.approx(0.5) and stats["kl/k3"].item() == pytest.approx(k3)
    loss.backward()
    per_tok = 0.04 * (1 - math.exp(-0.5))   # d k3 / d log π = 1 − e^u
    assert torch.allclose(logp.grad, torch.tensor([[per_tok / 4] * 2 + [0], [per_tok / 6] * 3], dtype=F64))


@pytest.mark.parametrize("name", ["dr_grpo", "dapo", "ppo", "rloo"])
def test_kl_is_logged_whenever_the_reference_is_given(name):
    from alg_helpers import random_batch
    b = random_batch(seed=3)
    r = algorithms.get(name)
    _, stats = r.loss(b.logp_old.clone().requires_grad_(True), b, r.advantages(b))
    m = b.mask.bool()
    assert stats["kl/k1"].item() == pytest.approx((b.logp_old - b.logp_ref)[m].mean().item())
    assert stats["kl/k3"].item() > 0
    assert stats["loss/kl"].item() == 0.0   # KL not in the loss for these recipes
