"""The five procedural task families: multiplication, gcd, base_conversion, number_sorting and
spell_backward. Gold solutions are right, well-formed and fit the generation cap at every
difficulty; wrong answers score 0; splits are seeded and disjoint; each worked format is checked
line by line independently of its generator; reasoning-gym agrees where it generates."""

import math
import random
import re
import string

import pytest

from bench import tasks
from bench.tasks import Example, extract_answer
from bench.tasks.base import generation_cap
from bench.tasks.base_conversion import example as base_example
from bench.tasks.base_conversion import worked_solution as base_solution
from bench.tasks.gcd import example as gcd_example
from bench.tasks.gcd import longest_solution_bound
from bench.tasks.multiplication import example as mul_example
from bench.tasks.number_sorting import example as sort_example
from bench.tasks.number_sorting import most_numbers
from bench.tasks.spell_backward import example as spell_example

NEW = ["multiplication", "gcd", "base_conversion", "number_sorting", "spell_backward"]
DIFFICULTIES = ["easy", "medium", "hard"]
PRINTABLE = set(string.printable)
JUNK = ["", " ", "\n\n", "garbage", "####", "#### ", "#### ?", "####\n1", "# 1", "x" * 100_000,
        "#### " + "9" * 100_000, "####" * 10_000, "#### \u0663", "\x00\x7f####\x1b", None, 3]

_TASKS: dict = {}


def get(name, difficulty="medium"):
    """One instance per (task, difficulty) for the module: instances cache their test split."""
    if (name, difficulty) not in _TASKS:
        _TASKS[name, difficulty] = tasks.get(name, difficulty=difficulty)
    return _TASKS[name, difficulty]


def perturbed(task, answer: str) -> list[str]:
    """Wrong answers that still parse: the last character changed, and task-specific slips."""
    last = answer[-1]
    if last.isdigit():
        top = task.config.base if task.name == "base_conversion" else 10
        wrong = [answer[:-1] + str((int(last) + 1) % top)]
    else:
        wrong = [answer[:-1] + ("a" if last != "a" else "b")]
    if task.name == "base_conversion":
        wrong.append("0" + answer)  # a leading zero is a wrong digit string
    if task.name == "number_sorting":
        parts = answer.split(",")
        wrong.append(",".join(parts[:-1]))  # a number dropped
        wrong.append(",".join(sorted(parts, key=int, reverse=True)))
    if task.name == "spell_backward":
        wrong.append(answer[::-1])  # not reversed (a palindrome is its own reversal)
    return [w for w in wrong if w and w != answer and task.parses(w)]


# --- gold solutions, wrong answers, formats ---------------------------------------------------


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
@pytest.mark.parametrize("name", NEW)
def test_gold_is_well_formed_right_and_fits_the_cap(name, difficulty):
    task = get(name, difficulty)
    examples = task.split("test") + task.split("train", 300)
    for ex in examples:
        assert set(ex.prompt + ex.solution) <= PRINTABLE, ex
        assert ex.solution.split("\n")[-1] == f"#### {ex.answer}", ex
        assert task.parses(ex.answer) and task.extract(ex.solution) == ex.answer, ex
        assert task.well_formed(ex.solution) and task.well_formed(ex.solution + "\n"), ex
        assert task.score(ex.solution, ex) == 1.0, ex
        assert task.score(f"  scratch\n####   {ex.answer}  \n", ex) == 1.0  # the final line counts
    longest = max(len(ex.solution) for ex in examples)
    assert longest + 1 <= task.max_new_tokens <= 4 * longest + 16  # +1: EOS


@pytest.mark.parametrize("name", NEW)
def test_wrong_bare_and_garbled_answers(name):
    task = get(name)
    for ex in task.split("test", 100):
        lines = ex.solution.split("\n")
        work = "\n".join(lines[:-1])
        wrongs = perturbed(task, ex.answer)
        assert wrongs, ex
        for wrong in wrongs:
            assert task.score(f"{work}\n#### {wrong}", ex) == 0.0, (ex, wrong)
            assert task.well_formed(f"{work}\n#### {wrong}"), "wrong but in the format"
        assert task.score(ex.solution + f"\n#### {wrongs[0]}", ex) == 0.0  # the last answer counts
        assert not task.well_formed(f"#### {ex.answer}"), "a bare final answer has no working"
        assert not task.well_formed(work), "working without a final answer"
        assert task.score(work, ex) == 0.0
        assert not task.well_formed("\n".join(["so the answer is"] + lines)), "a line outside the format"
        assert not task.well_formed(work + "\n#### ?"), "an answer that does not parse"
        for text in JUNK:
            assert task.score(text, ex) == 0.0, repr(text)[:40]
            assert not task.well_formed(text), repr(text)[:40]


