"""Calibrated warm starts: the record of the SFT steps and lr that put a (task, scale) where RL can
show skill (`bench/calibration.json`), read when a run's config is built.

`bench calibrate` (bench/ladder.py) measures them: for each SFT lr it trains warm starts on a ladder
of step counts and records the first rung that meets the targets, with every rung it measured.

A run asks for its calibrated warm start with `warmstart.calibrated = true`: its config then takes
steps and lr from the entry that matches its task (name and every config field), scale and the
other warm-start settings (the seed aside: replicas of a calibrated warm start share its steps).
This module reads and writes the record only (no torch, no training), so the config can import it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

from bench import errors

PATH = Path(__file__).resolve().parent / "calibration.json"
# Warm-start settings an entry is matched on: every field but these (they do not change what SFT
# reaches, or they are what calibration chooses; task_params are matched as the SFT task's config).
UNMATCHED = ("steps", "lr", "seed", "eval_examples", "calibrated", "task_params")


def _task_config(task: str, params: dict) -> dict:
    from bench import tasks

    return dataclasses.asdict(tasks.get(task, **params).config) | {"name": task}


def _settings(ws) -> dict:
    return {k: v for k, v in ws.canonical().items() if k not in UNMATCHED}  # fields added later: matched once set


def match_key(task_config: dict, scale: str, ws) -> dict:
    return {"task": dict(task_config), "scale": scale, "warmstart": _settings(ws)}


_READ: dict[Path, tuple[tuple[int, int, int], list[dict]]] = {}  # path -> (file stamp, entries): one read per process


def read(path: Path | None = None) -> list[dict]:
    path = Path(path or PATH)
    try:
        st = path.stat()
    except OSError:
        return []
    if not path.is_file():
        return []
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)  # `write` replaces the file: a new inode
    if path in _READ and _READ[path][0] == stamp:
        return list(_READ[path][1])
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise errors.InputError(f"{path}: not valid JSON ({e}); restore it from git or rerun `bench calibrate`") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise errors.InputError(f"{path}: expected an object with a list 'entries'")
    _READ[path] = (stamp, list(data["entries"]))
    return data["entries"]


def lookup(task: str, task_params: dict, scale: str, ws, path: Path | None = None) -> dict:
    """The calibration entry for this run's task, scale and warm-start settings; ValueError naming
    the `bench calibrate` command to run when there is none."""
    path = Path(path or PATH)
    key = match_key(_task_config(task, task_params), scale, ws)
    for entry in read(path):
        if entry["match"] == json.loads(json.dumps(key, default=str)):
            if entry.get("status") == "not met":
                raise errors.ConfigError(f"warmstart.calibrated: the calibration of {task!r} at {scale!r} in {path.name} met no "
                                         f"target ({describe(entry)}); calibrate again (`bench calibrate --task {task} --scale "
                                         f"{scale}` with more --steps, other --lrs or an easier difficulty) or set warmstart.steps")
            return entry
    params = " ".join(f"--param {k}={v}" for k, v in sorted(task_params.items()))
    known = sorted({f"{e['match']['task']['name']}/{e['match']['scale']}" for e in read(path)})
    raise errors.ConfigError(f"warmstart.calibrated: no calibration of task {task!r} {task_params or ''} at scale {scale!r} "
                             f"with these warm-start settings in {path.name} (calibrated: {', '.join(known) or 'none'}); run "
                             f"`bench calibrate --task {task} --scale {scale}{' ' + params if params else ''}` first, or set "
                             "warmstart.steps")


def write(entry: dict, path: Path | None = None) -> None:
    """Add `entry`, replacing one with the same match; atomic, entries in a stable order."""
    path = Path(path or PATH)
    entries = [e for e in read(path) if e["match"] != entry["match"]] + [entry]
    entries.sort(key=lambda e: json.dumps(e["match"], sort_keys=True))
    blob = json.dumps({"entries": entries}, indent=1, sort_keys=True, default=str) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".calibration.", dir=Path(path).parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(blob)
    os.replace(tmp, path)
    _READ.pop(path, None)


def describe(entry: dict) -> str:
    m, c = entry["measured"], entry["criteria"]
    note = {"ok": "meets the targets", "too easy": f"pass@1 above {c['target_pass1'][1]}: raise the task's difficulty",
            "not met": "no rung met the targets: train longer (--steps), another lr (--lrs) or an easier difficulty"}
    return (f"chosen: lr {entry['lr']:g}, {entry['steps']} steps ({entry['status']}: {note[entry['status']]}); "
            f"format {m['eval/format_rate']:.3f}, pass@1 {m['eval/avg_k']:.3f}, pass@{c['k']} {m['eval/pass_k']:.3f}, "
            f"greedy {m['eval/acc_greedy']:.3f}")

