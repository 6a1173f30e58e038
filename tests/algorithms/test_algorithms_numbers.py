"""Every number under "Numbers tests must reproduce" in ALGORITHMS.md, through the public API."""

import pytest
import torch

import algorithms
from algorithms import Aggregation, GroupNorm, RLOO, Rollouts, aggregate

F64 = torch.float64


def one_group(rewards, T=3):
    r = torch.tensor(rewards, dtype=F64)
    B = r.numel()
    return Rollouts(rewards=r, group=torch.zeros(B, dtype=torch.long), mask=torch.ones(B, T, dtype=F64),
                    logp_old=torch.zeros(B, T, dtype=F64), max_new_tokens=T,
                    logp_ref=torch.zeros(B, T, dtype=F64))


def per_completion(adv):
    """(B, T) advantages -> (B,), checking they are constant over each completion."""
    assert torch.equal(adv, adv[:, :1].expand_as(adv))
    return adv[:, 0]


@pytest.mark.parametrize("rewards, expected", [
    ([1, 0, 1, 0], [0.866025, -0.866025, 0.866025, -0.866025]),
    ([1, 1, 1, 0], [0.5, 0.5, 0.5, -1.5]),
    ([0, 1], [-0.707107, 0.707107]),
    ([1, 0, 0, 0], [1.5, -0.5, -0.5, -0.5]),
])
def test_group_norm_std(rewards, expected):
    adv = per_completion(algorithms.get("grpo").advantages(one_group(rewards)))
    assert torch.allclose(adv, torch.tensor(expected, dtype=F64), atol=1e-5, rtol=0)


def test_group_std_is_bessel_corrected():
    # std of [1, 0, 1, 0] with G − 1 in the denominator is 0.577, not 0.5
    adv = per_completion(GroupNorm(scale="std").compute(one_group([1, 0, 1, 0])))
    assert adv[0].item() == pytest.approx(0.5 / (0.5773503 + 1e-6), abs=1e-6)


@pytest.mark.parametrize("rewards, rloo, none", [
    ([0, 1], [-1, 1], [-0.5, 0.5]),
    ([1, 0, 0, 0], [1, -1 / 3, -1 / 3, -1 / 3], [0.75, -0.25, -0.25, -0.25]),
])
def test_rloo_and_group_mean(rewards, rloo, none):
    batch = one_group(rewards)
    a_rloo = per_completion(algorithms.get("rloo").advantages(batch))  # logp_ref = logp_old: no KL
    a_none = per_completion(algorithms.get("dr_grpo").advantages(batch))
    assert torch.allclose(a_rloo, torch.tensor(rloo, dtype=F64), atol=1e-5, rtol=0)
    assert torch.allclose(a_none, torch.tensor(none, dtype=F64), atol=1e-5, rtol=0)
    G = len(rewards)
    assert torch.allclose(a_none, a_rloo * (G - 1) / G, atol=1e-12)


def test_all_equal_group_and_singleton_get_zero():
    r = torch.tensor([1.0, 1.0, 1.0, 0.3, 0.7], dtype=F64)
    batch = Rollouts(rewards=r, group=torch.tensor([0, 0, 0, 1, 2]), mask=torch.ones(5, 2, dtype=F64),
                     logp_old=torch.zeros(5, 2, dtype=F64), max_new_tokens=2)
    for est in (GroupNorm(scale="std"), GroupNorm(scale="none"), GroupNorm(scale="batch"), RLOO()):
        assert torch.equal(est.compute(batch), torch.zeros(5, 2, dtype=F64)), est


# ---------------------------------------------------------------- aggregation gradients

MASK_4_7 = torch.tensor([[1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1]], dtype=F64)


