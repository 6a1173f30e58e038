"""suites/gsm8k-qwen.toml: the GPU suite for a real model. As committed it names placeholders,
and validation says in one line what the user must supply; with a model directory and GSM8K files
filled in it expands into its runs (and one of them trains a step on CPU)."""
import sys
from pathlib import Path

import datasets

from bench import cli, suite as suites
from bench.harness import worker

sys.path.insert(0, str(Path(__file__).parents[1] / "models"))
from test_pretrained_runs import gsm_file, qwen_dir  # noqa: F401  (module fixtures)

SUITE = suites.SUITES_DIR / "gsm8k-qwen.toml"
MODEL, TRAIN, TEST = ("/EDIT-ME/models/Qwen2.5-0.5B-Instruct", "/EDIT-ME/data/gsm8k/train.jsonl",
                      "/EDIT-ME/data/gsm8k/test.jsonl")


def filled(tmp_path: Path, **paths: str) -> Path:
    """The suite file under its own name in tmp_path, placeholders replaced (model=, train=, test=)."""
    text = SUITE.read_text()
    for key, placeholder in (("model", MODEL), ("train", TRAIN), ("test", TEST)):
        assert placeholder in text
        if key in paths:
            text = text.replace(placeholder, str(paths[key]))
    out = tmp_path / "gsm8k-qwen.toml"
    out.write_text(text)
    return out


def test_dry_run_names_what_the_user_must_supply(qwen_dir, tmp_path, capsys):  # noqa: F811
    assert cli.main(["suite", "gsm8k-qwen", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "gsm8k-qwen.toml: scales" in err and MODEL in err
    assert "Hugging Face model directory" in err
    # the model given, the data not yet: the missing file and what it may be (bench.suite does not
    # prefix this one with the file and key: the task raises FileNotFoundError, not ValueError)
    assert cli.main(["suite", str(filled(tmp_path, model=qwen_dir)), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"not found: {TRAIN}" in err and "save_to_disk" in err


def test_filled_in_suite_expands_and_a_run_trains(qwen_dir, gsm_file, bench_cache, tmp_path):  # noqa: F811
    test = tmp_path / "test.jsonl"
    datasets.Dataset.from_list([{"question": "Bo has 2 pens and gets 3 more. How many?",
                                 "answer": "2+3=5\n#### 5"}] * 4).to_json(test, lines=True)
    s = suites.load(filled(tmp_path, model=qwen_dir, train=gsm_file, test=test))
    assert s.name == "gsm8k-qwen" and set(s.recipes) >= {"grpo", "dr_grpo", "dapo", "rloo"}
    cfgs = s.expand()
    assert len(cfgs) == len(s.recipes) * len(s.seeds)
    for c in cfgs:
        assert c.device == "cuda" and c.rollout.backend == "vllm" and c.train.precision == "bf16"
        assert c.budget.kind == "flops" and c.task_params["test_path"] == str(test)
    # one of its runs, shrunk to seconds on CPU: the suite's task settings (system prompt, test file) work
    cfg = cfgs[0].replace(device="cpu").with_overrides(
        ["rollout.backend=native", "train.precision=fp32", "train.prompts_per_step=2", "train.group_size=2",
         "train.max_new_tokens=8", "train.micro_batch_size=4", "eval.n_examples=2", "eval.k=1"]
    ).with_values({"budget": "1steps"})
    res = worker.trainer(cfg, root=tmp_path / "results").run()
    assert res.status == "finished", res.reason
