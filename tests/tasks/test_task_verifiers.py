"""Verifiers: gold scores 1, wrong 0, malformed 0 without raising; worked solutions are right;
reasoning-gym's scorers agree with ours on gold answers."""

import random
import re

import pytest

from bench import tasks
from bench.tasks import Example, extract_answer
from bench.tasks.addition import example as addition_example

MALFORMED = [
    "", " ", "\n\n", "garbage", "7+5=12\n432", "####", "#### ", "#### abc", "#### 4 32",
    "#### 12.5", "####\n432", "# 432", "### 432", "#### 432 432", "\x00\x7f####\x1b",
    "x" * 1_000_000, "#### " + "9" * 1_000_000, "####" * 100_000, "#### (", "#### )(*/",
    "#### 2**3", "#### 1e3", "#### \u0663", None,
]


@pytest.fixture(scope="module")
def samples():
    """A few held-out examples per generated task at its default difficulty."""
    return {name: (task, task.split("test", 20))
            for name, task in ((n, tasks.get(n, test_size=20)) for n in ("addition", "chain_sum", "countdown"))}


@pytest.mark.parametrize("name", ["addition", "chain_sum", "countdown"])
def test_gold_wrong_and_malformed(name, samples):
    task, examples = samples[name]
    for ex in examples:
        assert task.score(ex.solution, ex) == 1.0
        assert task.score(f"#### {ex.answer}", ex) == 1.0  # the final line is what counts
        assert task.score(f"  scratch\n####   {ex.answer}  \n", ex) == 1.0
        assert task.score(ex.solution + "\n#### 1000001", ex) == 0.0  # the last answer counts
        assert task.score(ex.solution.rsplit("####", 1)[0], ex) == 0.0  # work but no answer
        for text in MALFORMED:
            assert task.score(text, ex) == 0.0, (text[:40] if text else text)


@pytest.mark.parametrize("name", ["addition", "chain_sum"])
def test_numeric_tasks_reject_off_by_one_and_accept_signs_and_spaces(name, samples):
    task, examples = samples[name]
    for ex in examples:
        value = int(ex.answer)
        for wrong in (value + 1, value - 1, -value if value else 1, value * 10):
            assert task.score(f"#### {wrong}", ex) == 0.0
        sign = "-" if value < 0 else "+"
        assert task.score(f"#### {sign} {abs(value)}", ex) == 1.0


