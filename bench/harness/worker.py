"""Running one run, in whichever process gives it: `bench run`, an executor's worker, a tuning trial.

`run_one(cfg, root, ...)` is the one owner of the steps around training a run: take its lock (the
same for every caller), keep a finished record, set a corrupt one aside (results/quarantine/), clean
what a killed writer left, continue from a checkpoint or start over, train, and say what happened
(a `Ran`; it never raises for a run that fails). `bench run` (cli.py), the suite executors (through
`run_job`) and `bench tune`'s trials (tune/study.py) all call it; `run_stacked` is its form for the
runs of one cell trained as one stack (bench/engine/stack.py), claiming each run the same way.

`run_job` takes a job's plain dicts (RunConfigs' canonical forms) and returns one outcome row per
run, so the same function runs in a local spawn-pool process and as a Ray task; each run's config is
built there once.

`trainer` and `stack` are the engine's Trainer and run_stack started from each run's warm start
(bench.warmstart.warm_start): the engine is handed its initial policy (bench/engine/start.py), and
every caller that trains (`bench run`, `bench suite`, `bench tune`, calibration, tests) hands it
through these two.
"""
from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench import results
from bench.harness.locks import remove_temp, run_lock

# Ran.status / a row's "status": finished | diverged | failed (this call trained; a record exists,
# except when the worker itself crashed) | done (already finished, by an earlier or another process) |
# locked (another process holds the run; not waited for) | pruned (a tuning trial stopped early) |
# refused (resume asked for, impossible)
RAN = ("finished", "diverged", "failed")

if TYPE_CHECKING:
    from bench.config import RunConfig
    from bench.engine.stack import StackOutcome
    from bench.engine.trainer import RunResult, Trainer


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


@dataclass
class Ran:
    """What `run_one` did with one run."""

    cfg: RunConfig
    status: str  # finished | diverged | failed | pruned: trained here (a record exists, unless the worker
    #              crashed) · done: a record exists and stays · locked: another process holds the run ·
    #              refused: resume=True and the run has no checkpoint it can continue from (reason says why)
    reason: str = ""
    wall_s: float | None = None
    result: RunResult | None = None  # the Trainer's, when it ran to an end
    error: BaseException | None = None  # what a failed run raised (its record holds the traceback)
    record: dict | None = None  # done: the run.json that stays
    resumed_from: int | None = None  # the checkpoint's step, when it resumed
    stack: int | None = None  # trained in a stack of this many runs (wall_s is the stack's)

    def row(self) -> dict:
        """The outcome as plain data, as executors report it (bench/harness/runner.py)."""
        row = {**_base(self.cfg), "status": self.status}
        if self.status == "done":
            rec = self.record or {}
            return {**row, "recorded_status": rec.get("status"), "wall_s": rec.get("wall_s"),
                    "reason": rec.get("reason", ""), "acc": None}
        if self.status == "locked":
            return row
        row |= {"reason": self.reason, "wall_s": self.wall_s,
                "acc": self.result.final.get("eval/acc_greedy") if self.result else None}
        return (row | ({"resumed_from": self.resumed_from} if self.resumed_from is not None else {})
                | ({"stack": self.stack} if self.stack is not None else {}))


@dataclass
class _Ready:
    resume: bool
    checkpoint: dict | None  # checkpoint.info: the run's checkpoint, continued or discarded


def run_one(cfg: RunConfig, root: Path, *, wait: bool = False, replace: Callable[[dict], bool] | None = None,
            resume: bool | None = None, checkpoint_every: int = 0, notice: Callable[[str], None] | None = None,
            before: Callable[[int | None, int], None] | None = None, **trainer_kw) -> Ran:
    """Run one run: take its lock, keep a finished record, set a corrupt one aside, clean what a killed
    writer left, resume or start over, train. Never raises for a failed run (the Ran says so). The one
    owner of these steps for `bench run`, `bench suite`'s workers and `bench tune`'s trials.

    wait: block on another process's lock (else `locked`). replace(record): whether a finished record
    is trained again (bench run --force, or a failed record); None: never. resume: None continues from a
    checkpoint of this config when there is one (a killed suite's), True requires one (`refused`
    otherwise), False starts over. checkpoint_every: save resume checkpoints every N steps (a resumed run
    keeps its own interval). notice(line): what happened to a record or checkpoint on the way. before(step
    resumed from or None, checkpoint interval): called once everything is checked, just before training.
    trainer_kw go to the Trainer (callbacks, on_eval, log, progress, save_checkpoint)."""
    root = Path(root)
    with run_lock(root, cfg.run_id, wait=wait) as held:
        if not held:
            return Ran(cfg, "locked")
        ready = _claim(cfg, root, replace, resume, notice)
        if isinstance(ready, Ran):
            return ready
        ck = ready.checkpoint
        every = checkpoint_every or (ck["checkpoint_every"] if ready.resume else 0)
        if before is not None:
            before(ck["step"] if ready.resume else None, every)
        t0 = time.perf_counter()
        try:
            res = trainer(cfg, root=root, checkpoint_every=every, resume=ready.resume, **trainer_kw).run()
        except Exception as e:  # noqa: BLE001 (the trainer has written a `failed` record; report, do not crash the pool)
            return Ran(cfg, "failed", f"{type(e).__name__}: {e}", time.perf_counter() - t0, error=e)
        return Ran(cfg, res.status, res.reason, time.perf_counter() - t0, res,
                   resumed_from=ck["step"] if ready.resume else None)


