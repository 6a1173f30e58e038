"""verbose_addition: a seeded mix of solution lengths for one kind of problem, every one of them
verified by its final line, and a generation cap with room for length to grow."""

import statistics

import pytest

from bench import tasks
from bench.tasks.verbose_addition import MAX_CHECKS, verbosity, worked_solution


@pytest.fixture(scope="module")
def task():
    return tasks.get("verbose_addition")


def test_worked_solution_of_each_style():
    assert worked_solution(347, 85, False, 0) == "7+5=12\n4+8+1=13\n3+0+1=4\n#### 432"
    assert worked_solution(347, 85, True, 2) == (
        "7+5=12, write 2 carry 1\n4+8+1=13, write 3 carry 1\n3+0+1=4, write 4\n"
        "check 432-85=347\ncheck 432-347=85\n#### 432")
    assert worked_solution(5, 5, True, 1) == "5+5=10, write 0 carry 1\ncheck 10-5=5\n#### 10"
    with pytest.raises(ValueError, match="checks must be in 0..2"):
        worked_solution(1, 2, False, 3)


def test_stream_is_seeded_and_splits_disjoint(task):
    again = tasks.get("verbose_addition")
    assert again.split("train", 300) == task.split("train", 300)  # styles included
    assert again.split("test", 50) == task.split("test")[:50]
    test = {ex.prompt for ex in task.split("test")}
    assert len(test) == 200
    assert not test & {ex.prompt for ex in task.split("train", 3000)}
    assert tasks.get("verbose_addition", seed=1).split("train", 100) != task.split("train", 100)


def test_corpus_mixes_every_style_in_the_configured_shares(task):
    train = task.split("train", 4000)
    styles = [(ex.meta["spelled"], ex.meta["checks"]) for ex in train]
    assert set(styles) == {(s, c) for s in (False, True) for c in range(MAX_CHECKS + 1)}
    spelled = sum(s for s, _ in styles) / len(styles)
    assert abs(spelled - 0.5) < 0.03  # 4000 draws: sd 0.008
    for c in range(MAX_CHECKS + 1):
        assert abs(sum(k == c for _, k in styles) / len(styles) - 1 / 3) < 0.03
    # the same digits of working in a terse and a spelled solution differ a lot in length
    lengths = [len(ex.solution) for ex in train]
    assert max(lengths) / min(lengths) > 4


def test_verifier_accepts_gold_of_every_style_and_reads_only_the_final_line(task):
    for ex in task.split("test", 40):
        a, b = map(int, ex.prompt[:-1].split("+"))
        for spelled in (False, True):
            for checks in range(MAX_CHECKS + 1):
                gold = worked_solution(a, b, spelled, checks)
                assert task.score(gold, ex) == 1.0
                assert verbosity(gold) == {"terse": 0 if spelled else max(len(str(a)), len(str(b))),
                                           "spelled": max(len(str(a)), len(str(b))) if spelled else 0,
                                           "checks": checks, "other": 0}
                wrong = gold.rsplit("#### ", 1)[0] + f"#### {a + b + 1}"
                assert task.score(wrong, ex) == 0.0
        assert task.score(f"#### {ex.answer}", ex) == 1.0  # a bare answer counts
        assert task.score(ex.solution.rsplit("####", 1)[0], ex) == 0.0  # working, no answer


def test_verbosity_counts_malformed_lines_as_other():
    assert verbosity("7+5=12\nblah\ncheck 12-5=7\n#### 12") == {
        "terse": 1, "spelled": 0, "checks": 1, "other": 1}
    assert verbosity("") == {"terse": 0, "spelled": 0, "checks": 0, "other": 0}


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_generation_cap_leaves_room_to_triple_the_mean_and_fit_the_longest(difficulty):
    task = tasks.get("verbose_addition", difficulty=difficulty)
    lengths = [len(ex.solution) for ex in task.split("train", 2000)]
    assert task.max_new_tokens >= 3 * statistics.mean(lengths)
    assert task.max_new_tokens > max(lengths) + 8  # EOS and drift fit after the longest
    # all terse, no checks: the mean is shorter still, so the ratio only grows
    terse = tasks.get("verbose_addition", difficulty=difficulty, spelled_frac=0.0, max_checks=0)
    assert terse.max_new_tokens == task.max_new_tokens


def test_presets_and_bad_parameters():
    assert tasks.difficulties("verbose_addition") == {
        "easy": {"min_digits": 1, "max_digits": 3}, "medium": {"min_digits": 2, "max_digits": 4},
        "hard": {"min_digits": 3, "max_digits": 6}}
    assert tasks.get("verbose_addition").config.max_digits == 4  # medium is the default
    assert tasks.get("verbose_addition", "hard").max_new_tokens > tasks.get("verbose_addition").max_new_tokens
    with pytest.raises(ValueError, match="spelled_frac must be a number in \\[0, 1\\]"):
        tasks.get("verbose_addition", spelled_frac=1.5)
    with pytest.raises(ValueError, match="max_checks must be <= 2"):
        tasks.get("verbose_addition", max_checks=3)
    with pytest.raises(ValueError, match="did you mean 'max_checks'"):
        tasks.get("verbose_addition", max_check=1)
    only_spelled = tasks.get("verbose_addition", spelled_frac=1.0, max_checks=0)
    assert all(ex.meta == {"spelled": True, "checks": 0} for ex in only_spelled.split("train", 50))
