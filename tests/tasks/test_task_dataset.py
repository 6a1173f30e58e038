"""Dataset-backed tasks: every format loads through `datasets`, columns and extractors are
parameters, `\\boxed{}` answers are extracted and scored, bad files give file:line errors."""
import json
from pathlib import Path

import datasets
import pytest

from bench import tasks
from bench.tasks import answer, files

GSM = [{"question": f"Sam has {i} apples and buys {i % 7 + 2} more. How many apples now?",
        "answer": f"Sam has {i}+{i % 7 + 2}=<<{i}+{i % 7 + 2}={2 * i - i + i % 7 + 2}>>{i + i % 7 + 2} apples.\n"
                  f"#### {i + i % 7 + 2}"} for i in range(60)]
MATH = [{"problem": f"What is $\\frac{{{i}}}{{{2 * i}}} + {i}$?", "level": "Level 1",
         "solution": f"Halve first: $\\frac{{{i}}}{{{2 * i}}} = \\frac12$.\nSo the sum is "
                     f"$\\boxed{{{i}+\\frac{{1}}{{2}}}}$."} for i in range(1, 61)]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("data")
    gsm = datasets.Dataset.from_list(GSM)
    gsm.to_json(d / "gsm.jsonl", lines=True)
    gsm.to_parquet(d / "gsm.parquet")
    gsm.to_csv(d / "gsm.csv", index=False)
    gsm.to_json(d / "gsm.json", lines=False)
    gsm.save_to_disk(str(d / "gsm_disk"))
    datasets.DatasetDict({"train": gsm.select(range(45)), "test": gsm.select(range(45, 60))}).save_to_disk(
        str(d / "gsm_dict"))
    datasets.Dataset.from_list(MATH).to_parquet(d / "math.parquet")
    return d


@pytest.mark.parametrize("name", ["gsm.jsonl", "gsm.parquet", "gsm.csv", "gsm.json", "gsm_disk"])
def test_every_format_gives_the_same_task(data_dir, name):
    task = tasks.get("gsm8k", path=str(data_dir / name))
    reference = tasks.get("gsm8k", path=str(data_dir / "gsm.jsonl"))
    assert task.split("train") == reference.split("train") and task.split("test") == reference.split("test")
    assert len(task.split("train")) + len(task.split("test")) == 60
    ex = task.split("test")[0]
    assert "<<" not in ex.solution and task.score(ex.solution, ex) == 1.0
    assert len(task.config.data_sha256) == 64


def test_dataset_dict_splits(data_dir):
    task = tasks.get("gsm8k", path=str(data_dir / "gsm_dict"), test_split="test")
    assert len(task.split("train")) == 45 and len(task.split("test")) == 15
    assert {e.prompt for e in task.split("test")} == {r["question"] for r in GSM[45:]}
    with pytest.raises(ValueError, match="no split 'dev'; splits: train, test"):
        tasks.get("gsm8k", path=str(data_dir / "gsm_dict"), test_split="dev")


def test_math_boxed_answers_are_extracted_and_scored(data_dir):
    task = tasks.get("math", path=str(data_dir / "math.parquet"))
    ex = task.split("test")[0]
    i = int(ex.prompt.split("frac{")[1].split("}")[0])
    assert ex.answer == f"{i}+\\frac{{1}}{{2}}" and "\\boxed" in ex.solution
    assert task.score(ex.solution, ex) == 1.0
    assert task.score(f"so \\boxed{{{2 * i + 1}/2}}", ex) == 1.0  # equal by math-verify, not by text
    assert task.score(f"\\boxed{{{i}.5}}", ex) == 1.0
    assert task.score(f"\\boxed{{{i + 1}}}", ex) == 0.0
    assert task.score(f"the answer is {i}.5", ex) == 0.0  # no box: the extractor finds nothing
    assert task.score("\\boxed{9^{9^{9^9}}}", ex) == 0.0  # more powers than the gold: refused, fast