def _claim(cfg: RunConfig, root: Path, replace, resume: bool | None, notice) -> Ran | _Ready:
    """With the run's lock held: the Ran when it is not to train (done, refused), else how it trains."""
    from bench.engine import checkpoint

    say = notice or (lambda line: None)
    if results.is_finished(root, cfg.run_id):
        meta = results.read_meta(results.run_dir(root, cfg.run_id))
        if replace is None or not replace(meta):
            return Ran(cfg, "done", record=meta)
    elif results.has_record(root, cfg.run_id):  # a corrupt record: keep it aside, run again
        problem = results.check_record(results.run_dir(root, cfg.run_id))
        say(f"run {cfg.run_id}: {problem}; moved the corrupt record to {results.quarantine(root, cfg.run_id)}")
    ck = checkpoint.info(root, cfg.run_id)
    if resume:
        problem = checkpoint.resume_problem(root, cfg)
        if problem:
            return Ran(cfg, "refused", problem)
    elif resume is None:
        resume = ck is not None and checkpoint.resume_problem(root, cfg) is None
    elif ck:
        say(f"run {cfg.run_id}: starting over; its checkpoint at step {ck['step']} is discarded (--resume "
            "continues from it instead)")
    remove_temp(root, cfg.run_id)  # a writer killed mid-write; we hold the lock, so it is dead
    return _Ready(bool(resume), ck)


def run_job(cfg_dicts: list[dict], root: str, wait: bool = False, options: dict | None = None) -> list[dict]:
    """One outcome per run of the job (RunConfig.to_dict() trees: what crosses to a worker process or a
    Ray task): alone when it is one run, else as one stack. Each run's config is built once, here.

    options (execution settings, never hashed): checkpoint_every (save resume checkpoints every N
    steps), report_to (a tracker name, bench/engine/trackers.py). A run with a checkpoint of its
    own config (a killed suite's) resumes from it whatever the options say."""
    from bench.config import RunConfig
    from bench.engine import trackers

    quiet()
    opts = options or {}
    cfgs = [RunConfig.from_dict(d) for d in cfg_dicts]
    if len(cfgs) == 1:
        return [run_one(cfgs[0], Path(root), wait=wait, checkpoint_every=opts.get("checkpoint_every") or 0,
                        callbacks=trackers.make(opts.get("report_to", "none"))).row()]
    return [r.row() for r in run_stacked(cfgs, Path(root), wait, opts)]


def run_stacked(cfgs: list[RunConfig], root: Path, wait: bool = False, options: dict | None = None) -> list[Ran]:
    """Runs of one cell as one stack: each is locked and claimed as in `run_one` (kept when finished,
    skipped when held, a corrupt record set aside); the rest train together, each writing its own
    record. A run with a resume checkpoint (a killed suite's) resumes alone through `run_one`, once the
    stack is done, since stacks keep no checkpoints."""
    from bench.engine import trackers

    opts = options or {}
    outcomes: dict[str, Ran | None] = {}
    train: list[RunConfig] = []
    with contextlib.ExitStack() as locks:
        for cfg in cfgs:
            if not locks.enter_context(run_lock(root, cfg.run_id, wait=wait)):
                outcomes[cfg.run_id] = Ran(cfg, "locked")
                continue
            ready = _claim(cfg, root, None, None, None)
            if isinstance(ready, Ran):
                outcomes[cfg.run_id] = ready
            elif ready.resume:
                outcomes[cfg.run_id] = None  # resumed alone below, once the stack is done
            else:
                train.append(cfg)
        t0 = time.perf_counter()
        if train:
            out = stack(train, root, trainer_kw=lambda c: {"callbacks": trackers.make(opts.get("report_to", "none"))})
            wall = time.perf_counter() - t0
            for cfg, res in zip(train, out.results):
                if isinstance(res, BaseException):
                    outcomes[cfg.run_id] = Ran(cfg, "failed", f"{type(res).__name__}: {res}", wall, error=res,
                                               stack=len(train))
                else:
                    outcomes[cfg.run_id] = Ran(cfg, res.status, res.reason, wall, res, stack=len(train))
    for cfg in cfgs:  # the resumable ones, alone, after the stack released its locks
        if outcomes[cfg.run_id] is None:
            outcomes[cfg.run_id] = run_one(cfg, root, wait=wait, callbacks=trackers.make(opts.get("report_to", "none")))
    return [outcomes[c.run_id] for c in cfgs]


def _base(cfg) -> dict:
    return {"run_id": cfg.run_id, "recipe": cfg.recipe.name, "cell": cfg.tags.get("cell", f"{cfg.task}/{cfg.scale}"),
            "seed": cfg.seed, "host": socket.gethostname(), "pid": os.getpid()}
