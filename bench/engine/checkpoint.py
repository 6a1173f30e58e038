"""Resume checkpoints: the whole trainer state every N steps, so `bench run --resume` continues an
interrupted run with the results it would have had (bit-identical on CPU).

    results/live/<run_id>/checkpoint.pt     torch.save of the state (loaded with weights_only=True)
    results/live/<run_id>/checkpoint.json   step, run id, config, interval: readable without torch

Both are written to a temp name and renamed, the .pt first: a kill at any point leaves the last
whole checkpoint (the .json may lag the .pt by one save; resume trusts the .pt's own step). Only
the latest checkpoint is kept, and the live directory goes when the run's record is written.

What a checkpoint holds (Trainer.state_dict): policy weights and AdamW state, the critic's and its
optimizer's, the behaviour-policy ring (stale rollouts), the ledger, the step, the prompt order
(generator state and queue), the rows so far, the callbacks' state (pending evaluation fractions),
torch's and Python's RNG states, and the wall time spent. Not held: the warm start and the
reference model (the warm start, reloaded from the cache or the model directory), the rollout
backend (re-synced from the restored weights), the lr (a function of the step and the budget spent,
set before every step). Rollouts are seeded from (seed, step), so nothing else carries over.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from bench import results

STATE = "checkpoint.pt"
INFO = "checkpoint.json"
# execution settings a resumed run may change (they never change a number on one device); the rest
# of the canonical config, device included, must equal the checkpoint's
FREE_KEYS = ("threads", "tags")


def paths(root: Path, run_id: str) -> tuple[Path, Path]:
    d = results.live_dir(root, run_id)
    return d / STATE, d / INFO


def save(root: Path, run_id: str, state: dict, info: dict) -> Path:
    """Write state (.pt) then info (.json), each atomically."""
    pt, js = paths(root, run_id)
    pt.parent.mkdir(parents=True, exist_ok=True)
    tmp = pt.with_name(pt.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, pt)
    tmp = js.with_name(js.name + ".tmp")
    tmp.write_text(json.dumps(info, indent=2, sort_keys=True, default=str))
    os.replace(tmp, js)
    return pt


def info(root: Path, run_id: str) -> dict | None:
    """The checkpoint's info (step, config, checkpoint_every), or None when the run has no whole one."""
    pt, js = paths(root, run_id)
    if not pt.is_file():
        return None
    try:
        return json.loads(js.read_text())
    except (OSError, ValueError):
        return None


def load(root: Path, run_id: str, device: str) -> dict:
    pt, _ = paths(root, run_id)
    return torch.load(pt, map_location=device, weights_only=True)


def _flatten(d, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_diff(saved: dict, wanted: dict) -> list[str]:
    """'path: saved -> wanted' for every canonical-config field that differs (FREE_KEYS aside)."""
    a = _flatten({k: v for k, v in saved.items() if k not in FREE_KEYS})
    b = _flatten({k: v for k, v in wanted.items() if k not in FREE_KEYS})
    return [f"{k}: {a.get(k, '(unset)')!r} in the checkpoint, {b.get(k, '(unset)')!r} now"
            for k in sorted(set(a) | set(b)) if a.get(k, "(unset)") != b.get(k, "(unset)")]


def similar(root: Path, cfg) -> list[tuple[str, dict]]:
    """Checkpoints of other runs with cfg's recipe, task, scale and seed: (run_id, info), newest first.
    What a user asking to resume with a changed --set most likely meant."""
    out = []
    for js in (Path(root) / "live").glob(f"*/{INFO}"):
        run_id = js.parent.name
        if run_id == cfg.run_id:
            continue
        i = info(root, run_id)
        c = (i or {}).get("config") or {}
        if c.get("recipe", {}).get("name") == cfg.recipe.name and c.get("task") == cfg.task \
                and c.get("scale") == cfg.scale and c.get("seed") == cfg.seed:
            out.append((js.stat().st_mtime, run_id, i))
    return [(r, i) for _, r, i in sorted(out, key=lambda t: t[0], reverse=True)]


def resume_problem(root: Path, cfg) -> str | None:
    """None when run cfg can resume from its checkpoint; else why not, in one line."""
    i = info(root, cfg.run_id)
    if i is None:
        msg = f"nothing to resume for run {cfg.run_id}: no checkpoint in {results.live_dir(root, cfg.run_id)}"
        near = similar(root, cfg)
        if near:
            run_id, other = near[0]
            diff = config_diff(other["config"], cfg.to_dict())
            msg += (f"; run {run_id} (same recipe, task, scale and seed) has one at step {other['step']}, but its config "
                    f"differs: {'; '.join(diff[:4])}{' ...' if len(diff) > 4 else ''}")
        else:
            msg += " (a run saves them with --checkpoint-every N; run without --resume to start it)"
        return msg
    diff = config_diff(i["config"], cfg.to_dict())
    if diff:
        return (f"cannot resume run {cfg.run_id}: the checkpoint at step {i['step']} was saved with a different config: "
                f"{'; '.join(diff[:4])}{' ...' if len(diff) > 4 else ''} (resume with the same settings, or run "
                "without --resume to start over)")
    return None
