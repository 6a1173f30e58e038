"""Checks made before any work: a bad task parameter, a missing device or an unwritable results
directory fails in one line before a warm start trains, not after a run has spent its budget.

Every check raises ValueError with the thing, the value and what would work.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from algorithms.errors import ConfigError, InputError
from bench.config import RunConfig


def check_device(device: str) -> None:
    """`cuda`, `cuda:N` and `mps` must exist in this torch build on this machine."""
    import torch

    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"device {device!r}: this torch ({torch.__version__}) sees no CUDA device; "
                              "use --device cpu, or a machine and torch build with CUDA")
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise ConfigError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s), "
                              f"cuda:0..cuda:{torch.cuda.device_count() - 1}")
    elif device == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("device 'mps': not available in this torch build on this machine; use --device cpu")


def check_writable(path: Path | str, what: str) -> None:
    """`path` is (or can be created as) a directory we can write files in; creates nothing."""
    path = Path(path)
    probe = path
    while not probe.exists():  # the nearest existing ancestor must be a writable directory
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        where = "is a file" if probe == path else f"cannot be created: {probe} is a file"
        raise InputError(f"{what} {path} {where}; give a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".bench-write-check.", dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise InputError(f"{what} {path} is not writable ({e.strerror} in {probe})") from None


def check_readable(path: Path | str, what: str) -> None:
    """`path` is an existing directory we can read (a results directory a command reads from)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{what} {path} does not exist")
    if not path.is_dir():
        raise InputError(f"{what} {path} is a file; give a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise InputError(f"{what} {path} is not readable")


def check_file_writable(path: Path | str, what: str) -> None:
    """`path` is a file we can write (or create): not a directory, in a writable directory."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{what} {path} is a directory; give a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{what} {path} is not writable")
    check_writable(path.parent, f"{what} {path}: its directory")


def check_task(task: str, params: dict, ood: bool = False) -> None:
    """The task builds; with `ood`, it also has a harder split (eval.ood_examples > 0 evaluates on it)."""
    from bench import tasks

    try:
        t = tasks.get(task, **params)
    except (InputError, TypeError) as e:
        raise ConfigError(f"task {task}: {e}") from None
    if ood and t.ood() is None:
        raise ConfigError(f"eval.ood_examples: task {task!r} defines no harder split (Task.ood) to evaluate on; "
                          "set eval.ood_examples = 0")


def check_scale(scale: str) -> None:
    from bench import models

    models.get(scale)  # ValueError / FileNotFoundError naming the valid scales


def check_run(cfg: RunConfig, device: str | None = None) -> None:
    """Everything about one run that can fail before it trains (the config itself is already valid).
    device: the device it will run on, when not its own (`bench suite --device`)."""
    check_task(cfg.task, cfg.task_params, ood=cfg.eval.ood_examples > 0)
    check_scale(cfg.scale)
    check_device(device or cfg.device)
    if cfg.rollout.backend == "vllm":  # one line saying how to install it
        from bench.engine.vllm_backend import check_installed

        check_installed()


def check_runs(cfgs: list[RunConfig], device: str | None = None) -> None:
    """check_run once per distinct (task, params, scale, device, backend)."""
    seen = set()
    for c in cfgs:
        key = (c.task, repr(sorted(c.task_params.items())), c.scale, device or c.device, c.rollout.backend,
               c.eval.ood_examples > 0)
        if key not in seen:
            seen.add(key)
            check_run(c, device)
