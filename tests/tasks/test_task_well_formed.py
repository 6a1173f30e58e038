"""What a well-formed answer is, per task; fresh held-out problems per seed; the harder (OOD) split."""
import pytest

from bench import tasks

GENERATED = ["addition", "verbose_addition", "chain_sum", "countdown"]


@pytest.mark.parametrize("name", GENERATED)
def test_gold_solutions_are_well_formed_and_bare_or_garbled_ones_are_not(name):
    task = tasks.get(name)
    for ex in task.split("train", n=200) + task.split("test", 50):
        assert task.well_formed(ex.solution), ex.solution
        assert task.well_formed(ex.solution + "\n"), "a trailing newline is still well-formed"
        lines = ex.solution.split("\n")
        assert not task.well_formed(lines[-1]), "a bare final answer has no working"
        assert not task.well_formed("\n".join(lines[:-1])), "working without a final answer"
        assert not task.well_formed("\n".join(["so the answer is"] + lines)), "a line outside the worked format"
        assert not task.well_formed("\n".join(lines[:-1] + ["#### ?"])), "an answer that does not parse"
    for junk in (None, 3, "", "####", "\n\n"):
        assert not task.well_formed(junk)


def test_well_formed_is_not_correct():
    task = tasks.get("addition")
    assert task.well_formed("7+5=12\n4+8+1=13\n3+0+1=4\n#### 433")  # wrong sum, right format
    assert task.score("7+5=12\n4+8+1=13\n3+0+1=4\n#### 433", tasks.Example("347+85=", "432", "")) == 0.0


@pytest.mark.parametrize("name", GENERATED)
def test_eval_set_draws_fresh_held_out_problems_per_seed(name):
    task = tasks.get(name)
    a, b = task.eval_set(120, seed=1), task.eval_set(120, seed=2)
    assert len(a) == len(b) == 120 and len({e.prompt for e in a}) == 120
    assert a == task.eval_set(120, seed=1), "a seed's draw is reproducible"
    assert {e.prompt for e in a} != {e.prompt for e in b}
    assert all(task.in_test(e.prompt) for e in a + b), "drawn from the held-out side only"
    assert task.eval_set(50) == task.split("test", 50), "no seed: the fixed test split"
    assert task.split("test", 10) == task.eval_set(10), "drawing per seed leaves the fixed split alone"
    assert task.eval_set(0, seed=3) == []


@pytest.mark.parametrize("name", GENERATED)
def test_ood_is_one_step_harder_and_held_out(name):
    task = tasks.get(name)
    harder = task.ood()
    assert type(harder) is type(task) and harder.config != task.config
    assert harder.max_new_tokens >= task.max_new_tokens
    problems = harder.eval_set(40, seed=0)
    assert all(task.in_test(e.prompt) for e in problems), "same partition: never a training prompt"
    assert all(harder.well_formed(e.solution) and harder.score(e.solution, e) == 1.0 for e in problems)


def test_ood_of_the_largest_setting_stays_valid():
    assert tasks.get("addition", min_digits=18, max_digits=18).ood() is not None
    assert tasks.get("countdown", min_numbers=8, max_numbers=8).ood().config.max_numbers == 8


def test_a_task_without_a_harder_step_has_no_ood(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(f'{{"question": "q{i}", "answer": "x\\n#### {i}"}}' for i in range(40)))
    task = tasks.get("gsm8k", path=str(data))
    assert task.ood() is None
    assert task.well_formed("blah\n#### 4") and not task.well_formed("blah 4")
