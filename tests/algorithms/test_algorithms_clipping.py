"""Clip fractions (convention 7): exactly 0 on-policy, and hand counts off-policy."""

import math

import pytest
import torch

import algorithms
from algorithms import CISPO, GSPO, ISPG, PPOClip, TOPR, Aggregation, GroupNorm, Recipe, Rollouts
from alg_helpers import random_batch

F64 = torch.float64
CLIP_KEYS = ("policy/clip_frac_low", "policy/clip_frac_high", "policy/clip_frac_seq",
             "policy/weight_capped_frac")


@pytest.mark.parametrize("name", algorithms.names())
def test_clip_fractions_are_exactly_zero_on_policy(name):
    recipe = algorithms.get(name)
    batch = random_batch(seed=21)
    logp = batch.logp_old.clone().requires_grad_(True)
    _, stats = recipe.loss(logp, batch, recipe.advantages(batch))
    present = [k for k in CLIP_KEYS if k in stats]
    assert "policy/clip_frac_low" in present and "policy/clip_frac_high" in present
    for k in present:
        assert stats[k].item() == 0.0, k
    assert stats["policy/ratio_min"].item() == stats["policy/ratio_max"].item() == 1.0


def recipe_with(objective, mode="token_mean"):
    return Recipe(advantage=GroupNorm(), objective=objective, aggregation=Aggregation(mode))


def batch_from(logp_old, mask):
    B = mask.shape[0]
    return Rollouts(rewards=torch.zeros(B, dtype=F64), group=torch.arange(B), mask=mask,
                    logp_old=logp_old, max_new_tokens=mask.shape[1])


def test_ppo_clip_hand_counts():
    ratio = torch.tensor([[0.5, 0.9, 1.0, 1.25, 1.3, 2.0],     # A = +1: high binds at 1.3, 2.0
                          [0.5, 0.79, 0.81, 1.0, 1.5, 0.1]],   # A = −1: low binds at 0.5, 0.79
                         dtype=F64)
    mask = torch.tensor([[1] * 6, [1] * 5 + [0]], dtype=F64)   # the 0.1 is padding
    adv = torch.tensor([[1.0] * 6, [-1.0] * 6], dtype=F64)
    batch = batch_from(torch.zeros(2, 6, dtype=F64), mask)
    logp = ratio.log().requires_grad_(True)
    loss, stats = recipe_with(PPOClip(eps_low=0.2, eps_high=0.28)).loss(logp, batch, adv)
    assert stats["policy/clip_frac_high"].item() == pytest.approx(2 / 11, abs=1e-12)
    assert stats["policy/clip_frac_low"].item() == pytest.approx(2 / 11, abs=1e-12)
    assert stats["policy/ratio_max"].item() == pytest.approx(2.0)
    assert stats["policy/ratio_min"].item() == pytest.approx(0.5)
    assert stats["policy/ratio_mean"].item() == pytest.approx((ratio * mask).sum().item() / 11)
    assert stats["tokens"].item() == 11
    loss.backward()
    clipped = torch.tensor([[0, 0, 0, 0, 1, 1], [1, 1, 0, 0, 0, 1]], dtype=torch.bool)
    assert torch.all(logp.grad[clipped] == 0)
    # unclipped: d(−ρA/N)/dlog ρ = −ρA/11
    expected = -(ratio * adv) / 11
    assert torch.allclose(logp.grad[~clipped], expected[~clipped])
    # loss value: −Σ min(ρA, clip(ρ)A) / N
    clip = ratio.clamp(0.8, 1.28)
    ref = -(torch.min(ratio * adv, clip * adv) * mask).sum() / 11
    assert loss.item() == pytest.approx(ref.item())


def test_dual_clip_caps_the_loss_for_negative_advantages():
    ratio = torch.tensor([[2.0, 5.0], [2.0, 5.0]], dtype=F64)
    adv = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=F64)
    batch = batch_from(torch.zeros(2, 2, dtype=F64), torch.ones(2, 2, dtype=F64))
    obj = PPOClip(eps_low=0.2, eps_high=0.28, dual_clip=3.0)
    logp = ratio.log().requires_grad_(True)
    per_tok, _ = obj.per_token(logp, batch.logp_old, adv, batch.mask)
    # A<0: ρ=2 → loss 2 (< c·|A| = 3), ρ=5 → capped at 3; A>0: −min(ρ, 1.28) = −1.28
    assert torch.allclose(per_tok, torch.tensor([[2.0, 3.0], [-1.28, -1.28]], dtype=F64))
    per_tok.sum().backward()
    assert torch.allclose(logp.grad, torch.tensor([[2.0, 0.0], [0.0, 0.0]], dtype=F64))
    plain, _ = PPOClip(0.2, 0.28).per_token(ratio.log(), batch.logp_old, adv, batch.mask)
    assert plain[0, 1].item() == pytest.approx(5.0)