@pytest.mark.parametrize("name, good, bad", [
    ("multiplication", ["2082", "-3", "1,234"], ["2 082", "abc", "1e3"]),
    ("gcd", ["12", "1"], ["12.5", "x"]),
    ("base_conversion", ["100101", "0", "0101"], ["", "102", "1 0", "-1", "10b", "\u0661"]),
    ("number_sorting", ["12,40,53,87", "7", "0,0"], ["12, 40", "12,,40", "-1,2", "1,2,", "[1,2]", ""]),
    ("spell_backward", ["tenalp", "a"], ["Tenalp", "ten alp", "t3n", "", "\u00e9t\u00e9"]),
])
def test_what_parses(name, good, bad):
    task = get(name)
    assert all(task.parses(a) for a in good)
    assert not any(task.parses(a) for a in bad)


def test_the_formats_of_the_brief():
    assert mul_example(347, 6) == Example("347*6=", "2082", "7*6=42\n4*6+4=28\n3*6+2=20\n#### 2082")
    assert mul_example(5, 1).solution == "5*1=5\n#### 5"
    assert gcd_example(36, 84) == gcd_example(84, 36) == Example(
        "gcd(84,36)=", "12", "84=2*36+12\n36=3*12+0\n#### 12")
    assert gcd_example(7, 7).solution == "7=1*7+0\n#### 7"
    assert base_example(37, 2) == Example(
        "37>b2=", "100101", "37=2*18+1\n18=2*9+0\n9=2*4+1\n4=2*2+0\n2=2*1+0\n1=2*0+1\n#### 100101")
    assert base_example(0, 2).answer == "0" and base_example(80, 9).answer == "88"
    assert sort_example([53, 12, 87, 40]) == Example(
        "sort 53,12,87,40=", "12,40,53,87", "12|53,87,40\n40|53,87\n53|87\n#### 12,40,53,87")
    assert sort_example([5, 3, 5, 3]).solution == "3|5,5,3\n3|5,5\n5|5\n#### 3,3,5,5"
    assert spell_example("planet") == Example("rev planet=", "tenalp", "t\ne\nn\na\nl\np\n#### tenalp")


# --- splits -----------------------------------------------------------------------------------


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
@pytest.mark.parametrize("name", NEW)
def test_train_and_test_are_disjoint(name, difficulty):
    task = get(name, difficulty)
    test = task.split("test", 500)  # a held-out set this large exists at medium and hard
    prompts = [ex.prompt for ex in test]
    assert len(set(prompts)) == len(prompts) == 500
    assert test[:200] == task.split("test")
    train = task.split("train", 2000)
    assert len(train) == 2000 and not set(prompts) & {ex.prompt for ex in train}
    assert all(task.in_test(p) for p in prompts) and not any(task.in_test(ex.prompt) for ex in train)


@pytest.mark.parametrize("name", NEW)
def test_easy_has_a_default_test_split(name):
    test = get(name, "easy").split("test")
    assert len({ex.prompt for ex in test}) == 200


@pytest.mark.parametrize("name", NEW)
def test_same_seed_same_splits_other_seed_other_splits(name):
    task, again = get(name), tasks.get(name)
    assert again.split("test", 60) == task.split("test")[:60]
    assert again.split("train", 300) == task.split("train", 300)
    assert task.split("train", 100) == task.split("train", 300)[:100]
    other = tasks.get(name, seed=1)
    shared = {ex.prompt for ex in other.split("test", 60)} & {ex.prompt for ex in task.split("test", 60)}
    assert len(shared) < 15, f"seeds 0 and 1 share {len(shared)} of 60 test prompts"
    assert other.split("train", 100) != task.split("train", 100)
    salted = list(zip(range(50), task.stream("other")))
    assert [ex for _, ex in salted] != [ex for _, ex in zip(range(50), task.stream())]


@pytest.mark.parametrize("name", NEW)
def test_eval_set_draws_fresh_held_out_problems_per_seed(name):
    task = get(name)
    a, b = task.eval_set(300, seed=1), task.eval_set(300, seed=2)
    assert len(a) == len(b) == 300 and len({e.prompt for e in a}) == 300
    assert a == task.eval_set(300, seed=1), "a seed's draw is reproducible"
    assert {e.prompt for e in a} != {e.prompt for e in b}
    assert all(task.in_test(e.prompt) for e in a + b), "drawn from the held-out side only"
    assert task.eval_set(50) == task.split("test", 50)
    assert task.eval_set(0, seed=3) == []


