"""`bench suite`: expand, skip finished runs, execute the rest with progress, wait for runs that
another process holds, then write the report.

Resume needs no state of its own: a run is finished iff results/runs/<run_id>/run.json exists
(written last, atomically), and a run in progress holds its lock. So a rerun after Ctrl-C or
SIGKILL redoes exactly the runs without a record (from their last checkpoint, when the suite ran
with --checkpoint-every: results/live/<run_id>/), and two `bench suite` processes on one results
directory split the work: each skips runs the other holds, then waits for them at the end (and
runs them itself if their holder died).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

from algorithms.errors import InputError
from bench import results
from bench.config import RunConfig
from bench.harness.executors import LocalExecutor, RayExecutor, cpu_count
from bench.harness.locks import clean_stale_live, clean_stale_temp, run_lock
from bench.harness.worker import RAN
from bench.suite import Suite


@dataclasses.dataclass(frozen=True)
class Plan:
    """How a suite will execute: concurrency and the runs' execution settings (never hashed)."""

    executor: str
    workers: int
    threads: int
    device: str
    address: str | None = None
    gpus_per_run: float = 1.0  # Ray, device cuda: GPUs each run reserves
    stack: int = 1  # runs of one cell trained as one stack (a job); 1: each run its own job
    stack_from: str = "default"  # where stack came from: --stack, [resources] stack, or the default (why)


# The stack a suite runs with on CUDA when neither --stack nor [resources] stack says: per scale, the R
# `benchmarks/stacked_speed.py --device cuda` found best among those it timed, with what it measured (a
# whole grpo step, R stacked replicas against R runs one at a time; one H200, 16 prompts x 8 samples per
# replica; README, Stacked runs). A scale not measured runs unstacked. A CPU never stacks by default:
# there it does not pay (1.0-1.06x a step on 2 cores; whole runs per CPU hour 0.64-0.97x).
GPU_STACK = {
    "nano": (16, "11.8x a step at R = 16 on an H200 (3.5x at R = 4)"),
    "micro": (16, "10.9x a step at R = 16 on an H200"),
    "small": (4, "3.1x a step at R = 4 on an H200 (larger R not timed)"),
}


def default_stack(suite: Suite, device: str) -> tuple[int, str]:
    """(R, why) when neither --stack nor [resources] stack is given: 1 on a CPU; on CUDA the smallest
    GPU_STACK entry among the suite's scales (a stack holds one cell's runs, and one R serves the suite),
    1 when a scale has no measurement."""
    if not str(device).startswith("cuda"):
        return 1, "default on a CPU: one run at a time (stacking does not pay there)"
    scales = sorted({c.scale for c in suite.cells})
    missing = [sc for sc in scales if sc not in GPU_STACK]
    if missing:
        return 1, (f"default on CUDA: one run at a time, no stacked_speed measurement for scale(s) "
                   f"{', '.join(missing)} (--stack R or [resources] stack sets one)")
    r, sc = min((GPU_STACK[sc][0], sc) for sc in scales)
    return r, f"default on CUDA for {sc}: {GPU_STACK[sc][1]} (--stack 1 turns it off)"


