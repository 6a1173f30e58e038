"""Runs, in whichever process an executor gives them: lock, skip if finished, train.

`run_job` takes a job's plain dicts (RunConfigs' canonical forms) and returns one outcome per run,
so the same function runs in a local spawn-pool process and as a Ray task. A job of one run is
`run_one`; a job of several (runs of one cell that differ only in their seed) is `run_stack_job`:
the runs it can lock and has not finished train as one stack (bench/engine/stack.py).

`trainer` and `stack` are the engine's Trainer and run_stack started from each run's warm start
(bench.warmstart.warm_start): the engine is handed its initial policy (bench/engine/start.py), and
every caller that trains (`bench run`, `bench suite`, `bench tune`, calibration, tests) hands it
through these two.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench import results
from bench.harness.locks import remove_temp, run_lock

# outcome["status"]: finished | diverged | failed  (this call trained; a record exists, except when
# the worker itself crashed) | done (already finished, by an earlier or another process) |
# locked (another process holds the run; not waited for)
RAN = ("finished", "diverged", "failed")

if TYPE_CHECKING:
    from bench.config import RunConfig
    from bench.engine.stack import StackOutcome
    from bench.engine.trainer import Trainer


def trainer(cfg: RunConfig, **kw) -> Trainer:
    """`Trainer(cfg, **kw)` that starts from cfg's warm start (trained first when not cached)."""
    from bench.engine.trainer import Trainer
    from bench.warmstart import warm_start

    return Trainer(cfg, start=warm_start, **kw)


def stack(cfgs: list[RunConfig], root: Path, **kw) -> StackOutcome:
    """`run_stack(cfgs, root, **kw)` whose replicas start from their warm starts."""
    from bench.engine.stack import run_stack
    from bench.warmstart import warm_start

    return run_stack(cfgs, root, start=warm_start, **kw)


def init_local_worker() -> None:
    """Pool initializer: die with the parent (so SIGKILL of `bench suite` leaves no orphan runs);
    leave Ctrl-C to the parent, which stops the workers itself."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: an orphaned worker finishes its run, which is still safe (locks, atomic writes)
    quiet()


def quiet() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def run_one(cfg_dict: dict, root: str, wait: bool = False, options: dict | None = None) -> dict:
    """Run cfg unless finished or held by another process. Never raises for a failed run.

    options (execution settings, never hashed): checkpoint_every (save resume checkpoints every N
    steps), report_to (a tracker name, bench/engine/trackers.py). A run with a checkpoint of its
    own config (a killed suite's) resumes from it whatever the options say."""
    from bench.config import RunConfig
    from bench.engine import checkpoint, trackers

    quiet()
    cfg = RunConfig.from_dict(cfg_dict)
    root_p = Path(root)
    base = _base(cfg)
    with run_lock(root_p, cfg.run_id, wait=wait) as held:
        if not held:
            return {**base, "status": "locked"}
        if results.is_finished(root_p, cfg.run_id):
            return {**base, **_from_record(root_p, cfg.run_id), "status": "done"}
        if results.has_record(root_p, cfg.run_id):  # a corrupt record: keep it aside, run again
            results.quarantine(root_p, cfg.run_id)
        remove_temp(root_p, cfg.run_id)  # a writer killed mid-write; we hold the lock, so it is dead
        opts = options or {}
        ck = checkpoint.info(root_p, cfg.run_id)
        resume = ck is not None and checkpoint.resume_problem(root_p, cfg) is None
        every = opts.get("checkpoint_every") or (ck["checkpoint_every"] if resume else 0)
        t0 = time.perf_counter()
        try:
            res = trainer(cfg, root=root_p, callbacks=trackers.make(opts.get("report_to", "none")),
                          checkpoint_every=every, resume=resume).run()
        except Exception as e:  # noqa: BLE001 (the trainer has written a `failed` record; report, do not crash the pool)
            return {**base, "status": "failed", "reason": f"{type(e).__name__}: {e}",
                    "wall_s": time.perf_counter() - t0, "acc": None}
        if resume:
            base["resumed_from"] = ck["step"]
        return {**base, "status": res.status, "reason": res.reason, "wall_s": time.perf_counter() - t0,
                "acc": res.final.get("eval/acc_greedy")}


def run_job(cfg_dicts: list[dict], root: str, wait: bool = False, options: dict | None = None) -> list[dict]:
    """One outcome per run of the job: alone when it is one run, else as one stack."""
    if len(cfg_dicts) == 1:
        return [run_one(cfg_dicts[0], root, wait, options)]
    return run_stack_job(cfg_dicts, root, wait, options)


def run_stack_job(cfg_dicts: list[dict], root: str, wait: bool = False, options: dict | None = None) -> list[dict]:
    """Runs of one cell as one stack: each is locked and skipped when finished (or held) as in
    `run_one`; the rest train together, each writing its own record. A run with a resume checkpoint
    (a killed suite's) resumes alone, since stacks keep no checkpoints."""
    from bench.config import RunConfig
    from bench.engine import checkpoint, trackers

    quiet()
    root_p = Path(root)
    opts = options or {}
    outcomes: dict[str, dict] = {}
    train: list = []
    cfgs = [RunConfig.from_dict(d) for d in cfg_dicts]
    with contextlib.ExitStack() as locks:
        for cfg in cfgs:
            base = _base(cfg)
            if not locks.enter_context(run_lock(root_p, cfg.run_id, wait=wait)):
                outcomes[cfg.run_id] = {**base, "status": "locked"}
                continue
            if results.is_finished(root_p, cfg.run_id):
                outcomes[cfg.run_id] = {**base, **_from_record(root_p, cfg.run_id), "status": "done"}
                continue
            if results.has_record(root_p, cfg.run_id):
                results.quarantine(root_p, cfg.run_id)
            remove_temp(root_p, cfg.run_id)
            if checkpoint.info(root_p, cfg.run_id) is not None and checkpoint.resume_problem(root_p, cfg) is None:
                outcomes[cfg.run_id] = None  # resumed alone below, once the stack is done
                continue
            train.append(cfg)
        t0 = time.perf_counter()
        if train:
            out = stack(train, root_p, trainer_kw=lambda c: {
                "callbacks": trackers.make(opts.get("report_to", "none"))})
            wall = time.perf_counter() - t0
            for cfg, res in zip(train, out.results):
                base = {**_base(cfg), "wall_s": wall, "stack": len(train)}
                if isinstance(res, BaseException):
                    outcomes[cfg.run_id] = {**base, "status": "failed", "reason": f"{type(res).__name__}: {res}",
                                            "acc": None}
                else:
                    outcomes[cfg.run_id] = {**base, "status": res.status, "reason": res.reason,
                                            "acc": res.final.get("eval/acc_greedy")}
    for d, cfg in zip(cfg_dicts, cfgs):  # the resumable ones, alone, after the stack released its locks
        if outcomes[cfg.run_id] is None:
            outcomes[cfg.run_id] = run_one(d, root, wait, options)
    return [outcomes[c.run_id] for c in cfgs]


def _base(cfg) -> dict:
    return {"run_id": cfg.run_id, "recipe": cfg.recipe.name, "cell": cfg.tags.get("cell", f"{cfg.task}/{cfg.scale}"),
            "seed": cfg.seed, "host": socket.gethostname(), "pid": os.getpid()}


def _from_record(root: Path, run_id: str) -> dict:
    meta = json.loads((results.run_dir(root, run_id) / "run.json").read_text())
    return {"recorded_status": meta.get("status"), "wall_s": meta.get("wall_s"), "reason": meta.get("reason", ""),
            "acc": None}