@pytest.mark.parametrize("mode, short, long", [
    ("seq_mean_token_mean", 0.25, 0.142857),
    ("token_mean", 0.181818, 0.181818),
    ("seq_mean_token_sum_norm", 0.142857, 0.142857),
])
def test_aggregation_gradients(mode, short, long):
    ratio = torch.ones(2, 7, dtype=F64, requires_grad=True)
    adv = torch.full((2, 7), 2.0, dtype=F64)
    w = Aggregation(mode).weights(MASK_4_7, torch.tensor([0, 0]), max_new_tokens=7)
    aggregate(ratio * adv, MASK_4_7, w).backward()  # J; the loss is −J
    expected = torch.tensor([[short] * 4 + [0] * 3, [long] * 7], dtype=F64)
    assert torch.allclose(ratio.grad, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("mode, short, long", [
    ("seq_mean_token_mean", 0.25, 0.142857),
    ("token_mean", 0.181818, 0.181818),
    ("seq_mean_token_sum_norm", 0.142857, 0.142857),
])
def test_aggregation_gradients_through_recipe_loss(mode, short, long):
    # is_pg: ℓ = −ρA, and dρ/dlog π = ρ = 1, so −dloss/dlog π = dJ/dρ
    recipe = algorithms.get("reinforce").replace(aggregation=Aggregation(mode))
    batch = Rollouts(rewards=torch.zeros(2, dtype=F64), group=torch.tensor([0, 0]), mask=MASK_4_7,
                     logp_old=torch.zeros(2, 7, dtype=F64), max_new_tokens=7)
    logp = torch.zeros(2, 7, dtype=F64, requires_grad=True)
    loss, _ = recipe.loss(logp, batch, torch.full((2, 7), 2.0, dtype=F64))
    loss.backward()
    expected = torch.tensor([[short] * 4 + [0] * 3, [long] * 7], dtype=F64)
    assert torch.allclose(-logp.grad, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("mode, value", [
    ("seq_mean_token_mean", 2.35),
    ("token_mean", 2.2),
    ("seq_mean_token_sum_norm", 1.65),
])
def test_aggregation_of_book_token_losses(mode, value):
    losses = torch.tensor([[1, 1, 1, 1, 10, 0, 0, 0, 0, 0], [1] * 9 + [10]], dtype=F64)
    mask = torch.tensor([[1] * 5 + [0] * 5, [1] * 10], dtype=F64)
    losses[0, 5:] = float("nan")  # padding never leaks in
    w = Aggregation(mode).weights(mask, torch.tensor([0, 0]), max_new_tokens=10)
    assert aggregate(losses, mask, w).item() == pytest.approx(value, abs=1e-5)


def test_other_aggregation_modes():
    w_sum = Aggregation("seq_mean_token_sum").weights(MASK_4_7, torch.tensor([0, 0]), 7)
    assert torch.allclose(w_sum, torch.tensor([0.5, 0.5], dtype=F64))
    # prompt_mean: mean over groups of the token mean within the group
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]], dtype=F64)
    w = Aggregation("prompt_mean").weights(mask, torch.tensor([5, 5, 9]), 3)
    assert torch.allclose(w, torch.tensor([1 / 10, 1 / 10, 1 / 2], dtype=F64))
    losses = torch.tensor([[1, 2, 0], [3, 4, 5], [6, 0, 0]], dtype=F64)
    assert aggregate(losses, mask, w).item() == pytest.approx((15 / 5 + 6 / 1) / 2)


def test_fully_masked_row_gets_zero_weight_not_nan():
    mask = torch.tensor([[0, 0, 0], [1, 1, 0]], dtype=F64)
    for mode in ("seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm",
                 "seq_mean_token_sum", "prompt_mean"):
        for group in (torch.tensor([0, 1]), torch.tensor([0, 0])):
            w = Aggregation(mode).weights(mask, group, 3)
            assert torch.isfinite(w).all(), mode
    empty = torch.zeros(2, 3, dtype=F64)
    assert torch.equal(Aggregation("token_mean").weights(empty, torch.tensor([0, 1]), 3), torch.zeros(2, dtype=F64))
