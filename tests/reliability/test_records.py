"""Failure records tell the truth (issue 15 items 3-5): set-up failures are `failed` records with
the real cause; NaN/inf in weights or sampling is `diverged` with the step; `bench run` takes the
run lock and skips recorded runs; corrupt records are named, skipped and redone; a suite never
writes an empty report over a good one."""
import json
import os

import polars as pl
import pytest
import torch

import algorithms
from bench import report, results, suite as suites
from bench.cli import main
from bench.config import Budget, EvalSchedule, RunConfig, TrainConfig
from bench.engine.trainer import Trainer
from bench.harness import worker
from bench.harness.locks import run_lock
from bench.warmstart import WarmStartConfig

WS = WarmStartConfig(steps=5, batch_size=8, eval_examples=8)
TINY = ["--recipe", "grpo", "--task", "addition", "--scale", "nano", "--budget", "1steps", "--quiet",
        "--threads", "1", "--set", "warmstart.steps=5", "--set", "warmstart.batch_size=8",
        "--set", "warmstart.eval_examples=8", "--set", "eval.n_examples=8", "--set", "eval.k=0",
        "--set", "train.prompts_per_step=2", "--set", "train.group_size=2"]


def tiny_cfg(**kw) -> RunConfig:
    return RunConfig(recipe=algorithms.get("grpo"), task="addition", scale="nano", budget=Budget.parse("2steps"),
                     train=TrainConfig(prompts_per_step=2, group_size=2, max_new_tokens=16),
                     eval=EvalSchedule(every=1.0, n_examples=8, k=0), warmstart=WS, threads=1, **kw)


def record(root, run_id) -> dict:
    return json.loads((results.run_dir(root, run_id) / "run.json").read_text())


def one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---------------------------------------------------------------- item 3: set-up failures
@pytest.mark.parametrize("extra, cause, code", [
    (["--set", "task_params.difficulty=impossible"], "unknown difficulty", 2),
    (["--seed", str(2**70)], "seed", 2),  # "overflow" from torch, or the config layer's range error
    (["--device", "cuda"], "cuda", 2),  # set-up failures are bad input: exit 2; a crash while training: 1
])
def test_setup_failure_is_a_failed_record_with_the_real_cause(extra, cause, code, bench_cache, tmp_path, capsys):
    if extra[0] == "--device" and torch.cuda.is_available():
        pytest.skip("this torch has CUDA")
    rc = main(["run", *TINY, *extra, "--results", str(tmp_path)])
    line = one_line(capsys.readouterr().err)
    assert cause in line.lower() and "max_new" not in line  # the real cause, not the failure path's own error
    metas = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/run.json")]
    if not metas:  # refused before any work by config validation (issue 15 item 2): also the truth
        assert rc == 2
        return
    (meta,) = metas
    assert rc == code
    assert meta["status"] == "failed" and cause in meta["reason"].lower() and "set-up" in meta["reason"]
    assert "Traceback" in meta["traceback"] and meta["max_new_tokens"] is None
    assert str(tmp_path / "runs" / meta["run_id"] / "run.json") in line
    # a suite sees a record, not a pending run: it does not retry it forever (only --retry-failed does)
    cfg = RunConfig.from_dict(meta["config"])
    assert results.is_finished(tmp_path, cfg.run_id)
    assert worker.run_one(cfg, tmp_path).status == "done"


# ---------------------------------------------------------------- item 3: NaN anywhere is diverged
def _poison_after_step(trainer: Trainer):
    real = trainer.opt.step

    def step(*a, **k):
        out = real(*a, **k)
        with torch.no_grad():
            next(trainer.policy.model.parameters()).view(-1)[0] = float("nan")
        return out
    trainer.opt.step = step


def _poison_now(trainer: Trainer):
    with torch.no_grad():  # NaN logits from here on: the first rollout samples from NaN probabilities
        for p in trainer.policy.model.parameters():
            p.fill_(float("nan"))


@pytest.mark.parametrize("poison, reason", [(_poison_after_step, "non-finite policy weights after the optimizer step"),
                                            (_poison_now, "non-finite sampling probabilities")])
def test_nan_weights_or_sampling_is_diverged_with_the_step(poison, reason, bench_cache, tmp_path):
    trainer = None

    def on_eval(row):  # after the warm start's evaluation, before step 1
        if row["fraction"] == 0.0:
            poison(trainer)
    trainer = worker.trainer(tiny_cfg(), root=tmp_path, on_eval=on_eval)
    res = trainer.run()
    meta = record(tmp_path, res.run_id)
    assert res.status == meta["status"] == "diverged"
    assert meta["reason"].startswith("step 1: " + reason) and meta["diverged_step"] == 1


