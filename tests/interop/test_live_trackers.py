"""`--report-to wandb` (offline) and `--report-to trackio` (local): a real 4-step run streams the same
scalars at the same steps as steps.parquet, read back from what each library wrote on disk: the W&B
offline run file (its record log, parsed with wandb's own protobuf) and trackio's SQLite store (its own
reader). Nothing reaches a network: W&B offline, trackio without a space or server. Both skip without
the `interop` extra (make test-interop)."""
import json
import os
import struct
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest

if "trackio" not in sys.modules:  # trackio fixes its data directory on import: a private one for the session
    os.environ["TRACKIO_DIR"] = tempfile.mkdtemp(prefix="trackio-test-")
os.environ["WANDB_MODE"] = "offline"
os.environ.setdefault("WANDB_SILENT", "true")

from bench.engine import trackers
from bench.harness import worker

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from test_trainer import make_cfg


def wandb_history(run_file: Path) -> dict[int, dict]:
    """{step: {key: value}} from a .wandb file: wandb's record log (the LevelDB log layout: 32 KiB blocks
    of records `crc32 (4) | length (2, little-endian) | type (1: full, 2: first, 3: middle, 4: last)`,
    after a 7-byte ':W&B' header), each record a wandb_internal_pb2.Record."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = run_file.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, out, parts = 7, 32768, {}, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        payload = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        parts = payload if kind in (1, 2) else parts + payload
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(parts)
            if rec.WhichOneof("record_type") == "history":
                items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
                step = items.pop("_step", rec.history.step.num)
                out.setdefault(int(step), {}).update({k: v for k, v in items.items() if not k.startswith("_")})
    return out


def check_history(history: dict[int, dict], steps: pl.DataFrame):
    assert sorted(s for s, row in history.items() if "reward/mean" in row) == [1, 2, 3, 4]
    assert sorted(s for s, row in history.items() if "eval/acc_greedy" in row) == [0, 2, 4]
    for col in ("reward/mean", "compute/flops", "kl/k3", "lr"):
        assert [history[s][col] for s in steps["step"].to_list()] == steps[col].to_list(), col


def test_wandb_offline_run_has_every_step_scalar(bench_cache, tmp_path):
    pytest.importorskip("wandb", reason="wandb is in the interop extra: make test-interop")
    cfg = make_cfg("grpo", budget="4steps")  # evaluations at 0, 50% and 100%: steps 0, 2, 4
    res = worker.trainer(cfg, root=tmp_path, callbacks=trackers.make("wandb")).run()
    files = list((tmp_path / "wandb").glob(f"offline-run-*-{cfg.run_id}/run-{cfg.run_id}.wandb"))
    assert len(files) == 1
    check_history(wandb_history(files[0]), pl.read_parquet(res.path / "steps.parquet"))


def test_trackio_local_run_has_every_step_scalar(bench_cache, tmp_path):
    pytest.importorskip("trackio", reason="trackio is in the interop extra: make test-interop")
    from trackio.sqlite_storage import SQLiteStorage

    cfg = make_cfg("grpo", budget="4steps", seed=1)
    res = worker.trainer(cfg, root=tmp_path, callbacks=trackers.make("trackio")).run()
    rows = SQLiteStorage.get_logs("grpo-bench", trackers.run_name(cfg))
    history: dict[int, dict] = {}
    for r in rows:
        history.setdefault(int(r["step"]), {}).update({k: v for k, v in r.items() if k not in ("step", "timestamp")})
    check_history(history, pl.read_parquet(res.path / "steps.parquet"))
    assert SQLiteStorage.get_run_config("grpo-bench", trackers.run_name(cfg))["recipe"]["type"] == "recipe"



def test_bench_run_report_to_wandb_writes_its_run_offline(bench_cache, tmp_path):
    """The command a user types: `bench run ... --report-to wandb` leaves one offline run under the results
    directory holding the run's step scalars."""
    pytest.importorskip("wandb", reason="wandb is in the interop extra: make test-interop")
    from bench import cli

    sets = ["task_params.difficulty=easy", "warmstart.steps=300", "warmstart.eval_examples=20", "train.prompts_per_step=4",
            "train.group_size=4",
            "train.micro_batch_size=8", "eval.every=0.5", "eval.n_examples=8", "eval.k=2"]
    rc = cli.main(["run", "--recipe", "grpo", "--task", "addition", "--scale", "nano", "--budget", "2steps",
                   "--results", str(tmp_path), "--report-to", "wandb",
                   *[a for s in sets for a in ("--set", s)]])
    assert rc == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    files = list((tmp_path / "wandb").glob(f"offline-run-*-{run_dir.name}/run-{run_dir.name}.wandb"))
    assert len(files) == 1
    history = wandb_history(files[0])
    steps = pl.read_parquet(run_dir / "steps.parquet")
    assert [history[s]["reward/mean"] for s in steps["step"].to_list()] == steps["reward/mean"].to_list()