# --- harder (OOD) and the generation cap ------------------------------------------------------


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
@pytest.mark.parametrize("name", NEW)
def test_ood_is_harder_valid_and_held_out(name, difficulty):
    task = get(name, difficulty)
    harder = task.ood()
    assert type(harder) is type(task) and harder.config != task.config
    assert harder.max_new_tokens >= task.max_new_tokens
    problems = harder.eval_set(100, seed=0)
    assert all(task.in_test(e.prompt) for e in problems), "same partition: never a training prompt"
    for e in problems + harder.split("train", 100):
        assert harder.well_formed(e.solution) and harder.score(e.solution, e) == 1.0, e
        assert len(e.solution) + 1 <= harder.max_new_tokens, e


@pytest.mark.parametrize("name, params", [
    ("multiplication", dict(min_digits=18, max_digits=18)),
    ("gcd", dict(max_value=10**6)),
    ("base_conversion", dict(max_value=10**6)),
    ("base_conversion", dict(base=9, max_value=10**6 - 1)),
    ("number_sorting", dict(min_numbers=20, max_numbers=20, max_digits=3)),
    ("number_sorting", dict(min_numbers=14, max_numbers=14, max_digits=6)),
    ("spell_backward", dict(min_len=10, max_len=10)),
])
def test_ood_of_the_largest_setting_stays_valid(name, params):
    task = tasks.get(name, test_size=20, **params)
    harder = task.ood()
    assert harder is not None and harder.max_new_tokens >= task.max_new_tokens
    for e in harder.split("test") + harder.split("train", 50):
        assert harder.well_formed(e.solution) and harder.score(e.solution, e) == 1.0, e
        assert len(e.solution) + 1 <= harder.max_new_tokens


def test_caps_are_the_worst_case():
    # multiplication: every multiplicand and multiplier of up to 3 digits
    for m in range(1, 10):
        task = tasks.get("multiplication", min_digits=1, max_digits=3, min_multiplier=m, max_multiplier=m)
        longest = max(len(mul_example(a, m).solution) for a in range(1000))
        assert task.max_new_tokens == generation_cap(longest)
    # base_conversion: the largest number has the longest solution
    for base in (2, 3, 7, 9):
        for top in (1, 9, 100, 2000):
            task = tasks.get("base_conversion", base=base, min_value=0, max_value=top)
            longest = max(len(base_solution(n, base)[0]) for n in range(top + 1))
            assert task.max_new_tokens == generation_cap(longest)
    # number_sorting: a random list is never longer than the bound's all-largest list
    rng = random.Random(0)
    for digits in (1, 2, 3):
        task = tasks.get("number_sorting", min_numbers=2, max_numbers=7, max_digits=digits)
        for _ in range(500):
            numbers = [rng.randint(0, 10**digits - 1) for _ in range(rng.randint(2, 7))]
            assert len(sort_example(numbers).solution) + 1 <= task.max_new_tokens
    # spell_backward: every word of the length has one solution length
    assert tasks.get("spell_backward", min_len=3, max_len=5).max_new_tokens >= len(
        spell_example("abcde").solution) + 1


@pytest.mark.parametrize("top", [2, 3, 5, 8, 13, 21, 55, 89, 99, 100, 144, 199])
def test_gcd_bound_covers_every_pair_and_is_tight(top):
    longest = max(len(gcd_example(a, b).solution) for a in range(1, top + 1) for b in range(1, a + 1))
    assert longest <= longest_solution_bound(top) <= 1.21 * longest


# --- each format, line by line ----------------------------------------------------------------


