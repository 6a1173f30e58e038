"""Experiment trackers as callbacks: `--report-to tensorboard` (or `none`, the default).

The results tables stay the record; a tracker is a live view of the same rows. TensorBoard logs
go to results/tensorboard/<recipe>-<task>-<scale>-s<seed>-<run_id>/ (one directory per run, so
`tensorboard --logdir results/tensorboard` compares them): every finite metric of a step row at
global step = the trainer step, the evaluation metrics (eval/*) at the step they were taken, and
the run's config as text. A fresh run replaces its directory; a resumed run appends with
`purge_step` at the step after its checkpoint, so readers drop the events a killed attempt wrote
past it and every step appears once.

`--report-to wandb`: a W&B run per attempt, offline unless WANDB_MODE says otherwise (nothing leaves
the machine; `wandb sync RESULTS/wandb/offline-run-*` uploads it later), in RESULTS/wandb/, id = the run
id (a resumed run continues that id), the same scalars at the same steps and the config.
`--report-to trackio`: trackio's local SQLite store (TRACKIO_DIR, set to RESULTS/trackio unless the
environment sets it before trackio is first imported), project "grpo-bench", one run per run id (a
resume continues it). Neither sends anything over the network here: no space_id, no server, no
system-metrics thread. Both come with the `interop` extra.

A new tracker is a Callback class in TRACKERS plus the package it imports in PACKAGES.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import sys
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from algorithms.errors import InputError
from bench.engine.callbacks import Callback

if TYPE_CHECKING:
    from bench.engine.trainer import Trainer


def log_dir(root: Path, cfg) -> Path:
    """The run's TensorBoard directory (a readable name; the run id keeps it unique)."""
    scale = re.sub(r"[^A-Za-z0-9_.]+", "_", Path(cfg.scale).name or cfg.scale)
    return Path(root) / "tensorboard" / f"{cfg.recipe.name}-{cfg.task}-{scale}-s{cfg.seed}-{cfg.run_id}"


class TensorBoard(Callback):
    """Scalars per step and per evaluation through torch.utils.tensorboard.SummaryWriter."""

    def __init__(self) -> None:
        self.writer = None

    def on_start(self, trainer: Trainer) -> None:
        from torch.utils.tensorboard import SummaryWriter

        d = log_dir(trainer.root, trainer.cfg)
        if trainer.resumed_from:
            self.writer = SummaryWriter(str(d), purge_step=trainer.resumed_from[-1] + 1)
        else:
            shutil.rmtree(d, ignore_errors=True)
            self.writer = SummaryWriter(str(d))
            self.writer.add_text("config", "```\n" + json.dumps(trainer.cfg.to_dict(), indent=2) + "\n```", 0)

    def _scalars(self, row: dict, keep) -> None:
        for k, v in row.items():
            if keep(k) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                self.writer.add_scalar(k, v, global_step=row["step"])

    def on_step(self, trainer: Trainer, row: dict) -> None:
        self._scalars(row, lambda k: k != "step")
        self.writer.flush()

    def on_eval(self, trainer: Trainer, row: dict) -> None:
        self._scalars(row, lambda k: k.startswith("eval/"))  # the step's own row carries compute/*
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def scalars(row: dict, keep) -> dict[str, float]:
    """The finite numbers of a row whose key `keep` accepts (what every tracker logs)."""
    return {k: v for k, v in row.items() if keep(k) and isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v)}


def run_name(cfg) -> str:
    return log_dir(Path("."), cfg).name


class WandB(Callback):
    """Scalars per step and per evaluation through wandb, offline by default (WANDB_MODE)."""

    def __init__(self) -> None:
        self.run = None

    def on_start(self, trainer: Trainer) -> None:
        import wandb

        cfg = trainer.cfg
        d = Path(trainer.root)
        d.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "grpo-bench"), name=run_name(cfg), id=cfg.run_id,
                              dir=str(d), config=cfg.to_dict(), mode=os.environ.get("WANDB_MODE", "offline"),
                              resume="allow", group=cfg.tags.get("suite") or None, reinit="create_new")

    def on_step(self, trainer: Trainer, row: dict) -> None:
        self.run.log(scalars(row, lambda k: k != "step"), step=row["step"])

    def on_eval(self, trainer: Trainer, row: dict) -> None:  # the step's own row carries compute/*
        self.run.log(scalars(row, lambda k: k.startswith("eval/")), step=row["step"])

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None


class Trackio(Callback):
    """Scalars per step and per evaluation into trackio's local store (TRACKIO_DIR)."""

    def __init__(self) -> None:
        self.run = None

    def on_start(self, trainer: Trainer) -> None:
        if "trackio" not in sys.modules:  # trackio reads TRACKIO_DIR once, on import
            os.environ.setdefault("TRACKIO_DIR", str(Path(trainer.root).resolve() / "trackio"))
        import trackio

        cfg = trainer.cfg
        self.run = trackio.init(project="grpo-bench", name=run_name(cfg), config=cfg.to_dict(), resume="allow",
                                group=cfg.tags.get("suite") or None, auto_log_gpu=False, auto_log_cpu=False)

    def on_step(self, trainer: Trainer, row: dict) -> None:
        self.run.log(scalars(row, lambda k: k != "step"), step=row["step"])

    def on_eval(self, trainer: Trainer, row: dict) -> None:
        self.run.log(scalars(row, lambda k: k.startswith("eval/")), step=row["step"])

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None


TRACKERS = {"none": None, "tensorboard": TensorBoard, "wandb": WandB, "trackio": Trackio}
PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}  # tracker -> the module it needs
EXTRAS = {"tensorboard": "track", "wandb": "interop", "trackio": "interop"}


def check(name: str) -> str:
    """name when it is a tracker whose package is installed; else a one-line ValueError."""
    if name not in TRACKERS:
        raise InputError(f"--report-to {name!r}: unknown tracker; valid: {', '.join(TRACKERS)}")
    pkg = PACKAGES.get(name)
    if pkg and importlib.util.find_spec(pkg) is None:
        raise InputError(f"--report-to {name}: the {pkg} package is not installed "
                         f"(pip install 'grpo-bench[{EXTRAS[name]}]'); valid now: "
                         f"{', '.join(n for n in TRACKERS if not PACKAGES.get(n) or importlib.util.find_spec(PACKAGES[n]))}")
    return name


def make(name: str) -> list[Callback]:
    """The callbacks for `--report-to name` (none: no callback)."""
    cls = TRACKERS[check(name)]
    return [cls()] if cls else []
