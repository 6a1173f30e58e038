"""`--report-to tensorboard`: event files the standard reader opens, with every step once (also
after a resume), and one-line errors for an unknown tracker."""
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from bench import cli
from bench.engine import trackers
from bench.harness import worker

sys.path.insert(0, str(Path(__file__).parent))
from test_resume import Interrupt
from test_trainer import make_cfg


def _read(d: Path) -> EventAccumulator:
    acc = EventAccumulator(str(d), size_guidance={"scalars": 0})  # 0: keep every event
    acc.Reload()
    return acc


def test_tensorboard_logs_read_back_with_every_step(bench_cache, tmp_path):
    cfg = make_cfg("grpo", budget="4steps")  # evaluations at 0, 50% and 100%: steps 0, 2, 4
    res = worker.trainer(cfg, root=tmp_path, callbacks=trackers.make("tensorboard")).run()
    d = trackers.log_dir(tmp_path, cfg)
    assert d.name == f"grpo-addition-nano-s0-{cfg.run_id}"
    acc = _read(d)
    tags = set(acc.Tags()["scalars"])
    assert {"reward/mean", "acc/train", "kl/k3", "compute/flops", "lr", "eval/acc_greedy", "eval/pass_k"} <= tags
    assert [e.step for e in acc.Scalars("reward/mean")] == [1, 2, 3, 4]
    assert [e.step for e in acc.Scalars("eval/acc_greedy")] == [0, 2, 4]
    import polars as pl

    steps = pl.read_parquet(res.path / "steps.parquet")
    assert [e.value for e in acc.Scalars("compute/flops")] == pytest.approx(steps["compute/flops"].to_list(), rel=1e-6)
    assert any(t.startswith("config") for t in acc.Tags()["tensors"])  # the config, as text


def test_tensorboard_after_resume_has_each_step_once(bench_cache, tmp_path):
    cfg = make_cfg("grpo", budget="4steps")
    with pytest.raises(KeyboardInterrupt):  # step 3 is logged, its checkpoint is not: the resume redoes it
        worker.trainer(cfg, root=tmp_path, checkpoint_every=1, callbacks=[*trackers.make("tensorboard"), Interrupt(3)]).run()
    worker.trainer(cfg, root=tmp_path, checkpoint_every=1, resume=True, callbacks=trackers.make("tensorboard")).run()
    acc = _read(trackers.log_dir(tmp_path, cfg))
    assert [e.step for e in acc.Scalars("reward/mean")] == [1, 2, 3, 4]
    assert [e.step for e in acc.Scalars("eval/acc_greedy")] == [0, 2, 4]


def test_unknown_tracker_is_one_line_naming_the_choices(tmp_path, capsys):
    rc = cli.main(["run", "--recipe", "grpo", "--task", "addition", "--scale", "nano", "--budget", "2steps",
                   "--results", str(tmp_path), "--report-to", "mlflow"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "'mlflow'" in err and "valid: none, tensorboard, wandb, trackio" in err
    with pytest.raises(ValueError, match="valid: none, tensorboard, wandb, trackio"):
        trackers.check("comet")
    assert trackers.make("none") == []