def test_multiplication_lines_are_right():
    rng = random.Random(0)
    cases = [(0, 7), (9, 9), (99999, 9), (10000, 2), (12345, 1)]
    cases += [(rng.randint(0, 10 ** rng.randint(1, 9)), rng.randint(1, 9)) for _ in range(2000)]
    cases += [tuple(map(int, ex.prompt[:-1].split("*"))) for ex in get("multiplication", "hard").split("train", 500)]
    for a, m in cases:
        ex = mul_example(a, m)
        assert ex.prompt == f"{a}*{m}=" and ex.answer == str(a * m)
        *lines, final = ex.solution.split("\n")
        assert final == f"#### {a * m}" and len(lines) == len(str(a))
        carry, digits = 0, []
        for i, line in enumerate(lines):
            g = re.fullmatch(r"(\d)\*(\d)(?:\+(\d))?=(\d+)", line)
            assert g, line
            x, y, c, v = int(g[1]), int(g[2]), int(g[3] or 0), int(g[4])
            assert (x, y, c) == (a // 10**i % 10, m, carry) and g[3] != "0", line  # no `+0`
            assert v == x * y + c, line
            carry, digits = v // 10, [str(v % 10)] + digits
        assert int(str(carry) + "".join(digits)) == a * m


def test_gcd_lines_are_right():
    rng = random.Random(0)
    pairs = [(1, 1), (2, 1), (89, 55), (1000, 999), (10**6, 10**6 - 1)]
    pairs += [(rng.randint(1, 10**6), rng.randint(1, 10**6)) for _ in range(2000)]
    for x, y in pairs:
        ex = gcd_example(x, y)
        a, b = max(x, y), min(x, y)
        assert ex.prompt == f"gcd({a},{b})=" and ex.answer == str(math.gcd(a, b))
        *lines, final = ex.solution.split("\n")
        for line in lines:
            g = re.fullmatch(r"(\d+)=(\d+)\*(\d+)\+(\d+)", line)
            assert g and (int(g[1]), int(g[3])) == (a, b), line
            q, r = int(g[2]), int(g[4])
            assert a == q * b + r and 0 <= r < b, line
            a, b = b, r
        assert b == 0 and final == f"#### {a}"


def test_base_conversion_lines_are_right():
    for base in range(2, 10):
        for n in list(range(0, 300)) + [10**6, 8191, 8192]:
            ex = base_example(n, base)
            assert ex.prompt == f"{n}>b{base}=" and int(ex.answer, base) == n
            assert ex.answer == "0" or not ex.answer.startswith("0")
            *lines, final = ex.solution.split("\n")
            value, remainders = n, []
            for line in lines:
                g = re.fullmatch(r"(\d+)=(\d)\*(\d+)\+(\d)", line)
                assert g and int(g[1]) == value and int(g[2]) == base, line
                value, r = int(g[3]), int(g[4])
                assert int(g[1]) == base * value + r and r < base, line
                remainders.append(g[4])
            assert value == 0 and final == "#### " + "".join(reversed(remainders))


def test_number_sorting_lines_are_right():
    rng = random.Random(0)
    for _ in range(2000):
        numbers = [rng.randint(0, 10 ** rng.randint(1, 3)) for _ in range(rng.randint(2, 9))]
        ex = sort_example(numbers)
        *lines, final = ex.solution.split("\n")
        assert len(lines) == len(numbers) - 1 and final == "#### " + ",".join(map(str, sorted(numbers)))
        rest, picks = list(numbers), []
        for line in lines:
            pick, after = line.split("|")
            assert int(pick) == min(rest), line
            rest.remove(int(pick))
            assert after == ",".join(map(str, rest)), line  # the rest, in their order
            picks.append(int(pick))
        assert picks + rest == sorted(numbers)


def test_spell_backward_lines_are_right():
    for ex in get("spell_backward").split("train", 500):
        word = ex.prompt[len("rev "):-1]
        assert ex.prompt == f"rev {word}=" and re.fullmatch(r"[a-z]{5,8}", word)
        assert ex.solution.split("\n") == list(reversed(word)) + [f"#### {word[::-1]}"]


# --- reasoning-gym --------------------------------------------------------------------------


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_gcd_matches_reasoning_gym(difficulty):
    task = get("gcd", difficulty)
    ds = task.rg_dataset()
    for ex in task.split("test"):
        entry = ds[ex.meta["rg_index"]]
        a, b = entry["metadata"]["numbers"]
        assert ex.prompt == f"gcd({max(a, b)},{min(a, b)})="
        assert ex.answer == entry["answer"] == str(math.gcd(a, b))
        assert task.config.min_value <= min(a, b) and max(a, b) <= task.config.max_value
        assert ds.score_answer(extract_answer(ex.solution), entry) == 1.0
        assert ds.score_answer(str(int(ex.answer) + 1), entry) < 1.0
    # reasoning-gym favours a gcd above 1 (it redraws up to three times), so they are common
    assert sum(ex.answer != "1" for ex in task.split("test")) > 100


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_spell_backward_matches_reasoning_gym(difficulty):
    task = get("spell_backward", difficulty)
    ds = task.rg_dataset()
    c = task.config
    for ex in task.split("test"):
        entry = ds[ex.meta["rg_index"]]
        word = entry["metadata"]["word"]
        assert ex.prompt == f"rev {word}=" and c.min_len <= len(word) <= c.max_len
        assert ex.answer == entry["answer"] and ds.score_answer(extract_answer(ex.solution), entry) == 1.0
        # reasoning-gym gives a wrong answer with a right prefix partial credit; ours gives none
        wrong = ex.answer[:-1] + ("a" if ex.answer[-1] != "a" else "b")
        assert ds.score_answer(wrong, entry) > 0.0 and task.score(f"#### {wrong}", ex) == 0.0
        assert task.score(f"#### {ex.answer.upper()}", ex) == 0.0
    # words that are not all lowercase a-z are skipped, and few are
    train = task.split("train", 500)
    assert train[-1].meta["rg_index"] < 1.25 * 500 / (1 - c.holdout_frac)


# --- registry and config validation -----------------------------------------------------------


def test_registered_with_three_presets_medium_default():
    assert set(NEW) <= set(tasks.names())
    for name in NEW:
        assert set(tasks.difficulties(name)) == {"easy", "medium", "hard"}
        assert tasks.get(name).config == tasks.get(name, difficulty="medium").config
        assert tasks.get(name).config.version == 1


@pytest.mark.parametrize("name, params, match", [
    ("multiplication", dict(min_digits=0), r"min_digits must be >= 1, got 0"),
    ("multiplication", dict(max_digits=19), r"max_digits must be <= 18, got 19"),
    ("multiplication", dict(min_digits=5, max_digits=3), r"min_digits \(5\) must be <= max_digits \(3\)"),
    ("multiplication", dict(max_multiplier=10), r"max_multiplier must be <= 9, got 10"),
    ("multiplication", dict(min_multiplier=0), r"min_multiplier must be >= 1, got 0"),
    ("multiplication", dict(min_multiplier=8, max_multiplier=3), r"min_multiplier \(8\) must be <= max_multiplier"),
    ("multiplication", dict(max_digits="4"), r"max_digits must be an int, got '4'"),
    ("gcd", dict(min_value=0), r"min_value must be >= 1, got 0"),
    ("gcd", dict(max_value=10**6 + 1), r"max_value must be <= 1000000"),
    ("gcd", dict(min_value=50, max_value=50), r"max_value \(50\) must be > min_value \(50\)"),
    ("gcd", dict(max_value=99.0), r"max_value must be an int"),
    ("base_conversion", dict(base=10), r"base must be <= 9, got 10"),
    ("base_conversion", dict(base=1), r"base must be >= 2, got 1"),
    ("base_conversion", dict(min_value=-1), r"min_value must be >= 0, got -1"),
    ("base_conversion", dict(min_value=10, max_value=5), r"min_value \(10\) must be <= max_value \(5\)"),
    ("base_conversion", dict(max_value=10**7), r"max_value must be <= 1000000"),
    ("number_sorting", dict(min_numbers=1), r"min_numbers must be >= 2, got 1"),
    ("number_sorting", dict(max_numbers=21), r"max_numbers must be <= 20, got 21"),
    ("number_sorting", dict(min_numbers=7, max_numbers=6), r"min_numbers \(7\) must be <= max_numbers \(6\)"),
    ("number_sorting", dict(max_digits=0), r"max_digits must be >= 1, got 0"),
    ("number_sorting", dict(max_digits=7), r"max_digits must be <= 6, got 7"),
    ("number_sorting", dict(max_numbers=15, max_digits=6), r"max_numbers must be <= 14 with max_digits 6"),
    ("spell_backward", dict(min_len=2), r"min_len must be >= 3, got 2"),
    ("spell_backward", dict(max_len=11), r"max_len must be <= 10, got 11"),
    ("spell_backward", dict(min_len=9, max_len=8), r"min_len \(9\) must be <= max_len \(8\)"),
    ("spell_backward", dict(min_len=True), r"min_len must be an int"),
])
def test_invalid_values_raise(name, params, match):
    with pytest.raises(ValueError, match=match):
        tasks.get(name, **params)


def test_number_sorting_answers_fit_the_answer_limit():
    for digits in range(1, 7):
        n = most_numbers(digits)
        longest = ",".join([str(10**digits - 1)] * n)
        assert extract_answer(f"#### {longest}") == longest
        task = tasks.get("number_sorting", min_numbers=n, max_numbers=n, max_digits=digits)
        assert task.ood().config.max_numbers == n
