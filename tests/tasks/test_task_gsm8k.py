"""The GSM8K-format loader: errors that name the file and line, splits, math-verify scoring."""

import json
import threading
import time
from pathlib import Path

import pytest

from bench import tasks

TINY = Path(__file__).resolve().parents[1] / "data" / "gsm8k_tiny.jsonl"


def write_jsonl(path: Path, n: int, start: int = 0) -> Path:
    with path.open("w") as f:
        for i in range(start, start + n):
            f.write(json.dumps({
                "question": f"Sam has {i} apples and buys 3 bags of 4. How many apples now?",
                "answer": f"The bags hold 3*4=<<3*4=12>>12 apples.\nSam has {i}+12=<<{i}+12={i + 12}>>"
                          f"{i + 12} apples.\n#### {i + 12}",
            }) + "\n")
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("gsm8k") / "train.jsonl", 200)


def test_splits_are_disjoint_seeded_and_sized(data):
    task = tasks.get("gsm8k", path=str(data))
    train, test = task.split("train"), task.split("test")
    assert 0 < len(test) < 45 and len(train) + len(test) == 200
    assert not {e.prompt for e in train} & {e.prompt for e in test}
    again = tasks.get("gsm8k", path=str(data))
    assert again.split("train") == train and again.split("test") == test
    other = tasks.get("gsm8k", path=str(data), seed=1)
    assert {e.prompt for e in other.split("test")} != {e.prompt for e in test}
    assert task.split("test", 5) == test[:5]
    with pytest.raises(ValueError, match=f"asked for 500 test problems.*holds out {len(test)}"):
        task.split("test", 500)
    assert len(tasks.get("gsm8k", path=str(data), test_size=3).split("test")) == 3


def test_train_longer_than_the_file_repeats_in_new_orders(data):
    task = tasks.get("gsm8k", path=str(data))
    one = task.split("train")
    many = task.split("train", 3 * len(one) + 7)
    assert len(many) == 3 * len(one) + 7 and many[: len(one)] == one
    assert sorted(many[len(one): 2 * len(one)], key=lambda e: e.prompt) == sorted(one, key=lambda e: e.prompt)
    assert many[len(one): 2 * len(one)] != one


def test_separate_test_file_is_excluded_from_train(tmp_path):
    train_file = write_jsonl(tmp_path / "train.jsonl", 30)
    test_file = write_jsonl(tmp_path / "test.jsonl", 10, start=25)  # 25..29 also in train
    task = tasks.get("gsm8k", path=str(train_file), test_path=str(test_file))
    assert len(task.split("test")) == 10 and len(task.split("train")) == 25
    assert not {e.prompt for e in task.split("train")} & {e.prompt for e in task.split("test")}
    assert all(task.in_test(e.prompt) for e in task.split("test"))
    assert not any(task.in_test(e.prompt) for e in task.split("train"))


def test_solution_answer_and_steps(data):
    task = tasks.get("gsm8k", path=str(data))
    ex = task.split("train")[0]
    assert "<<" not in ex.solution and ex.solution.endswith(f"\n#### {ex.answer}")
    raw = tasks.get("gsm8k", path=str(data), strip_calculator=False).split("train")[0]
    assert "<<3*4=12>>" in raw.solution
    easy = tasks.get("gsm8k", difficulty="easy", path=str(TINY))  # at most 2 lines of work
    assert all(len(e.solution.split("\n")) <= 3 for e in easy.split("train") + easy.split("test"))
    assert len(easy.split("train")) >= 10
    assert task.max_new_tokens >= max(len(e.solution) for e in task.split("train")) + 1


def test_scoring_with_math_verify(data):
    task = tasks.get("gsm8k", path=str(data))
    ex = task.split("test")[0]
    n = int(ex.answer)
    assert task.score(ex.solution, ex) == 1.0
    for right in (f"#### {n}", f"#### {n}.0", f"#### ${n}$", f"#### \\boxed{{{n}}}", f"#### {n} apples",
                  f"work\n####  +{n} "):
        assert task.score(right, ex) == 1.0, right
    for wrong in (f"#### {n + 1}", f"#### -{n}", f"#### {n}.5", f"{n}", f"#### {n}\n#### 0"):
        assert task.score(wrong, ex) == 0.0, wrong
    for malformed in ("", "####", "#### abc", "#### \\frac{", "#### $$", "x" * 1_000_000,
                      "#### " + "9" * 1_000_000, "#### )(}{", None):
        assert task.score(malformed, ex) == 0.0