def make_plan(suite: Suite, n_pending: int, executor: str = "local", workers: int | None = None,
              threads: int | None = None, device: str | None = None, address: str | None = None,
              gpus_per_run: float | None = None, stack: int | None = None) -> Plan:
    """threads × workers ≤ cores: by default one worker per core (runs are small), all cores split evenly."""
    if executor not in ("local", "ray"):
        raise InputError(f"unknown executor {executor!r}; valid: local, ray")
    if workers is not None and workers < 1 or threads is not None and threads < 0:
        raise InputError("--workers must be >= 1 and --threads >= 0")
    if gpus_per_run is not None and not gpus_per_run > 0:
        raise InputError(f"--gpus-per-run must be > 0, got {gpus_per_run}")
    if stack is not None and stack < 1:
        raise InputError(f"--stack must be >= 1, got {stack}")
    cores = cpu_count()
    threads = threads or suite.resources.threads or 0
    if workers is None:
        workers = max(1, min(max(n_pending, 1), cores // threads if threads else cores))
    threads = threads or max(1, cores // workers)
    device = device or suite.device
    if stack is not None:
        stack_from = "--stack"
    elif suite.resources.stack is not None:
        stack, stack_from = suite.resources.stack, "[resources] stack"
    else:
        stack, stack_from = default_stack(suite, device)
    return Plan(executor, workers, threads, device, address, gpus_per_run or suite.resources.gpus_per_run, stack,
                stack_from)


def job_configs(cfgs: list[RunConfig], plan: Plan) -> dict[str, dict]:
    """run id -> the config a worker builds its run from: the run's canonical tree with the plan's
    threads and device (execution settings, not hashed), so the parent builds no config again."""
    return {c.run_id: {**c.to_dict(), "threads": plan.threads, "device": plan.device} for c in cfgs}


def execution_order(suite: Suite, cfgs: list[RunConfig]) -> list[RunConfig]:
    """Seed-major, then recipe, then cell: the first runs touch every cell (so warm starts train in
    parallel), and seed 0 of every recipe finishes before seed 1 starts (useful partial results)."""
    rank = {r: i for i, r in enumerate(suite.recipes)}
    cell = {c.name: i for i, c in enumerate(suite.cells)}
    seed = {s: i for i, s in enumerate(suite.all_seeds)}
    return sorted(cfgs, key=lambda c: (seed[c.seed], rank[c.recipe.name], cell[c.tags["cell"]]))


def stackable(cfg: RunConfig) -> str | None:
    """The key runs must share to train as one stack (their configs apart from the seed and the warm
    start's seed: each replica loads its own warm start), or None when this run trains alone (its parts
    draw from torch's global generator, or another backend)."""
    if cfg.recipe.needs.global_rng or cfg.rollout.backend != "native":
        return None
    d = cfg.to_dict()
    for k in ("seed", "tags", "threads"):
        d.pop(k)
    d["warmstart"].pop("seed")
    return json.dumps(d, sort_keys=True)


def pack(cfgs: list[RunConfig], size: int) -> list[list[RunConfig]]:
    """Jobs of up to `size` runs that share a stack key, in the order of their first run; a run
    that cannot stack is a job of its own."""
    if size <= 1:
        return [[c] for c in cfgs]
    jobs: list[list[RunConfig]] = []
    open_job: dict[str, list[RunConfig]] = {}
    for c in cfgs:
        key = stackable(c)
        if key is None:
            jobs.append([c])
            continue
        job = open_job.get(key)
        if job is None or len(job) >= size:
            job = open_job[key] = []
            jobs.append(job)
        job.append(c)
    return jobs


def remove_failed(root: Path, cfgs: list[RunConfig], out=None) -> int:
    """--retry-failed: delete records with status `failed` (a crash, not a divergence) so they rerun."""
    out = out or sys.stdout  # resolved per call: a default bound at import outlives a replaced stdout
    n = 0
    for c in cfgs:
        d = results.run_dir(root, c.run_id)
        if not results.is_finished(root, c.run_id):
            continue
        if _status(root, c.run_id) != "failed":
            continue
        with run_lock(root, c.run_id, wait=False) as held:
            if held:  # move aside first: a reader sees the whole record or none
                trash = root / ".tmp" / f"{c.run_id}.{os.getpid()}"
                trash.parent.mkdir(parents=True, exist_ok=True)
                os.replace(d, trash)
                shutil.rmtree(trash)
                n += 1
    if n:
        print(f"removed {n} failed run record(s); they will run again", file=out)
    return n


class Progress:
    """An overall bar on stderr (runs done / total, ETA) and one line per finished run on `out`."""

    def __init__(self, total: int, already: int, out=None):
        out = out or sys.stdout  # resolved per call: a default bound at import outlives a replaced stdout
        from tqdm import tqdm

        self.total, self.done, self.out = total, already, out
        self.outcomes: list[dict] = []
        self.locked: list[dict] = []
        self.t0 = time.monotonic()
        self.bar = tqdm(total=total, initial=already, desc="runs", unit="run", file=sys.stderr, disable=None,
                        dynamic_ncols=True, smoothing=0.0)

    def update(self, o: dict) -> None:
        if o["status"] == "locked":  # held by another process: re-checked at the end
            self.locked.append(o)
            return
        self.outcomes.append(o)
        self.done += 1
        self.bar.update(1)
        ran = sum(x["status"] in RAN for x in self.outcomes)
        left = self.total - self.done
        eta = (time.monotonic() - self.t0) / ran * left if ran and left else 0.0
        acc = o.get("acc")
        self.bar.write(
            f"{o['status']:<8} {o['recipe']:<12} {o['cell'] or '':<18} seed {o['seed']:<3} "
            f"acc {'  -  ' if acc is None or math.isnan(acc) else f'{acc:.3f}'}  "
            f"{fmt_seconds(o.get('wall_s')):>7}  {o['run_id'] or ''}  [{self.done}/{self.total}"
            f"{', eta ' + fmt_seconds(eta) if left else ''}]"
            + (f"  {o['reason']}" if o.get("reason") and o["status"] != "done" else "")
            + (f"  (resumed from its checkpoint at step {o['resumed_from']})" if o.get("resumed_from") else ""),
            file=self.out)

    def close(self) -> None:
        self.bar.close()


def fmt_seconds(s: float | None) -> str:
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    s = float(s)
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def unique_runs(cfgs: list[RunConfig]) -> list[RunConfig]:
    """Each run once, in first-seen order: two cells that differ only in the seeds or recipes their
    regimes run (e.g. on_policy and on_policy30) share the runs of their common seeds."""
    seen: dict[str, RunConfig] = {}
    for c in cfgs:
        seen.setdefault(c.run_id, c)
    return list(seen.values())


def run_suite(suite: Suite, cfgs: list[RunConfig], root: Path, plan: Plan, retry_failed: bool = False,
              out=None, options: dict | None = None) -> int:
    """Execute the pending runs of cfgs. Returns 0 when every run has a finished or diverged record.
    options: worker.run_one's execution settings (checkpoint_every, report_to)."""
    out = out or sys.stdout  # resolved per call: a default bound at import outlives a replaced stdout
    cfgs = unique_runs(cfgs)
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    n_stale = clean_stale_temp(root)
    if n_stale:
        print(f"removed {n_stale} partial write(s) left by killed runs in {root / '.tmp'}", file=out)
    n_live = clean_stale_live(root)
    if n_live:
        print(f"removed {n_live} live stream(s) of recorded runs left by a killed writer in {root / 'live'}", file=out)
    if retry_failed:
        remove_failed(root, cfgs, out)
    for run_id, problem in results.problems(root, [c.run_id for c in cfgs]):
        print(f"corrupt record of run {run_id}: {problem}; moving it to {root / 'quarantine'} and running it again",
              file=out)
    pending = [c for c in cfgs if not results.is_finished(root, c.run_id)]
    n_done = len(cfgs) - len(pending)
    print(f"suite {suite.name}: {len(cfgs)} runs, {n_done} already finished, {len(pending)} to run "
          f"({plan.executor}: {plan.workers} worker(s) × {plan.threads} thread(s), device {plan.device}"
          f"{f', stacks of up to {plan.stack} runs' if plan.stack > 1 else ''}); "
          f"results in {root}", file=out)
    if not pending:
        print(f"nothing to run: all {len(cfgs)} runs are finished", file=out)
        return _summarise([], cfgs, root, 0.0, out, quiet=True)
    commit, changes = results.git_state()
    if changes:
        shown = "; ".join(c.strip() for c in changes[:3]) + (f" and {len(changes) - 3} more" if len(changes) > 3 else "")
        print(f"warning: the checkout at {commit[:12] or 'an unknown commit'} has uncommitted changes ({shown}): these "
              f"runs are recorded git_dirty and `bench publish` will refuse them (commit, or move the files out)",
              file=out)
    t0 = time.monotonic()
    progress = Progress(len(cfgs), n_done, out)
    dicts = job_configs(pending, plan)
    jobs = [[dicts[c.run_id] for c in job] for job in pack(execution_order(suite, pending), plan.stack)]
    try:
        with _executor(plan) as ex:
            ex.run([(job, str(root), False, options) for job in jobs], progress.update)
            if progress.locked:
                print(f"{len(progress.locked)} run(s) held by another process; waiting for them "
                      "(and running any whose holder died)", file=out)
                held = [o["run_id"] for o in progress.locked]
                progress.locked = []
                ex.run([([dicts[rid]], str(root), True, options) for rid in held], progress.update)
    finally:
        progress.close()
    return _summarise(progress.outcomes, cfgs, root, time.monotonic() - t0, out)


def _executor(plan: Plan):
    if plan.executor == "ray":
        gpus = plan.gpus_per_run if plan.device.startswith("cuda") else 0.0
        return RayExecutor(plan.threads, gpus=gpus, address=plan.address, workers=plan.workers)
    return LocalExecutor(plan.workers)


def _summarise(outcomes: list[dict], cfgs: list[RunConfig], root: Path, seconds: float, out, quiet=False) -> int:
    count = {s: sum(o["status"] == s for o in outcomes) for s in ("finished", "diverged", "failed", "crashed", "done")}
    missing = [c.run_id for c in cfgs if not results.is_finished(root, c.run_id)]
    parts = [f"{v} {k}" for k, v in count.items() if v and k != "done"]
    if count["done"]:
        parts.append(f"{count['done']} done by another process")
    if not quiet:
        print(f"ran {sum(count[s] for s in RAN)} run(s) in {fmt_seconds(seconds)}"
              + (f": {', '.join(parts)}" if parts else ""), file=out)
    for o in outcomes:
        if o["status"] in ("failed", "crashed"):
            print(f"  {o['status']}: {o['recipe']} {o['cell']} seed {o['seed']} ({o['run_id']}): {o.get('reason')}", file=out)
    if missing:
        print(f"{len(missing)} run(s) have no record yet; rerun `bench suite` to resume them", file=out)
    failed_before = [c for c in cfgs if c.run_id not in {o["run_id"] for o in outcomes}
                     and results.is_finished(root, c.run_id) and _status(root, c.run_id) == "failed"]
    if failed_before:
        print(f"{len(failed_before)} earlier run(s) have a `failed` record (a crash); `--retry-failed` reruns them",
              file=out)
    return 0 if not missing and not count["failed"] and not count["crashed"] else 1


def _status(root: Path, run_id: str) -> str:
    return json.loads((results.run_dir(root, run_id) / "run.json").read_text()).get("status", "")
