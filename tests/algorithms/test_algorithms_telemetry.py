"""Off-policy telemetry, group-std telemetry and Rollouts.cat, against hand-computed numbers."""
import math

import pytest
import torch

import algorithms
from algorithms.stats import rule
from algorithms.telemetry import group_weight_stats, off_policy_stats
from alg_helpers import random_batch


def test_off_policy_stats_by_hand():
    # row 0: 2 tokens, δ = log 1.5, log 0.9 ; row 1: 1 token, δ = log 1.1 (a padding δ that must be ignored)
    logp_old = torch.zeros(2, 2, dtype=torch.float64)
    logp = torch.tensor([[math.log(1.5), math.log(0.9)], [math.log(1.1), 5.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    s = off_policy_stats(logp, logp_old, mask)
    assert s["policy/ratio_dev_frac"].item() == pytest.approx(1 / 3)  # only 1.5 is beyond ±0.2
    assert s["policy/log_ratio_abs_mean"].item() == pytest.approx((math.log(1.5) - math.log(0.9) + math.log(1.1)) / 3)
    s0 = math.exp((math.log(1.5) + math.log(0.9)) / 2)  # geometric mean of 1.5 and 0.9
    assert s["policy/seq_ratio_mean"].item() == pytest.approx((s0 + 1.1) / 2)
    assert s["policy/seq_ratio_max"].item() == pytest.approx(s0)
    on = off_policy_stats(logp, logp, mask)  # on-policy: exactly 0, 0, 1, 1
    assert [on[k].item() for k in ("policy/ratio_dev_frac", "policy/log_ratio_abs_mean", "policy/seq_ratio_mean",
                                   "policy/seq_ratio_max")] == [0.0, 0.0, 1.0, 1.0]


def test_sequence_means_merge_by_sequences_and_every_recipe_logs_them():
    assert rule("policy/seq_ratio_mean") == "seq" and rule("policy/seq_ratio_max") == "max"
    assert rule("policy/ratio_dev_frac") == "token" and rule("policy/log_ratio_abs_mean") == "token"
    batch = random_batch(seed=3)
    logp = batch.logp_old + 0.3 * torch.randn(batch.logp_old.shape, generator=torch.Generator().manual_seed(0),
                                              dtype=batch.logp_old.dtype)
    for name in algorithms.names():
        r = algorithms.get(name)
        b = r.shape(batch)
        _, stats = r.loss(logp.clone().requires_grad_(True), b, r.advantages(b))
        assert stats["policy/ratio_dev_frac"].item() > 0, name
        assert stats["policy/seq_ratio_max"].item() > 1, name


def test_group_weight_stats_by_hand():
    # four groups of two, one token each: reward std (Bessel) 0 (tied), 0.7071, 1.4142, 2.1213
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 2.0, 0.0, 3.0], dtype=torch.float64)
    group = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    mask = torch.ones(8, 1, dtype=torch.float64)
    batch = algorithms.Rollouts(rewards=rewards, group=group, mask=mask, logp_old=torch.zeros(8, 1, dtype=torch.float64),
                                max_new_tokens=4)
    adv = torch.tensor([[0.5], [0.5], [-1.0], [1.0], [-2.0], [2.0], [-1.0], [1.0]], dtype=torch.float64)
    w = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 1.0, 1.0], dtype=torch.float64)
    s = group_weight_stats(batch, adv, w)
    stds = torch.tensor([math.sqrt(0.5), math.sqrt(2.0), math.sqrt(4.5)], dtype=torch.float64)  # the tied group is out
    for q, k in ((0.1, "adv/group_std_q10"), (0.5, "adv/group_std_q50"), (0.9, "adv/group_std_q90")):
        assert s[k].item() == pytest.approx(torch.quantile(stds, q).item())
    assert s["adv/group_std_q50"].item() == pytest.approx(math.sqrt(2.0))
    # weight per group: tied 0.5 + 0.5 = 1, g1 1 + 1 = 2, g2 0.5·2 + 0.5·2 = 2, g3 1 + 1 = 2; below the median: g1
    assert s["adv/low_std_weight_frac"].item() == pytest.approx(2 / 7)
    assert s["adv/low_std_group_frac"].item() == pytest.approx(1 / 3)
    assert math.isnan(group_weight_stats(batch, torch.zeros_like(adv), w)["adv/low_std_weight_frac"].item())
    tied = batch.replace(rewards=torch.ones(8, dtype=torch.float64))
    assert all(math.isnan(v.item()) for v in group_weight_stats(tied, adv, w).values())


def test_rollouts_cat_pads_token_fields_and_keeps_rows_in_order():
    a = random_batch(seed=1, T=5, max_new_tokens=9)
    b = random_batch(seed=2, T=9, max_new_tokens=9)
    c = algorithms.Rollouts.cat([a, b])
    assert c.size == a.size + b.size and c.mask.shape[1] == 9
    assert torch.equal(c.logp_old[: a.size, :5], a.logp_old) and (c.logp_old[: a.size, 5:] == 0).all()
    assert (c.mask[: a.size, 5:] == 0).all() and torch.equal(c.mask[a.size:], b.mask)
    assert torch.equal(c.rewards, torch.cat([a.rewards, b.rewards])) and torch.equal(c.group[a.size:], b.group)
    assert torch.equal(c.select(torch.arange(a.size)).trim(5).logp_ref, a.logp_ref)
    with pytest.raises(ValueError, match="values"):
        algorithms.Rollouts.cat([a, b.replace(values=None)])
    with pytest.raises(ValueError, match="max_new_tokens"):
        algorithms.Rollouts.cat([a, random_batch(seed=2, T=9, max_new_tokens=12)])