def test_gspo_sequence_clip_counts():
    s = torch.tensor([1.2, 0.95, 0.8, 0.8], dtype=F64)   # geometric-mean ratio per completion
    adv_seq = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=F64)
    lengths = torch.tensor([2, 3, 4, 1])
    mask = (torch.arange(4)[None] < lengths[:, None]).to(F64)
    # vary token ratios within a completion while keeping their geometric mean s_i
    wiggle = torch.tensor([0.1, -0.1, 0.05, -0.05], dtype=F64) * mask
    wiggle = wiggle - (wiggle.sum(-1, keepdim=True) / lengths[:, None]) * mask
    logp = (s.log()[:, None] + wiggle).requires_grad_(True)
    batch = batch_from(torch.zeros(4, 4, dtype=F64), mask)
    adv = adv_seq[:, None] * mask
    _, stats = recipe_with(GSPO(eps_low=0.1, eps_high=0.1), "seq_mean_token_mean").loss(logp, batch, adv)
    assert stats["policy/clip_frac_seq"].item() == pytest.approx(2 / 4)   # rows 0 (high) and 2 (low)
    assert stats["policy/clip_frac_high"].item() == pytest.approx(2 / 10)
    assert stats["policy/clip_frac_low"].item() == pytest.approx(4 / 10)
    assert stats["sequences"].item() == 4


def test_cispo_weight_cap_counts_and_gradient():
    ratio = torch.tensor([[3.0, 3.0, 0.4, 0.4, 1.0]], dtype=F64)
    adv = torch.tensor([[1.0, -1.0, -1.0, 1.0, 1.0]], dtype=F64)
    batch = batch_from(torch.zeros(1, 5, dtype=F64), torch.ones(1, 5, dtype=F64))
    logp = ratio.log().requires_grad_(True)
    loss, stats = recipe_with(CISPO(ratio_max=2.0, ratio_min=0.5)).loss(logp, batch, adv)
    assert stats["policy/weight_capped_frac"].item() == pytest.approx(4 / 5)
    assert stats["policy/clip_frac_high"].item() == pytest.approx(1 / 5)
    assert stats["policy/clip_frac_low"].item() == pytest.approx(1 / 5)
    loss.backward()
    weight = torch.tensor([[2.0, 2.0, 0.5, 0.5, 1.0]], dtype=F64)
    assert torch.allclose(logp.grad, -weight * adv / 5)   # no token is dropped


def test_topr_taper_on_negatives_only():
    # row 0: negative, full ratio S = e^{0.3} > 1 → weight 1, taper binds; row 1: negative, S = e^{−0.6}
    # row 2: positive with S = e^{0.9} → weight 1 (no ratio); row 3: positive S < 1 → weight 1
    delta = torch.tensor([[0.1, 0.2], [-0.3, -0.3], [0.4, 0.5], [-1.0, -1.0]], dtype=F64)
    adv = torch.tensor([[-1.0] * 2, [-1.0] * 2, [1.0] * 2, [1.0] * 2], dtype=F64)
    batch = batch_from(torch.zeros(4, 2, dtype=F64), torch.ones(4, 2, dtype=F64))
    for mode, w1 in (("full", math.exp(-0.6)), ("length_normalised", math.exp(-0.3))):
        logp = delta.clone().requires_grad_(True)
        loss, stats = recipe_with(TOPR(mode), "seq_mean_token_sum").loss(logp, batch, adv)
        assert stats["policy/clip_frac_low"].item() == pytest.approx(2 / 8)
        assert stats["policy/clip_frac_high"].item() == 0.0
        loss.backward()
        weight = torch.tensor([[1.0] * 2, [w1] * 2, [1.0] * 2, [1.0] * 2], dtype=F64)
        assert torch.allclose(logp.grad, -weight * adv / 4)


def test_is_pg_never_clips():
    ratio = torch.tensor([[0.1, 10.0]], dtype=F64)
    batch = batch_from(torch.zeros(1, 2, dtype=F64), torch.ones(1, 2, dtype=F64))
    _, stats = recipe_with(ISPG()).loss(ratio.log().requires_grad_(True), batch,
                                        torch.tensor([[-1.0, 1.0]], dtype=F64))
    assert stats["policy/clip_frac_low"].item() == stats["policy/clip_frac_high"].item() == 0.0
    assert stats["policy/ratio_max"].item() == pytest.approx(10.0)


@pytest.mark.parametrize("objective", [PPOClip(0.2, 0.28), GSPO(), CISPO(), ISPG(), TOPR()], ids=str)
def test_a_wild_token_gives_no_nan(objective):
    logp = torch.tensor([[-0.1, -1.0], [-2.0, -0.5]], dtype=torch.float32, requires_grad=True)
    logp_old = torch.tensor([[-200.0, -1.0], [-2.0, -300.0]], dtype=torch.float32)   # δ = 200
    batch = batch_from(logp_old.to(F64), torch.ones(2, 2, dtype=F64)).replace(logp_old=logp_old)
    adv = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])
    loss, stats = recipe_with(objective).loss(logp, batch, adv)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    assert all(torch.isfinite(v) for k, v in stats.items() if not k.endswith(("_max", "_min")))