def _check_addition_solution(a: int, b: int, solution: str) -> None:
    """Recompute every scratchpad line from the operands, independently of the generator."""
    *lines, final = solution.split("\n")
    assert final == f"#### {a + b}"
    width = max(len(str(a)), len(str(b)))
    assert len(lines) == width
    carry, digits = 0, []
    for i, line in enumerate(lines):
        m = re.fullmatch(r"(\d)\+(\d)(\+1)?=(\d+)", line)
        assert m, line
        x, y, c, s = int(m[1]), int(m[2]), 1 if m[3] else 0, int(m[4])
        assert (x, y) == (a // 10**i % 10, b // 10**i % 10), (a, b, line)
        assert c == carry and s == x + y + c, (a, b, line)
        carry = s // 10
        digits.append(str(s % 10))
    total = str(carry) + "".join(reversed(digits)) if carry else "".join(reversed(digits))
    assert int(total) == a + b


def test_addition_worked_solutions_are_right():
    rng = random.Random(0)
    pairs = [(0, 0), (9, 1), (99, 1), (9999, 9999), (1, 9999), (5000, 5000), (123456, 876544)]
    pairs += [(rng.randint(0, 10 ** rng.randint(1, 7)), rng.randint(0, 10 ** rng.randint(1, 7)))
              for _ in range(3000)]
    for a, b in pairs:
        ex = addition_example(a, b)
        assert ex.prompt == f"{a}+{b}=" and ex.answer == str(a + b)
        _check_addition_solution(a, b, ex.solution)
    task = tasks.get("addition", difficulty="hard")
    for ex in task.split("train", 2000):
        a, b = map(int, ex.prompt[:-1].split("+"))
        _check_addition_solution(a, b, ex.solution)


def test_addition_solution_length_grows_with_carries():
    assert len(addition_example(11, 11).solution) < len(addition_example(99, 11).solution)
    assert addition_example(347, 85).solution == "7+5=12\n4+8+1=13\n3+0+1=4\n#### 432"
    lengths = {len(ex.solution) for ex in tasks.get("addition").split("train", 500)}
    assert len(lengths) >= 8  # lengths vary, so there is something for RL to drift


def test_chain_sum_matches_reasoning_gym():
    for params in ({}, {"allow_negation": True, "max_digits": 3}):
        task = tasks.get("chain_sum", test_size=100, **params)
        ds = task.rg_dataset()
        for ex in task.split("test"):
            entry = ds[ex.meta["rg_index"]]
            assert ex.prompt == entry["metadata"]["expression"].replace(" ", "") + "="
            assert ds.score_answer(extract_answer(ex.solution), entry) == 1.0
            assert task.score(ex.solution, ex) == 1.0
            assert ds.score_answer(str(int(ex.answer) + 1), entry) < 1.0
            # Every line is a true step of the running sum, starting from the first term.
            *lines, final = ex.solution.split("\n")
            terms = re.findall(r"(?:^|(?<=[+-]))-?\d+", ex.prompt[:-1])
            running = int(terms[0])
            for line in lines:
                m = re.fullmatch(r"(-?\d+)([+-])(-?\d+)=(-?\d+)", line)
                assert m and int(m[1]) == running, line
                running = int(m[1]) + int(m[3]) if m[2] == "+" else int(m[1]) - int(m[3])
                assert int(m[4]) == running, line
            assert final == f"#### {running}" == f"#### {entry['answer']}"


def test_countdown_gold_matches_reasoning_gym_and_wrong_is_zero():
    task = tasks.get("countdown", test_size=100)
    ds = task.rg_dataset()
    for ex in task.split("test"):
        entry = ds[ex.meta["rg_index"]]
        numbers, target = entry["metadata"]["numbers"], entry["metadata"]["target"]
        assert ex.meta["numbers"] == numbers and ex.meta["target"] == target
        assert ex.prompt == f"{','.join(map(str, numbers))}->{target}"
        assert ds.score_answer(ex.answer, entry) == 1.0
        assert task.score(ex.solution, ex) == 1.0
        # reasoning-gym gives a formatted wrong answer partial credit; ours gives none.
        wrong = "+".join(map(str, numbers))
        if sum(numbers) != target:
            assert ds.score_answer(wrong, entry) > 0.0
            assert task.score(f"#### {wrong}", ex) == 0.0
        # Every scratchpad line is a true operation.
        for line in ex.solution.split("\n")[:-1]:
            lhs, rhs = line.split("=")
            m = re.fullmatch(r"(-?\d+)([-+*/])(-?\d+)", lhs)
            a, op, b = int(m[1]), m[2], int(m[3])
            assert {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else None}[op] == int(rhs), line


@pytest.mark.parametrize("answer, score", [
    ("2*5", 1.0), ("2+3+5", 1.0), ("5*2", 1.0), ("(3-2)*5*2", 0.0), ("(2+3)*2", 0.0),
    ("5+5", 0.0),            # 5 used twice
    ("2*3+5", 0.0),          # 11, not the target
    ("10", 0.0),             # 10 is not one of the numbers
    ("20/2", 0.0), ("2**3+2", 0.0), ("-2+12", 0.0), ("5*2.0", 0.0), ("5*2=10", 0.0),
    ("5/(3-3)+10", 0.0), ("2*5/(3-3)", 0.0), ("2 * 5", 1.0), ("(2*5)", 1.0), ("1_0", 0.0),
    ("(3+2)*2", 0.0), ("5*(3-(2))", 0.0), ("(5*(3-2))", 0.0), ("5*3-2-3", 0.0),
    ("(5+3)/2+2", 0.0), ("(5+3+2)", 1.0), ("2*3/3*5", 0.0), ("__import__('os')", 0.0),
])
def test_countdown_scoring_rules(answer, score):
    task = tasks.get("countdown")
    ex = Example(prompt="2,3,5->10", answer="2*5", solution="2*5=10\n#### 2*5",
                 meta={"numbers": [2, 3, 5], "target": 10})
    assert task.score(f"#### {answer}", ex) == score


def test_countdown_respects_operators_and_fractions():
    ex = Example(prompt="2,3,5->10", answer="2*5", solution="", meta={"numbers": [2, 3, 5], "target": 10})
    assert tasks.get("countdown", operators=("+", "-")).score("#### 2*5", ex) == 0.0
    assert tasks.get("countdown", operators=("+", "-")).score("#### 2+3+5", ex) == 1.0
    frac = Example(prompt="3,4,6->8", answer="", solution="", meta={"numbers": [3, 4, 6], "target": 8})
    assert tasks.get("countdown").score("#### 4/(3/6)", frac) == 1.0  # exact fractions, no floats
    assert tasks.get("countdown").score("#### 4/3*6", frac) == 1.0
    assert tasks.get("countdown").score("#### 4*6/3", Example("", "", "", meta=None)) == 0.0


def test_countdown_skips_few_rg_items():
    """Gold expressions with a unary minus or a fractional step are skipped; few are."""
    task = tasks.get("countdown", difficulty="hard")
    examples = task.split("train", 500)
    assert examples[-1].meta["rg_index"] < 1.1 * 500 / (1 - task.config.holdout_frac)
