"""The reward registry: each function's numbers, weighted combination, validation, suite syntax."""
import pytest
import torch

from bench import rewards, suite, tasks


def samples(texts, correct, lengths, max_new=20):
    return rewards.Samples(texts=texts, examples=[None] * len(texts), correct=torch.tensor(correct),
                           lengths=torch.tensor(lengths), truncated=torch.tensor([n >= max_new for n in lengths]),
                           max_new_tokens=max_new, task=tasks.get("addition"))


def test_each_function_and_the_weighted_sum():
    s = samples(["12\n#### 3", "no answer", "#### 5"], [True, False, False], [4, 16, 20])
    parts = {n: rewards._REWARDS[n](s).tolist() for n in rewards.names()}
    assert parts["correct"] == [1.0, 0.0, 0.0]
    assert parts["format"] == [1.0, 0.0, 1.0]
    assert parts["length"] == pytest.approx([-0.2, -0.8, -1.0])
    # buffer = 20% of 20 = 4 tokens: no penalty up to 16, then linear to -1 at 20
    assert parts["overlong"] == pytest.approx([0.0, 0.0, -1.0])
    assert rewards.overlong(samples(["x"], [False], [18])).item() == pytest.approx(-0.5)
    total, got = rewards.combine({"correct": 1.0, "format": 0.5, "length": 0.1}, s)
    assert total.tolist() == pytest.approx([1.0 + 0.5 - 0.02, 0.0 - 0.08, 0.5 - 0.1])
    assert set(got) == {"correct", "format", "length"}
    default, _ = rewards.combine(rewards.DEFAULT, s)
    assert default.tolist() == [1.0, 0.0, 0.0]  # exactly the verdict, as before the registry
    m = rewards.metrics([got], s.correct)
    assert m["reward/correct"] == pytest.approx(1 / 3) and m["reward/format"] == pytest.approx(2 / 3)


def test_check_names_the_choices():
    assert rewards.check({"format": 1, "correct": 2}) == {"correct": 2.0, "format": 1.0}
    with pytest.raises(ValueError, match="unknown reward function 'lenght'.*did you mean 'length'"):
        rewards.check({"lenght": 1.0})
    for bad in ({"correct": "1"}, {"correct": True}, {"correct": float("nan")}, {}, [1]):
        with pytest.raises(ValueError):
            rewards.check(bad)


def test_suite_rewards_and_warmstart_none():
    base = {"recipes": ["grpo"], "seeds": 1, "tasks": ["addition"], "scales": ["nano"], "budget": "2steps"}
    s = suite.from_dict({**base, "rewards": {"correct": 1.0, "format": 0.1}, "warmstart": "none"})
    cfg = s.expand()[0]
    assert cfg.rewards == {"correct": 1.0, "format": 0.1} and cfg.warmstart.steps == 0
    assert suite.from_dict(base).expand()[0].run_id != cfg.run_id
    with pytest.raises(ValueError, match="rewards: unknown reward function 'fmt'"):
        suite.from_dict({**base, "rewards": {"fmt": 1.0}})
