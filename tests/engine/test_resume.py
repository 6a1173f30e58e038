"""Live rows, resume checkpoints and `bench run --resume`: a run killed with SIGKILL and resumed
ends with the tables of an uninterrupted run (bit-identical on CPU, wall times aside). Bitwise
because both sides run the same kernels on the same shapes: the same process or, across processes,
the same thread count (`threads=1`), since how a GEMM splits its work among threads sets its
summation order."""
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from bench import cli, results
from bench.engine import checkpoint
from bench.engine.callbacks import Callback
from bench.harness import worker

sys.path.insert(0, str(Path(__file__).parent))
from test_trainer import TASK_PARAMS, WS, make_cfg

REPO = Path(__file__).resolve().parents[2]


class Interrupt(Callback):
    """Raise `exc` after step k's row is streamed, before its checkpoint (the last callback)."""

    def __init__(self, k: int, exc: type[BaseException] = KeyboardInterrupt):
        self.k, self.exc = k, exc

    def on_step(self, trainer, row):
        if row["step"] == self.k:
            raise self.exc(f"interrupted at step {self.k}")


def assert_same_record(a: Path, b: Path) -> None:
    """steps/evals tables equal in every column but wall times; samples equal; same ledger totals."""
    for name in ("steps.parquet", "evals.parquet"):
        x, y = (pl.read_parquet(d / name) for d in (a, b))
        assert x.columns == y.columns
        keep = [c for c in x.columns if not c.startswith("time/")]
        assert_frame_equal(x.select(keep), y.select(keep), check_exact=True)
    assert (a / "samples.jsonl").read_text() == (b / "samples.jsonl").read_text()
    ma, mb = (json.loads((d / "run.json").read_text()) for d in (a, b))
    for k in ("status", "steps_done", "flops_spent", "gen_tokens", "train_tokens", "config", "run_id"):
        assert ma[k] == mb[k], k


CASES = [  # (recipe, overrides, how the first attempt ends): the ring of stale policies, a critic, refills
    ("grpo", {"rollout.lag": 2}, KeyboardInterrupt),
    ("ppo", {}, RuntimeError),  # a crash: a `failed` record, the checkpoint kept for --resume
    ("dapo", {}, KeyboardInterrupt),
    ("vapo", {"recipe.critic.pretrain_steps": 1}, KeyboardInterrupt),
]


@pytest.mark.parametrize("name,over,exc", CASES, ids=[c[0] for c in CASES])
def test_resume_in_process_equals_uninterrupted(name, over, exc, bench_cache, tmp_path):
    cfg = make_cfg(name, budget="5steps", **over)
    ref = worker.trainer(cfg, root=tmp_path / "a").run()
    with pytest.raises(exc):
        worker.trainer(cfg, root=tmp_path / "b", checkpoint_every=1, callbacks=[Interrupt(4, exc)]).run()
    live = results.live_dir(tmp_path / "b", cfg.run_id)
    assert len(results.read_jsonl(live / "steps.jsonl")) == 4  # step 4 streamed, its checkpoint not written
    assert checkpoint.info(tmp_path / "b", cfg.run_id)["step"] == 3
    if exc is RuntimeError:
        assert json.loads((results.run_dir(tmp_path / "b", cfg.run_id) / "run.json").read_text())["status"] == "failed"
    else:
        assert not results.has_record(tmp_path / "b", cfg.run_id)
    res = worker.trainer(cfg, root=tmp_path / "b", checkpoint_every=1, resume=True).run()
    assert res.status == "finished"
    assert_same_record(ref.path, res.path)
    assert json.loads((res.path / "run.json").read_text())["resumed_from"] == [3]
    assert not live.exists()


def test_rows_stream_while_the_run_trains_and_the_record_is_unchanged(bench_cache, tmp_path):
    seen = {}

    class Peek(Callback):
        def on_step(self, trainer, row):
            if row["step"] == 2:
                seen["steps"] = results.read_jsonl(results.live_dir(trainer.root, trainer.cfg.run_id) / "steps.jsonl")
                seen["rows"] = [dict(r) for r in trainer.steps]

    cfg = make_cfg("grpo", budget="3steps")
    res = worker.trainer(cfg, root=tmp_path, callbacks=[Peek()]).run()
    assert [r["step"] for r in seen["steps"]] == [1, 2]
    for disk, mem in zip(seen["steps"], seen["rows"]):  # NaN is written as null (standard JSON)
        assert disk == {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in mem.items()}
    # the finished record: the tables as before, plus samples.jsonl; no live directory left
    assert sorted(p.name for p in res.path.iterdir()) == sorted([*results.RECORD_FILES, "samples.jsonl"])
    assert not results.live_dir(tmp_path, cfg.run_id).exists()
    assert pl.read_parquet(res.path / "steps.parquet").columns == list(results.STEP_SCHEMA)
    evals = pl.read_parquet(res.path / "evals.parquet")
    samples = results.read_jsonl(res.path / "samples.jsonl")
    assert {tuple(sorted(s)) for s in samples} == {("answer", "completion", "correct", "fraction", "index", "prompt", "step")}
    for ev in evals.iter_rows(named=True):  # eval.n_examples = 8 = the samples kept: their verdicts are the accuracy
        mine = [s for s in samples if s["step"] == ev["step"] and s["fraction"] == ev["fraction"]]
        assert len(mine) == 8
        assert sum(s["correct"] for s in mine) / 8 == ev["eval/acc_greedy"]


