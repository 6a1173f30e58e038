"""`bench suite NAME --dry-run`: the plan without running it, with a time estimate.

The estimate comes from a short calibration: per cell with pending runs, one recipe's engine is
set up and timed for two real training steps (the second is used: the first pays one-off costs)
and one held-out evaluation, with the threads a worker would get. Per run:

    steps  = budget / FLOPs per step   (or the budget itself for a steps budget)
    time   = set-up + steps × seconds per step + evaluations × seconds per evaluation

It is an estimate: lengths drift during training, recipes differ in cost per FLOP, critics and
ReMax baselines add passes. When a cell's warm start is not cached yet, the calibration uses the
untrained model in a throwaway cache (its completions run to the length cap, so the seconds per
step overstate; for a FLOPs budget the error largely cancels) and the SFT time is not included.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

from algorithms.serialize import flatten
from bench import models, results, tasks
from bench.config import RunConfig
from bench.harness.runner import Plan, fmt_seconds, unique_runs
from bench.suite import Suite
from bench.warmstart import cache_dir, warmstart_key


def cfg_warmstart_key(cfg: RunConfig) -> str:
    return warmstart_key(tasks.get(cfg.task, **cfg.warmstart.sft_params(cfg.task_params)), models.get(cfg.scale),
                         cfg.warmstart, cfg.device)


def key_cached(key: str) -> bool:
    return (cache_dir() / "warmstart" / key / "warmstart.json").is_file()


def warmstart_cached(cfg: RunConfig) -> bool:
    return key_cached(cfg_warmstart_key(cfg))


@contextlib.contextmanager
def set_env(name: str, value: str):
    """Set an environment variable for the block (spawned workers inherit it), then restore it."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def calibrate(cfg: RunConfig) -> dict:
    """Seconds and FLOPs of one training step and one evaluation of cfg's engine (trains nothing kept)."""
    from bench.harness.worker import quiet, trainer

    quiet()
    cached = warmstart_cached(cfg)
    with tempfile.TemporaryDirectory(prefix="bench-calibrate-") as tmp, contextlib.ExitStack() as stack:
        if not cached:
            cfg = cfg.replace(warmstart=cfg.warmstart.replace(steps=0, eval_examples=1, stop_at=None))
            stack.enter_context(set_env("BENCH_CACHE", str(Path(tmp) / "cache")))
        t = trainer(cfg, root=Path(tmp) / "results")
        t0 = time.perf_counter()
        t._setup()
        setup_s = time.perf_counter() - t0
        t._step = 0
        rows = []
        for step in (1, 2):
            t0 = time.perf_counter()
            rows.append(t.step(step))
            rows[-1]["seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        t._evaluate(0.0)
        eval_s = time.perf_counter() - t0
    last, first = rows[-1], rows[0]
    return {"seconds_per_step": last["seconds"], "flops_per_step": last["compute/flops"] - first["compute/flops"],
            "gen_tokens_per_step": last["compute/gen_tokens"] - first["compute/gen_tokens"],
            "eval_s": eval_s, "setup_s": setup_s if cached else 0.0, "warmstart_cached": cached, "recipe": cfg.recipe.name}


def estimate(cfg: RunConfig, cal: dict) -> tuple[float, float]:
    """(estimated FLOPs, estimated seconds) of one run from its cell's calibration."""
    b = cfg.budget
    per = {"flops": cal["flops_per_step"], "tokens": cal["gen_tokens_per_step"], "steps": 1.0}[b.kind]
    steps = b.value / max(per, 1e-9)
    flops = b.value if b.kind == "flops" else steps * cal["flops_per_step"]
    return flops, cal["setup_s"] + steps * cal["seconds_per_step"] + len(cfg.eval.fractions) * cal["eval_s"]


def print_plan(suite: Suite, cfgs: list[RunConfig], root: Path, plan: Plan, calibrate_time: bool = True,
               out=None) -> None:
    from bench.engine import checkpoint

    out = out or sys.stdout  # resolved per call: a default bound at import outlives a replaced stdout
    cells = [c for c in suite.cells if any(r.tags["cell"] == c.name for r in cfgs)]
    n_recipes, n_seeds = len({c.recipe.name for c in cfgs}), len({c.seed for c in cfgs})
    grid = (f"{len(cells)} cell(s) × {n_recipes} recipe(s) × {n_seeds} seed(s)"
            if len(cfgs) == len(cells) * n_recipes * n_seeds else
            ", ".join(f"{c.name}: {sum(r.tags['cell'] == c.name for r in cfgs)}" for c in cells))  # regime subsets
    n_cell_runs, cfgs = len(cfgs), unique_runs(cfgs)
    shared = f" ({n_cell_runs} cell runs, {n_cell_runs - len(cfgs)} shared by two cells)" if n_cell_runs > len(cfgs) else ""
    done = {c.run_id for c in cfgs if results.is_finished(root, c.run_id)}
    pending = [c for c in cfgs if c.run_id not in done]
    print(f"suite {suite.name} ({suite.path}): {len(cfgs)} runs{shared} = {grid}; "
          f"{len(done)} finished, {len(pending)} pending", file=out)
    if suite.description:
        print(f"  {suite.description}", file=out)
    print(f"results: {Path(root).resolve()}", file=out)
    print(f"execution: {plan.executor}, {plan.workers} worker(s) × {plan.threads} thread(s), device {plan.device}; "
          f"{'stacks of up to ' + str(plan.stack) + ' runs' if plan.stack > 1 else 'runs one at a time'} "
          f"({plan.stack_from})", file=out)
    fracs = ", ".join(f"{f:.0%}" for f in suite.eval.fractions)
    print(f"evaluation: at {fracs} of each run's budget, {suite.eval.n_examples} held-out examples, k={suite.eval.k}",
          file=out)
    for recipe, ov in suite.overrides.items():
        print(f"overrides for {recipe}: {', '.join(f'{p}={v!r}' for p, v in flatten(ov).items())}", file=out)

    cals: dict[str, dict] = {}
    if calibrate_time and pending:
        for cell in cells:
            first = next((c for c in pending if c.tags["cell"] == cell.name), None)
            if first is None:
                continue
            print(f"calibrating {cell.name}: two {first.recipe.name} steps and one evaluation ...", file=out, flush=True)
            cals[cell.name] = cal = calibrate(first.replace(threads=plan.threads, device=plan.device))
            note = "" if cal["warmstart_cached"] else " (warm start not cached: untrained model, SFT time not included)"
            print(f"  {cal['seconds_per_step']:.2f} s/step, {cal['flops_per_step']:.3g} FLOPs/step, "
                  f"eval {cal['eval_s']:.2f} s{note}", file=out)

    print(f"\n{'run_id':<13} {'cell':<18} {'recipe':<12} {'seed':>4}  {'budget':>12}  {'FLOPs':>9}  {'status':<8} "
          f"{'est. time':>9}", file=out)
    total_s = 0.0
    for c in cfgs:
        cal = cals.get(c.tags["cell"])
        flops, secs = estimate(c, cal) if cal else (c.budget.value if c.budget.kind == "flops" else None, None)
        ck = None if c.run_id in done else checkpoint.info(root, c.run_id)
        status = "done" if c.run_id in done else f"resume@{ck['step']}" if ck else "pending"
        if status != "done" and secs is not None:
            total_s += secs
        print(f"{c.run_id:<13} {c.tags['cell']:<18} {c.recipe.name:<12} {c.seed:>4}  {str(c.budget):>12}  "
              f"{'-' if flops is None else f'{flops:.3g}':>9}  {status:<8} "
              f"{fmt_seconds(secs) if status != 'done' else '':>9}", file=out)
    if not pending:
        print("\nevery run is finished; `bench suite` would only write the report", file=out)
    elif cals:
        wall = total_s / plan.workers
        print(f"\nestimated time for {len(pending)} pending run(s): ~{fmt_seconds(wall)} on {plan.workers} worker(s) "
              f"({fmt_seconds(total_s)} of run time); an estimate from a short calibration per cell", file=out)
    # every warm start the pending runs load, not only the calibrated run's (a cell of several warm starts),
    # each once however many cells share it (a regime that changes only the RL settings)
    missing: dict[str, tuple[str, int, list[str]]] = {}  # key -> (task/scale, warm-start seed, cells)
    for c in pending:
        if c.warmstart.steps == 0:
            continue
        key = cfg_warmstart_key(c)
        if not key_cached(key):
            cells = missing.setdefault(key, (f"{c.task}/{c.scale}", c.warmstart.seed, []))[2]
            if c.tags["cell"] not in cells:
                cells.append(c.tags["cell"])
    if missing:
        which = "; ".join(f"{ts} warm-start seed {ws} (for {', '.join(cells)})" for ts, ws, cells in missing.values())
        print(f"plus {len(missing)} warm-start SFT(s) not cached yet, each trained once, then reused: {which}", file=out)
