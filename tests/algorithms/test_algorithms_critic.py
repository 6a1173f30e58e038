"""The clipped value loss, its weights, explained variance, VAPO's positive-example NLL."""

import pytest
import torch

import algorithms
from algorithms import Critic, Rollouts, explained_variance
from alg_helpers import random_batch

F64 = torch.float64


def test_clipped_value_loss_hand_numbers():
    critic = Critic(value_coef=0.1, value_clip=0.2)
    old = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=F64)
    new = torch.tensor([0.5, 0.1, -0.5, 1.0], dtype=F64, requires_grad=True)
    R = torch.tensor([1.0, 1.0, 0.0, 2.0], dtype=F64)
    per = critic.per_token(new, old, R)
    # token 0: unclipped (0.5)², clipped (0.2−1)² = 0.64 → max 0.64, no gradient
    # token 1: (0.9)² = 0.81 vs clip (0.1) same → 0.81; token 2: 0.25 vs (−0.2)² = 0.04 → 0.25
    # token 3: 1 vs 1 → 1
    assert torch.allclose(per, 0.05 * torch.tensor([0.64, 0.81, 0.25, 1.0], dtype=F64))
    per.sum().backward()
    assert torch.allclose(new.grad, 0.1 * torch.tensor([0.0, -0.9, -0.5, -1.0], dtype=F64))
    unclipped = Critic(value_coef=0.1, value_clip=None).per_token(new, old, R)
    assert unclipped[0].item() == pytest.approx(0.05 * 0.25)


def test_value_loss_uses_the_recipe_aggregation_and_weights():
    b = random_batch(seed=6)
    ppo = algorithms.get("ppo")
    returns = ppo.returns(b)
    values = (b.values + 0.05).requires_grad_(True)
    loss, stats = ppo.value_loss(values, b, returns)
    m = b.mask.bool()
    per = ppo.critic.per_token(values, b.values, returns)
    assert loss.item() == pytest.approx(per[m].mean().item())   # token_mean
    assert stats["loss/value"].item() == pytest.approx(loss.item())
    w = ppo.loss_weights(b)
    parts = [ppo.value_loss(values[i], b.select(i), returns[i], weights=w[i])[0]
             for i in torch.split(torch.arange(b.size), [7, 5])]
    assert sum(parts).item() == pytest.approx(loss.item(), rel=1e-12)
    with pytest.raises(ValueError, match="no critic"):
        algorithms.get("grpo").value_loss(values, b, returns)
    with pytest.raises(ValueError, match="no critic"):
        algorithms.get("grpo").returns(b)


def test_loss_with_values_and_returns_adds_the_value_loss():
    b = random_batch(seed=6)
    vapo = algorithms.get("vapo")
    adv, ret = vapo.advantages(b), vapo.returns(b)
    logp = b.logp_old.clone().requires_grad_(True)
    values = b.values.clone().requires_grad_(True)
    total, stats = vapo.loss(logp, b, adv, values=values, returns=ret)
    alone, _ = vapo.loss(logp, b, adv)
    v, _ = vapo.value_loss(values, b, ret)
    assert total.item() == pytest.approx(alone.item() + v.item(), rel=1e-12)
    assert "loss/value" in stats
    with pytest.raises(ValueError, match="both"):
        vapo.loss(logp, b, adv, values=values)


def test_positive_example_nll():
    # two completions, only the first correct; token_mean weights 1/N over all 5 tokens
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=F64)
    logp_old = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5]], dtype=F64)
    b = Rollouts(rewards=torch.tensor([1.0, 0.0], dtype=F64), group=torch.tensor([0, 0]), mask=mask,
                 logp_old=logp_old, max_new_tokens=3, values=torch.zeros(2, 3, dtype=F64),
                 correct=torch.tensor([True, False]))
    vapo = algorithms.get("vapo")
    logp = logp_old.clone().requires_grad_(True)
    zero_adv = torch.zeros(2, 3, dtype=F64)
    loss, stats = vapo.loss(logp, b, zero_adv)
    assert stats["loss/nll"].item() == pytest.approx(0.1 * 3.0 / 5)
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[-0.02, -0.02, 0], [0, 0, 0]], dtype=F64))
    # without `correct`, rewards > 0 decide
    _, stats2 = vapo.loss(logp_old.clone().requires_grad_(True), b.replace(correct=None), zero_adv)
    assert stats2["loss/nll"].item() == pytest.approx(stats["loss/nll"].item())
    assert "loss/nll" not in algorithms.get("ppo").loss(logp, b.replace(logp_ref=logp_old), zero_adv)[1]


def test_explained_variance():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=F64)
    R = torch.tensor([[1.0, 2.0, 99.0], [3.0, 4.0, 5.0]], dtype=F64)
    assert explained_variance(R, R, mask).item() == pytest.approx(1.0)
    V = torch.full_like(R, 3.0)
    assert explained_variance(V, R, mask).item() == pytest.approx(0.0)
    V2 = R + torch.tensor([[1.0, -1.0, 0.0], [1.0, -1.0, 0.0]], dtype=F64)
    # Var(R) over [1,2,3,4,5] = 2; residuals [−1, 1, −1, 1, 0] → Var 0.8
    assert explained_variance(V2, R, mask).item() == pytest.approx(1 - 0.8 / 2)
