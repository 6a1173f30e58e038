"""Splits of the generated tasks: seeded, disjoint by prompt, prefix-stable, and examples in
the format a char-level model can learn (printable ASCII, short, ending in `#### answer`)."""

import string

import pytest

from bench import tasks

GENERATED = ["addition", "chain_sum", "countdown"]
PRINTABLE = set(string.printable)


@pytest.fixture(scope="module")
def default_tasks():
    """One instance per task at its default difficulty; instances cache their test split."""
    return {name: tasks.get(name) for name in GENERATED}


@pytest.mark.parametrize("name", GENERATED)
def test_train_and_test_are_disjoint(name, default_tasks):
    task = default_tasks[name]
    test = task.split("test")
    assert len(test) == task.config.test_size == 200
    prompts = [ex.prompt for ex in test]
    assert len(set(prompts)) == len(prompts)  # the held-out set has no repeats
    train = task.split("train", 3000)
    assert len(train) == 3000
    assert not set(prompts) & {ex.prompt for ex in train}
    assert all(task.in_test(p) for p in prompts) and not any(task.in_test(ex.prompt) for ex in train)


@pytest.mark.parametrize("name", GENERATED)
def test_same_seed_same_splits_other_seed_other_splits(name, default_tasks):
    task, again = default_tasks[name], tasks.get(name)
    assert again.split("test", 60) == task.split("test")[:60]  # determinism and prefix stability
    assert again.split("train", 300) == task.split("train", 300)
    assert task.split("train", 100) == task.split("train", 300)[:100]
    other = tasks.get(name, seed=1)
    other_test = {ex.prompt for ex in other.split("test", 60)}
    shared = other_test & {ex.prompt for ex in task.split("test", 60)}
    assert len(shared) < 15, f"seeds 0 and 1 share {len(shared)} of 60 test prompts"
    assert other.split("train", 100) != task.split("train", 100)


@pytest.mark.parametrize("name", GENERATED)
def test_split_sizes(name, default_tasks):
    task = default_tasks[name]
    assert task.split("train", 0) == [] and task.split("test", 0) == []
    with pytest.raises(ValueError, match="needs n"):
        task.split("train")
    with pytest.raises(ValueError, match="n must be >= 0"):
        task.split("train", -1)
    assert len(tasks.get(name, test_size=30).split("test")) == 30


def test_too_small_a_space_for_the_test_size_says_so():
    task = tasks.get("addition", min_digits=1, max_digits=1)  # 100 prompts, ~10 held out
    with pytest.raises(ValueError, match="too few distinct problems.*lower test_size"):
        task.split("test", 50)


@pytest.mark.parametrize("name", GENERATED)
def test_default_difficulty_fits_a_char_level_model(name, default_tasks):
    task = default_tasks[name]
    for ex in task.split("test") + task.split("train", 1000):
        assert set(ex.prompt + ex.solution) <= PRINTABLE, ex
        assert len(ex.prompt) <= 40 and len(ex.solution) <= 90, ex
        assert ex.solution.split("\n")[-1] == f"#### {ex.answer}", ex
        assert task.score(ex.solution, ex) == 1.0, ex


@pytest.mark.parametrize("name", GENERATED)
@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_max_new_tokens_fits_every_solution(name, difficulty):
    task = tasks.get(name, difficulty=difficulty, test_size=50)
    examples = task.split("test") + task.split("train", 500)
    longest = max(len(ex.solution) for ex in examples)
    assert longest + 1 <= task.max_new_tokens <= 4 * longest + 16  # +1: EOS
