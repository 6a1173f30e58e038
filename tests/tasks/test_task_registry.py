"""The registry: names, presets and overrides, and errors that list the choices."""

import dataclasses

import pytest

from bench import tasks
from bench.tasks import Task, TaskConfig, register


def test_names():
    assert tasks.names() == sorted(tasks.names())
    assert {"addition", "chain_sum", "countdown", "gsm8k"} <= set(tasks.names())


def test_unknown_task_lists_names_and_suggests():
    with pytest.raises(ValueError) as e:
        tasks.get("additon")
    msg = str(e.value)
    assert "'additon'" in msg and "did you mean 'addition'?" in msg
    for name in tasks.names():
        assert name in msg


def test_unknown_param_names_it_and_the_valid_ones():
    with pytest.raises(ValueError) as e:
        tasks.get("addition", max_digit=5)
    msg = str(e.value)
    assert "'max_digit'" in msg and "did you mean 'max_digits'?" in msg
    for valid in ("min_digits", "max_digits", "seed", "test_size", "holdout_frac"):
        assert valid in msg
    assert "version" not in msg  # set by the code, not a parameter


def test_unknown_difficulty():
    with pytest.raises(ValueError, match=r"easy, medium, hard.*did you mean 'hard'"):
        tasks.get("chain_sum", difficulty="hrd")


def test_presets_and_overrides():
    assert tasks.get("addition").config == tasks.get("addition", difficulty="medium").config
    easy = tasks.get("addition", difficulty="easy").config
    assert (easy.min_digits, easy.max_digits) == (1, 2)
    mixed = tasks.get("addition", difficulty="easy", max_digits=5, seed=3).config
    assert (mixed.min_digits, mixed.max_digits, mixed.seed) == (1, 5, 3)
    # Two spellings of one config are one config, so they hash to one run id.
    assert tasks.get("addition", difficulty="easy").config == tasks.get(
        "addition", difficulty="hard", min_digits=1, max_digits=2).config
    for name in tasks.names():
        assert set(tasks.difficulties(name)) == {"easy", "medium", "hard"}


def test_config_is_frozen_and_versioned():
    config = tasks.get("addition").config
    assert config.version >= 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 1
    with pytest.raises(ValueError):  # version is fixed by the code
        dataclasses.replace(config, version=99)
    for name in ("addition", "chain_sum", "countdown"):
        assert "version" in dataclasses.asdict(tasks.get(name).config)


@pytest.mark.parametrize("name, params, match", [
    ("addition", dict(min_digits=4, max_digits=2), r"min_digits \(4\) must be <= max_digits \(2\)"),
    ("addition", dict(max_digits="3"), r"max_digits must be an int, got '3'"),
    ("addition", dict(seed=1.5), r"seed must be an int"),
    ("addition", dict(holdout_frac=1.0), r"holdout_frac must be a number in \(0, 1\)"),
    ("chain_sum", dict(min_terms=1), r"min_terms must be >= 2"),
    ("countdown", dict(operators=("+", "^")), r"operators must be"),
    ("countdown", dict(operators=["+"]), r"operators must be"),
])
def test_invalid_values_raise(name, params, match):
    with pytest.raises(ValueError, match=match):
        tasks.get(name, **params)


def test_duplicate_registration_raises():
    class Again(Task):
        name = "addition"
        Config = TaskConfig
        presets = {"medium": {}}

    with pytest.raises(ValueError, match="already registered"):
        register(Again)


def test_preset_with_unknown_param_is_rejected_at_registration():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Cfg(TaskConfig):
        size: int = 1

    class Bad(Task):
        name = "test_bad_preset"
        Config = Cfg
        presets = {"medium": {"sise": 2}}

    with pytest.raises(ValueError, match=r"preset 'medium'.*'sise'.*did you mean 'size'"):
        register(Bad)
    assert "test_bad_preset" not in tasks.names()


def test_split_name_is_checked():
    with pytest.raises(ValueError, match="'train' or 'test'"):
        tasks.get("addition").split("eval")