def test_extractors():
    assert answer.extract_boxed("a \\boxed{\\frac{1}{2}} b") == "\\frac{1}{2}"
    later = "\\boxed{1} was a slip in the second line of the work above; checking every step again from the very top, we get \\boxed{x^{2}}"
    assert answer.extract_boxed(later) == "x^{2}"
    assert answer.extract_boxed("\\boxed{3}, \\boxed{4}") == "3,4"  # math-verify joins adjacent boxes
    for none in ("no box here", "\\boxed{unclosed", "\\boxed{}", None):
        assert answer.extract_boxed(none) is None, none
    assert answer.extract_last_number("3 apples, then 1,234.5 pears.") == "1234.5"
    assert answer.extract_last_number("none") is None


def test_columns_extractor_and_bare_answers(tmp_path):
    rows = [{"q": f"{i} plus {i}?", "final": str(2 * i)} for i in range(40)]
    path = tmp_path / "bare.parquet"
    datasets.Dataset.from_list(rows).to_parquet(path)
    task = tasks.get("gsm8k", path=str(path), question="q", answer="final", extractor="last_number")
    ex = task.split("train")[0]
    assert ex.solution == ex.answer  # no worked solution: the bare answer in the extractor's format
    assert task.score(f"it is {ex.answer}", ex) == 1.0 and task.score("it is 1000", ex) == 0.0
    boxed = tasks.get("gsm8k", path=str(path), question="q", answer="final", extractor="boxed",
                      prompt_template="{question}\nPut the answer in \\boxed{}.")
    ex = boxed.split("train")[0]
    assert ex.solution == f"\\boxed{{{ex.answer}}}" and ex.prompt.endswith("Put the answer in \\boxed{}.")
    with pytest.raises(ValueError, match="no column 'question' .*columns: q, final"):
        tasks.get("gsm8k", path=str(path))
    with pytest.raises(ValueError, match="unknown extractor 'box'; choose one of: ####, boxed, last_number"):
        tasks.get("gsm8k", path=str(path), question="q", answer="final", extractor="box")


def test_bad_bytes_and_long_lines_name_file_and_line(tmp_path, monkeypatch):
    good = json.dumps(GSM[0]).encode()
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(good + b"\n" + good + b"\n" + '{"question": "caf\u00e9"}'.encode("latin-1") + b"\n")
    with pytest.raises(ValueError, match=f"^{bad}:3: not UTF-8 \\(byte 0xe9 at column 18\\)"):
        tasks.get("gsm8k", path=str(bad))
    monkeypatch.setattr(files, "MAX_LINE_BYTES", 200)
    long = tmp_path / "long.csv"
    long.write_text("question,answer\n" + "q,#### 1\n" + "x" * 300 + ",#### 2\n")
    with pytest.raises(ValueError, match=f"^{long}:3: line of 307 bytes, over the 200-byte cap"):
        tasks.get("gsm8k", path=str(long))


def test_unknown_format_and_missing_file(tmp_path):
    (tmp_path / "data.txt").write_text("hello\n")
    with pytest.raises(ValueError, match="unknown data file format '.txt'; valid: .jsonl, .json, .parquet, .csv"):
        tasks.get("gsm8k", path=str(tmp_path / "data.txt"))
    with pytest.raises(FileNotFoundError, match="dataset file not found: .*nope.parquet"):
        tasks.get("math", path=str(tmp_path / "nope.parquet"))
    (tmp_path / "plain_dir").mkdir()
    with pytest.raises(ValueError, match="not a datasets save_to_disk directory"):
        tasks.get("math", path=str(tmp_path / "plain_dir"))


def test_train_pool_is_the_whole_split_or_a_stated_cap(data_dir):
    task = tasks.get("gsm8k", path=str(data_dir / "gsm.jsonl"))
    assert task.pool() == task.split("train") and task.pool(5) == task.split("train")[:5]
    gen = tasks.get("addition")
    assert len(gen.pool()) == 4096 and gen.pool(10) == gen.pool()[:10]