def test_an_interrupted_run_is_not_a_record_and_a_suite_worker_resumes_it(bench_cache, tmp_path):
    cfg = make_cfg("grpo", budget="4steps")
    ref = worker.trainer(cfg, root=tmp_path / "a").run()
    root = tmp_path / "b"
    with pytest.raises(KeyboardInterrupt):
        worker.trainer(cfg, root=root, checkpoint_every=2, callbacks=[Interrupt(3)]).run()
    assert not results.is_finished(root, cfg.run_id) and results.problems(root) == []
    assert results.scan(root)["runs"].collect().height == 0
    (out,) = worker.run_job([cfg.to_dict()], str(root))
    assert out["status"] == "finished" and out["resumed_from"] == 2
    assert_same_record(ref.path, results.run_dir(root, cfg.run_id))


# ---------------------------------------------------------------- the command line, with SIGKILL
SETS = [f"warmstart.steps={WS.steps}", f"warmstart.eval_examples={WS.eval_examples}",
        *[f"task_params.{k}={v}" for k, v in TASK_PARAMS.items()],
        "train.prompts_per_step=4", "train.group_size=4", "train.micro_batch_size=8",
        "eval.every=0.25", "eval.n_examples=8", "eval.k=2", "threads=1"]


def _args(budget: str, root: Path, *extra: str) -> list[str]:
    return ["run", "--recipe", "grpo", "--task", "addition", "--scale", "nano", "--budget", budget,
            "--results", str(root), "--quiet", *[a for s in SETS for a in ("--set", s)], *extra]


@pytest.fixture
def keep_torch_threads():
    """A run with `threads=1` sets this process's torch threads: restore them for the tests after."""
    import torch

    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def test_sigkill_then_resume_gives_the_uninterrupted_tables(bench_cache, tmp_path, capsys, keep_torch_threads):
    cfg = make_cfg("grpo", budget="12steps", **{"eval.every": 0.25, "threads": 1})  # as SETS: the subprocess's threads
    ref = worker.trainer(cfg, root=tmp_path / "a").run()  # also caches the warm start for the subprocess
    root = tmp_path / "b"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", *_args("12steps", root, "--checkpoint-every", "1")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while (checkpoint.info(root, cfg.run_id) or {}).get("step", 0) < 3:
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "no checkpoint for step 3 within 120 s"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert cfg.run_id in proc.stdout.read()  # the command line built the same config (same run id)
    killed_at = checkpoint.info(root, cfg.run_id)["step"]
    assert 3 <= killed_at < 12 and not results.has_record(root, cfg.run_id)

    assert cli.main(_args("12steps", root, "--resume")) == 0
    out = capsys.readouterr().out
    assert f"resuming from step {killed_at}" in out and "status: finished" in out
    d = results.run_dir(root, cfg.run_id)
    assert_same_record(ref.path, d)
    assert json.loads((d / "run.json").read_text())["resumed_from"] == [killed_at]
    assert not results.live_dir(root, cfg.run_id).exists()
    # finished: --resume has nothing to do and says so (exit 0, as any rerun of a recorded run)
    assert cli.main(_args("12steps", root, "--resume")) == 0
    assert "nothing to resume" in capsys.readouterr().out


def test_resume_refusals_are_one_line_exit_2(bench_cache, tmp_path, capsys, keep_torch_threads):
    root = tmp_path
    assert cli.main(_args("4steps", root, "--resume")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nothing to resume" in err and "--checkpoint-every" in err

    cfg = make_cfg("grpo", budget="4steps", **{"eval.every": 0.25})
    with pytest.raises(KeyboardInterrupt):
        worker.trainer(cfg, root=root, checkpoint_every=1, callbacks=[Interrupt(3)]).run()
    capsys.readouterr()  # the run's own output (a warm start trained here writes progress bars), not the CLI's
    # another --set: another run id, with no checkpoint; the error names the field that differs
    assert cli.main(_args("4steps", root, "--resume", "--set", "train.lr=0.5")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"run {cfg.run_id}" in err and "train.lr" in err

    # the same run id, a checkpoint saved under another config (an edited or foreign file)
    js = checkpoint.paths(root, cfg.run_id)[1]
    info = json.loads(js.read_text())
    info["config"]["train"]["lr"] = 0.5
    js.write_text(json.dumps(info))
    assert cli.main(_args("4steps", root, "--resume")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "different config" in err and "train.lr" in err

    # no --resume: start over, saying the checkpoint is discarded
    assert cli.main(_args("4steps", root)) == 0
    assert "starting over" in capsys.readouterr().err
    assert results.is_finished(root, cfg.run_id) and not results.live_dir(root, cfg.run_id).exists()