# ---------------------------------------------------------------- item 4: lock, skip, --force
def test_bench_run_takes_the_lock_and_skips_a_recorded_run(bench_cache, tmp_path, capsys):
    argv = ["run", *TINY, "--results", str(tmp_path)]
    assert main(argv) == 0
    (meta,) = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/run.json")]
    rid = meta["run_id"]
    path = results.run_dir(tmp_path, rid) / "run.json"
    before = path.read_bytes()
    capsys.readouterr()
    assert main(argv) == 0  # recorded: skipped, said in one line, nothing rewritten
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"run {rid} is already recorded (finished) in {results.run_dir(tmp_path, rid)}; skipped "
                   "(--force trains it again and replaces the record)"]
    assert path.read_bytes() == before
    with run_lock(tmp_path, rid, wait=False) as held:  # another process training it: refused at once
        assert held
        assert main(argv + ["--force"]) == 2
        assert "being trained by another process" in one_line(capsys.readouterr().err)
    assert path.read_bytes() == before
    assert main(argv + ["--force"]) == 0
    assert "--force" in capsys.readouterr().err
    assert json.loads(path.read_text())["wall_s"] != meta["wall_s"]  # trained again


def test_suite_never_writes_an_empty_report_over_a_good_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BENCH_REPORTS", str(tmp_path / "reports"))
    smoke = suites.load("smoke")
    good = tmp_path / "reports" / "smoke" / "report.md"
    good.parent.mkdir(parents=True)
    good.write_text("a good report\n")
    assert report.build_if_results(smoke, tmp_path / "results") is None
    assert good.read_text() == "a good report\n"
    out = capsys.readouterr().out
    assert "not written: none of the" in out and "is kept" in out


# ---------------------------------------------------------------- item 5: corrupt runs
def _fake_run(root, cfg: RunConfig, status="finished"):
    meta = {"run_id": cfg.run_id, "config_id": cfg.config_id, "recipe_name": cfg.recipe.name, "status": status,
            "config": cfg.to_dict(), "steps_done": 1}
    results.write_run(root, cfg.run_id, meta, [{"step": 1, "reward/mean": 0.5}],
                      [{"step": 1, "fraction": 1.0, "eval/acc_greedy": 0.25}])


def test_corrupt_runs_are_named_skipped_and_redone(tmp_path, monkeypatch, capsys):
    smoke = suites.load("smoke")
    good, trunc, badpq = smoke.expand()[:3]
    for c in (good, trunc, badpq):
        _fake_run(tmp_path, c)
    rj = results.run_dir(tmp_path, trunc.run_id) / "run.json"
    rj.write_text(rj.read_text()[:40])  # truncated copy
    pq = results.run_dir(tmp_path, badpq.run_id) / "evals.parquet"
    pq.write_bytes(pq.read_bytes()[:-30])  # footer cut
    warnings = []
    t = results.scan(tmp_path, warnings)
    assert t["runs"].collect()["run_id"].to_list() == [good.run_id]
    assert t["evals"].collect().height == 1
    named = dict(warnings)
    assert set(named) == {trunc.run_id, badpq.run_id} and named == dict(results.problems(tmp_path))
    assert str(rj) in named[trunc.run_id] and str(pq) in named[badpq.run_id]
    assert not results.is_finished(tmp_path, trunc.run_id) and results.is_finished(tmp_path, good.run_id)
    # bench results: the leaderboard of the others, one warning line per bad file, exit 0
    assert main(["results", "smoke", "--results", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: skipped corrupt run") == 2 and str(pq) in err
    # the report lists it in its failed section, naming the file
    from bench.report import data

    runs = data.load(smoke, tmp_path).runs
    reason = runs.filter(pl.col("run_id") == badpq.run_id)["reason"][0]
    assert str(pq) in reason and "corrupt record" in reason
    # bench suite's worker: quarantines it (kept, not deleted) and runs it again

    class FakeTrainer:
        def __init__(self, cfg, root, **options):  # options: callbacks, checkpoint_every, resume
            self.cfg, self.root = cfg, root

        def run(self):
            _fake_run(self.root, self.cfg)
            from bench.engine.trainer import RunResult
            return RunResult(self.cfg.run_id, "finished", results.run_dir(self.root, self.cfg.run_id))
    monkeypatch.setattr("bench.engine.trainer.Trainer", FakeTrainer)
    (out,) = worker.run_job([badpq.to_dict()], str(tmp_path))
    assert out["status"] == "finished" and results.is_finished(tmp_path, badpq.run_id)
    (kept,) = (tmp_path / "quarantine").iterdir()
    assert kept.name == f"{badpq.run_id}.0" and (kept / "run.json").is_file()
    assert os.path.getsize(kept / "evals.parquet") < os.path.getsize(pq)  # the damaged file, kept as it was