def test_answers_that_would_hang_sympy_score_zero_at_once(data):
    """Without a timeout (off the main thread there is none), sympy never finishes 10^10^10."""
    task = tasks.get("gsm8k", path=str(data))
    ex = task.split("test")[0]
    for bomb in ("10^10^10", f"{ex.answer}+0*10^10^10", "9**9**9", "$9^{9^{9^9}}$",
                 "\\binom{9999999999}{99999}", "(10^10)!", "\\Gamma(10^9)"):
        start = time.perf_counter()
        assert task.score(f"#### {bomb}", ex) == 0.0
        assert time.perf_counter() - start < 2.0, bomb


def test_scoring_works_off_the_main_thread(data):
    """math-verify's default timeouts use signal.alarm, which raises outside the main thread."""
    task = tasks.get("gsm8k", path=str(data))
    ex = task.split("test")[0]
    results = []
    thread = threading.Thread(target=lambda: results.extend(
        [task.score(f"#### ${ex.answer}$", ex), task.score(f"#### {ex.answer}.0", ex),
         task.score("#### \\frac{1}{2}", ex)]))
    thread.start()
    thread.join()
    assert results == [1.0, 1.0, 0.0]


def test_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(FileNotFoundError, match=f"not found: {missing}"):
        tasks.get("gsm8k", path=str(missing))
    with pytest.raises(FileNotFoundError, match="other.jsonl"):
        tasks.get("gsm8k", path=str(TINY), test_path=str(tmp_path / "other.jsonl"))
    with pytest.raises(ValueError, match="task 'gsm8k' needs the parameter.*path"):
        tasks.get("gsm8k")


GOOD = json.dumps({"question": "q?", "answer": "1+1=2\n#### 2"})


@pytest.mark.parametrize("bad, what", [
    ('{"question": "q?", "answer": "#### 2"', "invalid JSON"),
    ('["q?", "#### 2"]', "expected a JSON object"),
    ('{"question": "q?"}', "missing key 'answer'"),
    ('{"prompt": "q?", "answer": "#### 2"}', "missing key 'question'"),
    ('{"question": "q?", "answer": 2}', "'answer' must be a non-empty string"),
    ('{"question": "", "answer": "#### 2"}', "'question' must be a non-empty string"),
    ('{"question": "q?", "answer": "it is 2"}', "must end with a line '#### <number>'"),
    ('{"question": "q?", "answer": "#### two"}', "must end with a line '#### <number>'"),
    ('{"question": "q?", "answer": "#### 2\\nso there"}', "must end with a line '#### <number>'"),
])
def test_malformed_line_names_file_line_and_problem(tmp_path, bad, what):
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{GOOD}\n\n{GOOD}\n{bad}\n{GOOD}\n")
    with pytest.raises(ValueError) as e:
        tasks.get("gsm8k", path=str(path))
    assert str(e.value).startswith(f"{path}:4: ") and what in str(e.value)


def test_empty_split_and_changed_file_are_errors(tmp_path):
    path = write_jsonl(tmp_path / "small.jsonl", 3)
    with pytest.raises(ValueError, match="split of .*small.jsonl is empty"):
        tasks.get("gsm8k", path=str(path), holdout_frac=0.01)
    task = tasks.get("gsm8k", path=str(TINY))
    sha = task.config.data_sha256
    assert len(sha) == 64 and tasks.get("gsm8k", path=str(TINY), data_sha256=sha).config == task.config
    with pytest.raises(ValueError, match="changed"):
        tasks.get("gsm8k", path=str(TINY), data_sha256="0" * 64)


def test_shipped_example_file_loads():
    task = tasks.get("gsm8k", path=str(TINY))
    assert len(task.split("train")) + len(task.split("test")) == 40
    for ex in task.split("train") + task.split("test"):
        assert task.score(ex.solution, ex) == 1.0
