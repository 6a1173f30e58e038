"""The path a user with a Hugging Face model and a dataset takes: a locally built Qwen2 checkpoint
(tiny config, save_pretrained, tokenizer built in code), data files written through `datasets`,
`bench run --data`, no warm start by default, chat templates, weighted rewards."""
import json
import math

import datasets
import polars as pl
import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

import algorithms
from bench import cli, models, tasks, warmstart
from bench.config import Budget, EvalSchedule, RunConfig, TrainConfig
from bench.harness import worker
from bench.models import char_tokenizer

SMALL = ["--budget", "2steps", "--quiet", "--set", "train.prompts_per_step=4", "--set", "train.group_size=4",
         "--set", "train.max_new_tokens=12", "--set", "eval.n_examples=6", "--set", "eval.k=2",
         "--set", "eval.every=0.5"]


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen2-tiny")
    tok = char_tokenizer()
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                      tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                      bos_token_id=tok.bos_token_id)
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope="module")
def gsm_file(tmp_path_factory):
    rows = [{"question": f"Ann has {i} pens and gets {i % 5} more. How many?",
             "answer": f"{i}+{i % 5}={2 * i - i + i % 5}\n#### {i + i % 5}"} for i in range(50)]
    path = tmp_path_factory.mktemp("gsm") / "train.jsonl"
    datasets.Dataset.from_list(rows).to_json(path, lines=True)
    return path


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("BENCH_CACHE", str(path))
    return path


def no_sft(*args, **kwargs):
    raise AssertionError("an SFT step was taken")


def test_bench_run_gsm8k_data_on_a_local_model_without_warm_start(qwen_dir, gsm_file, cache, tmp_path, monkeypatch,
                                                                  capsys):
    monkeypatch.setattr(warmstart, "sft", no_sft)
    rc = cli.main(["run", "--recipe", "dr_grpo", "--task", "gsm8k", "--data", str(gsm_file), "--scale", str(qwen_dir),
                   "--results", str(tmp_path / "res"), *SMALL])
    out = capsys.readouterr()
    assert rc == 0, out.err
    run_dir = next((tmp_path / "res" / "runs").iterdir())
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "finished" and meta["steps_done"] == 2
    assert meta["warmstart"] == {"key": "none", "path": str(qwen_dir.resolve()), "accuracy": None,
                                 "sha256": warmstart.weights_sha256(qwen_dir)}  # the local weights, as they are
    assert meta["config"]["task_params"] == {"path": str(gsm_file)}
    assert pl.read_parquet(run_dir / "evals.parquet")["fraction"].to_list() == [0.0, 0.5, 1.0]
    steps = pl.read_parquet(run_dir / "steps.parquet")
    assert steps.height == 2 and steps["reward/correct"].to_list() == steps["acc/train"].to_list()
    # a local model: no reference copy and no KL metrics unless asked (dr_grpo has no KL term)
    assert steps["kl/k3"].is_nan().all()
    assert not (cache / "warmstart").exists() or not any((cache / "warmstart").iterdir())  # no cache copy
    # the same run through --set task_params.path= (the override used to come after the task check)
    rc = cli.main(["run", "--recipe", "dr_grpo", "--task", "gsm8k", "--set", f"task_params.path={gsm_file}",
                   "--scale", str(qwen_dir), "--results", str(tmp_path / "res2"), *SMALL,
                   "--set", "train.kl_metrics=true"])
    assert rc == 0, capsys.readouterr().err
    steps2 = pl.read_parquet(next((tmp_path / "res2" / "runs").iterdir()) / "steps.parquet")
    assert steps2["acc/train"].to_list() == steps["acc/train"].to_list()  # same run, KL logged on top
    assert steps2["kl/k3"].is_finite().all() and steps2["kl/k3"][0] == pytest.approx(0.0, abs=1e-6)


def test_bench_warmstart_dataset_task(qwen_dir, gsm_file, cache, capsys, monkeypatch):
    rc = cli.main(["warmstart", "--task", "gsm8k", "--data", str(gsm_file), "--scale", str(qwen_dir)])
    out = capsys.readouterr().out
    assert rc == 0 and "no warm start (steps 0)" in out and not cache.exists()
    # asking for SFT on a local model is still possible: 2 steps, cached
    rc = cli.main(["warmstart", "--task", "gsm8k", "--data", str(gsm_file), "--scale", str(qwen_dir), "--steps", "2",
                   "--param", "max_steps=1"])
    out = capsys.readouterr().out
    assert rc == 0 and "held-out greedy accuracy:" in out and "(trained)" in out
    assert len(list((cache / "warmstart").glob("*/config.json"))) == 1


