"""Reward shaping (overlong penalty, mask_truncated) and sample filters (keep masks)."""

import pytest
import torch

import algorithms
from algorithms import DropZeroVariance, DynamicSampling, MaskTruncated, NoFilter, OverlongPenalty, Rollouts

F64 = torch.float64


def by_length(lengths, T=20, truncated=None, rewards=None, group=None, correct=None):
    lengths = torch.tensor(lengths)
    B = lengths.numel()
    mask = (torch.arange(T)[None] < lengths[:, None]).to(F64)
    return Rollouts(rewards=torch.zeros(B, dtype=F64) if rewards is None else torch.tensor(rewards, dtype=F64),
                    group=torch.arange(B) if group is None else torch.tensor(group),
                    mask=mask, logp_old=torch.zeros(B, T, dtype=F64), max_new_tokens=T,
                    truncated=None if truncated is None else torch.tensor(truncated),
                    correct=None if correct is None else torch.tensor(correct))


@pytest.mark.parametrize("shaping", [OverlongPenalty(buffer=4, buffer_frac=None), OverlongPenalty(buffer_frac=0.2)])
def test_overlong_penalty_values(shaping):
    # L_max = 20, buffer 4: 0 up to 16 tokens, then (16 − L)/4, −1 at the cap
    b = by_length([10, 16, 17, 18, 19, 20], rewards=[1, 0, 1, 1, 0, 1])
    out = shaping.apply(b)
    assert torch.allclose(out.rewards - b.rewards, torch.tensor([0, 0, -0.25, -0.5, -0.75, -1.0], dtype=F64))
    assert torch.equal(out.mask, b.mask)


def test_overlong_penalty_factor_and_beyond_cap():
    p = OverlongPenalty(buffer=4, buffer_frac=None, factor=0.5)
    assert torch.allclose(p.penalty(torch.tensor([18.0, 25.0]), 20), torch.tensor([-0.25, -0.5]))
    with pytest.raises(ValueError, match="OverlongPenalty.buffer"):
        OverlongPenalty(buffer=30, buffer_frac=None).penalty(torch.tensor([1.0]), 20)


def test_truncated_rows_are_penalised_even_after_masking():
    b = by_length([20, 12], truncated=[True, False], rewards=[1, 1])
    out = OverlongPenalty(buffer=4, buffer_frac=None).apply(MaskTruncated().apply(b))
    assert torch.allclose(out.rewards, torch.tensor([0.0, 1.0], dtype=F64))
    assert out.mask[0].sum() == 0 and out.mask[1].sum() == 12


def test_dapo_shape_uses_twenty_percent_of_the_cap():
    b = by_length([10, 18, 20], T=20, rewards=[1, 1, 1])
    assert torch.allclose(algorithms.get("dapo").shape(b).rewards, torch.tensor([1.0, 0.5, 0.0], dtype=F64))
    assert algorithms.get("grpo").shape(b) is b


def test_mask_truncated_keeps_rows_in_group_statistics():
    b = by_length([5, 20, 7, 9], truncated=[False, True, False, False], rewards=[1, 0, 1, 0], group=[0, 0, 0, 0])
    grpo = algorithms.get("grpo")
    masked = MaskTruncated().apply(b)
    assert masked.mask[1].sum() == 0 and torch.equal(masked.mask[0], b.mask[0])
    a, a_masked = grpo.advantages(b), grpo.advantages(masked)
    assert torch.equal(a_masked[[0, 2, 3]], a[[0, 2, 3]]) and a_masked[1].abs().sum() == 0
    with pytest.raises(ValueError, match="truncated"):
        MaskTruncated().apply(b.replace(truncated=None))
    bool_mask = b.replace(mask=b.mask.bool())
    assert MaskTruncated().apply(bool_mask).mask.dtype == torch.bool


def test_keep_masks():
    # groups: 0 all correct → drop, 1 mixed → keep, 2 all wrong → drop, 3 singleton → keep
    b = by_length([3] * 8, group=[0, 0, 0, 1, 1, 2, 2, 3], rewards=[1, 1, 0.5, 1, 0, 0, 0, 1],
                  correct=[True, True, True, True, False, False, False, True])
    expected = torch.tensor([0, 0, 0, 1, 1, 0, 0, 1], dtype=torch.bool)
    assert torch.equal(DynamicSampling().keep(b), expected)
    assert torch.equal(DropZeroVariance().keep(b), expected)
    assert torch.equal(algorithms.get("dapo").keep(b), expected)
    # metric "reward": group 0's shaped rewards differ, so it is kept
    by_reward = torch.tensor([1, 1, 1, 1, 1, 0, 0, 1], dtype=torch.bool)
    assert torch.equal(DropZeroVariance(metric="reward").keep(b), by_reward)
    # no `correct`: falls back to rewards > 0 (group 0 then all "correct")
    assert torch.equal(DropZeroVariance().keep(b.replace(correct=None)), expected)
    assert torch.equal(NoFilter().keep(b), torch.ones(8, dtype=torch.bool))
    assert torch.equal(algorithms.get("grpo").keep(b), torch.ones(8, dtype=torch.bool))


def test_filter_capabilities():
    assert DynamicSampling(max_generation_rounds=3).refill and DynamicSampling(max_generation_rounds=3).rounds == 3
    assert not DropZeroVariance().refill and DropZeroVariance().rounds == 1
    r = algorithms.get("grpo").replace(filter=DropZeroVariance())
    assert not r.needs.refill and r.needs.max_generation_rounds == 1
