"""lm-eval over exported bench tasks: exact_match equals bench's own greedy held-out accuracy on the
same checkpoint, response for response; bad task names list the available ones."""
import json

import polars as pl
import pytest
import torch

import algorithms
from bench import lmeval, models, tasks
from bench.cli import main
from bench.config import Budget, EvalSchedule, RunConfig, TrainConfig
from bench.engine.rollout import NativeBackend, SamplingParams
from bench.harness import worker
from bench.tasks import Example
from bench.warmstart import WarmStartConfig, warm_start

# 200 SFT steps of 32: held-out greedy accuracy above 0 (~0.06) on addition/easy at the nano scale,
# so equality is tested on right and wrong answers alike (a 150 × 64 warm start solves none).
WS = WarmStartConfig(steps=200, batch_size=32, eval_examples=100)
EASY = {"difficulty": "easy"}


@pytest.fixture(scope="module")
def ws(bench_cache):
    torch.set_num_threads(1)
    return warm_start(tasks.get("addition", **EASY), models.get("nano"), WS)


def test_exact_match_equals_bench_greedy_accuracy_response_for_response(ws, tmp_path, capsys):
    assert 0 < ws.accuracy < 1
    assert main(["eval", str(ws.path), "--results", str(tmp_path), "--log-samples", "--batch-size", "32"]) == 0
    rec_path = capsys.readouterr().out.strip().splitlines()[-1].split("results: ")[1]
    rec = json.loads(open(rec_path).read())
    (name,) = rec["tasks"]
    assert rec["results"][name]["exact_match,none"] == ws.accuracy  # bench's evaluate() at warm-start time
    assert rec["limit"] == WS.eval_examples
    # the same texts: bench's greedy decode (native backend, batch 256) against lm-eval's HF generate (batch 32)
    task = tasks.get("addition", **EASY)
    policy = ws.load()
    examples = task.split("test")[: WS.eval_examples]
    g = NativeBackend(policy.model, policy.pad_id, policy.eos_id).generate(
        policy.encode_prompts([e.prompt for e in examples]), SamplingParams(task.max_new_tokens, greedy=True))
    texts = policy.decode(g.tokens, g.mask)
    samples = sorted(rec["samples"][name], key=lambda s: s["doc_id"])
    assert [s["resps"][0][0] for s in samples] == texts
    assert [s["exact_match"] for s in samples] == [task.score(t, e) for t, e in zip(texts, examples)]
    prompt = samples[0]["arguments"][0][0]
    assert prompt == f"<|user|>{examples[0].prompt}\n<|assistant|>"  # the chat template, as encode_prompts


def test_bench_eval_of_a_run_equals_its_final_greedy_eval(ws, bench_cache, tmp_path):
    cfg = RunConfig(recipe=algorithms.get("grpo"), task="addition", task_params=EASY, scale="nano",
                    budget=Budget.parse("1steps"), train=TrainConfig(prompts_per_step=4, group_size=4, max_new_tokens=40),
                    eval=EvalSchedule(every=1.0, n_examples=40, k=0), warmstart=WS, threads=1)
    res = worker.trainer(cfg, root=tmp_path, save_checkpoint=True).run()
    assert res.status == "finished"
    rec = lmeval.evaluate(cfg.run_id, root=tmp_path, batch_size=16)
    final = pl.read_parquet(res.path / "evals.parquet")["eval/acc_greedy"][-1]
    (name,) = rec["tasks"]
    assert rec["results"][name]["exact_match,none"] == final
    assert rec["limit"] == 40 and rec["gen_kwargs"] == {"max_gen_toks": 40}  # the run's cap, not the task's 48
    assert rec["path"].startswith(str(res.path / "lmeval"))


def test_export_names_files_and_verifier(tmp_path):
    default = tasks.get("addition")
    assert lmeval.export_task(default, tmp_path) == "bench_addition"
    easy = lmeval.export_task(tasks.get("addition", **EASY), tmp_path)
    assert easy.startswith("bench_addition_") and easy != "bench_addition"
    tdir = lmeval.tasks_dir(tmp_path)
    lines = (tdir / "bench_addition.jsonl").read_text().splitlines()
    assert len(lines) == default.config.test_size
    assert json.loads(lines[0])["question"] == default.split("test")[0].prompt
    yaml = (tdir / "bench_addition.yaml").read_text()
    assert f"max_gen_toks: {default.max_new_tokens}" in yaml and "until: []" in yaml
    assert (tdir / lmeval.SCORER).is_file()
    # process_results is the task's verifier: formats an exact string match would reject score 1
    doc = json.loads(lines[0])
    gold = int(doc["answer"])
    for text, want in ((f"#### {gold}", 1.0), (f"x\n#### +{gold}", 1.0), (f"#### {gold + 1}", 0.0), (str(gold), 0.0)):
        assert lmeval.process_results(doc, [text]) == {"exact_match": want}
    # countdown: any valid expression is right, not just the gold one
    cd = tasks.get("countdown", test_size=5)
    cdoc = json.loads((tdir / f"{lmeval.export_task(cd, tmp_path)}.jsonl").read_text().splitlines()[0])
    ex = Example(cdoc["question"], cdoc["answer"], cdoc["solution"], json.loads(cdoc["meta"]))
    assert lmeval.process_results(cdoc, [f"#### {cdoc['answer']}"])["exact_match"] == cd.score(f"#### {cdoc['answer']}", ex) == 1.0


def test_unknown_task_lists_the_available_ones(ws, tmp_path, capsys):
    assert main(["eval", str(ws.path), "--results", str(tmp_path), "--tasks", "bench_adition"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "unknown lm-eval task(s) 'bench_adition'" in err and "did you mean 'bench_addition'" in err
    for n in ("bench_addition", "bench_chain_sum", "bench_countdown"):
        assert n in err


def test_bad_targets_one_clear_line(tmp_path, capsys):
    assert main(["eval", "nosuchrun", "--results", str(tmp_path)]) == 2
    assert "neither a run id" in capsys.readouterr().err
    (tmp_path / "runs" / "abc").mkdir(parents=True)
    (tmp_path / "runs" / "abc" / "run.json").write_text("{}")
    assert main(["eval", "abc", "--results", str(tmp_path)]) == 2
    assert "--save-checkpoint" in capsys.readouterr().err


def test_rollout_vllm_without_vllm_says_how_to_install(capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec  # hide vllm, so the test runs in .venv-vllm too
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    rc = main(["run", "--recipe", "grpo", "--task", "addition", "--scale", "nano", "--budget", "1steps",
               "--rollout", "vllm"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "make setup-vllm" in err[0] and ".venv-vllm/bin/bench run ... --rollout vllm" in err[0]