def test_chat_template_and_system_prompt(qwen_dir, gsm_file):
    task = tasks.get("gsm8k", path=str(gsm_file), system_prompt="Be brief.")
    ws = warmstart.warm_start(task, models.get(str(qwen_dir)))
    policy = ws.load()
    text = policy.tokenizer.decode(policy.encode_prompts(["2+2?"])[0])
    assert text == "<|system|>Be brief.\n<|user|>2+2?\n<|assistant|>"  # the checkpoint's own template
    custom = tasks.get("gsm8k", path=str(gsm_file), chat_template="Q: {{ messages[-1]['content'] }}\nA:")
    policy = warmstart.warm_start(custom, models.get(str(qwen_dir))).load()
    assert policy.tokenizer.decode(policy.encode_prompts(["2+2?"])[0]) == "Q: 2+2?\nA:"


def digits_task(tmp_path):
    """Single-digit answers, read as the last number: a random model is right now and then."""
    rows = [{"question": f"Which digit comes after {i % 9} (case {i})?", "answer": str(i % 9 + 1)} for i in range(64)]
    path = tmp_path / "digits.parquet"
    datasets.Dataset.from_list(rows).to_parquet(path)
    return {"path": str(path), "extractor": "last_number"}


def test_weighted_rewards_change_the_reward_not_the_accuracy(qwen_dir, tmp_path, cache):
    base = RunConfig(recipe=algorithms.get("grpo"), task="gsm8k", task_params=digits_task(tmp_path),
                     scale=str(qwen_dir), budget=Budget.parse("1steps"), seed=3,
                     train=TrainConfig(prompts_per_step=16, group_size=8, max_new_tokens=10, temperature=1.5),
                     eval=EvalSchedule(every=1.0, n_examples=6, k=2))
    mixed = base.with_overrides(["rewards.format=0.5", "rewards.length=0.2"])
    assert mixed.rewards == {"correct": 1.0, "format": 0.5, "length": 0.2} and mixed.run_id != base.run_id
    rows = {}
    for name, cfg in (("base", base), ("mixed", mixed)):
        res = worker.trainer(cfg, root=tmp_path / name).run()
        assert res.status == "finished", res.reason
        rows[name] = pl.read_parquet(res.path / "steps.parquet").row(0, named=True)
        rows[name]["eval0"] = pl.read_parquet(res.path / "evals.parquet").row(0, named=True)["eval/acc_greedy"]
    b, m = rows["base"], rows["mixed"]
    assert 0 < b["acc/train"] < 1  # the test means something: some samples right, some wrong
    assert m["acc/train"] == b["acc/train"] == m["reward/correct"] == b["reward/correct"]
    assert m["eval0"] == b["eval0"]
    assert b["reward/mean"] == pytest.approx(b["acc/train"])  # default: the verdict alone
    expected = m["reward/correct"] + 0.5 * m["reward/format"] + 0.2 * m["reward/length"]
    assert m["reward/mean"] == pytest.approx(expected, rel=1e-5) and m["reward/mean"] != pytest.approx(b["reward/mean"])
    assert 0 < m["reward/format"] <= 1 and -1 <= m["reward/length"] < 0
    assert math.isnan(b["reward/format"])  # not in the mix: not logged


def test_default_config_keeps_its_run_id():
    """New fields (rewards, train.prompt_pool, train.kl_metrics) are left out at their defaults: this
    id was computed by the code before they existed."""
    cfg = RunConfig(recipe=algorithms.get("grpo"), task="gsm8k", task_params={"path": "x.jsonl"}, scale="nano",
                    budget=Budget.parse("10steps"))
    assert (cfg.run_id, cfg.config_id) == ("650b6bae541e", "857e50ebb2e5")
    assert cfg.with_overrides(["train.prompt_pool=100"]).run_id != cfg.run_id
    assert RunConfig.from_dict({**cfg.to_dict(), "warmstart": "none"}).warmstart.steps == 0
    with pytest.raises(ValueError, match="unknown reward function 'formt'.*did you mean 'format'"):
        cfg.with_overrides(["rewards.formt=1"])
