"""Where a run's initial policy comes from: the trainer's caller says (issue 46).

The engine trains a policy it is handed; it never makes one. `Trainer(cfg, start=...)` and
`run_stack(cfgs, root, start=...)` take an `InitialPolicy`: a function of the run's SFT task, its
scale and its warm-start config that returns a `Start`, whose `load` gives the policy and whose
fields run.json records under "warmstart". Every run passes bench.warmstart.warm_start (supervised
fine-tuning on the task's worked solutions, cached), through bench/harness/worker.py's `trainer`
and `stack`; a test may pass any function that returns such a record. So this package never
imports bench.warmstart, which sits above it (it evaluates with bench/engine/evaluate.py).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from bench.config import WarmStartConfig
from bench.engine.policy import Policy
from bench.models import Scale
from bench.tasks import Task


class Start(Protocol):
    """The policy a run starts from (bench.warmstart.WarmStart is one)."""

    @property
    def path(self) -> Path:  # a transformers checkpoint directory (a critic starts from it too)
        ...

    @property
    def key(self) -> str:  # its cache key ("none": a local model used as it is)
        ...

    @property
    def accuracy(self) -> float | None:  # held-out greedy accuracy after SFT (None: no SFT)
        ...

    @property
    def sha256(self) -> str:  # of its weight files: the identity run.json records
        ...

    def load(self, device: str) -> Policy:
        """The policy, fp32 weights on `device`, with the task's prompt rendering."""
        ...


class InitialPolicy(Protocol):
    def __call__(self, task: Task, scale: Scale, cfg: WarmStartConfig, *, device: str,
                 log: Callable[[str], None]) -> Start:
        """The start for a run on `task` (the warm start's part of it) at `scale`; may train it first."""
        ...


def record(start: Start | None) -> dict | None:
    """run.json's "warmstart": which policy the run started from (None: set-up failed before one)."""
    if start is None:
        return None
    return {"key": start.key, "path": str(start.path), "accuracy": start.accuracy, "sha256": start.sha256}
