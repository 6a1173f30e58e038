"""Studies and trials: one Optuna study per (cell, recipe); a trial is a regular run.

A trial samples the recipe's search space, applies it to the suite's run config for the cell and
trains one run per tuning seed (`tune.seeds`, in order), each tagged {"study", "trial"} (hashed:
every trial has its own run directories) and {"params"} (the sampled values, for the report's
sensitivity curves). The trial's value is the mean of its runs' objectives: a setting is chosen
over seeds, and over the warm starts those seeds map to in a cell with several. After each
evaluation at a compute checkpoint the trial reports its objective so far (step = seed index ×
evaluations + evaluation); when the pruner says so the run stops, is recorded with status
`pruned`, and the trial's other seeds do not run. A diverged run scores 0 (the worst accuracy:
tuning should avoid it); a run that fails (a crash) fails the trial.

Grid (`tune.sampler = "grid"`): every combination of the space's choices once; the study is the
same set of runs whichever worker takes which trial, so two workers choose what one does.

Workers: `--workers K` starts K processes; each opens the same storage and runs its share of every
study's remaining trials, so one `bench tune` runs exactly `trials` trials per study, none twice
(trial numbers come from the storage). Another `bench tune` on the same storage (other machines)
takes what remains when it starts; two started at once may overshoot by at most their concurrent
trials (MaxTrialsCallback stops each worker once the study has enough).

Interrupted trials: a trial records its worker (host:pid). A RUNNING trial whose worker was a process
of this machine that no longer exists was interrupted (killed, or the machine restarted); the next
`run` finishes it under its own number (`resume`: the seeds with a record are scored from it, the
others trained) before new trials, so a killed study leaves no half-run trial number behind.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

from algorithms.errors import ConfigError, InputError
from bench import preflight
from bench.config import RunConfig
from bench.typed import merge, unflatten
from bench.suite import Cell, Suite
from bench.tune import space as spaces
from bench.tune.settings import TuneSettings, tuning_warmstarts

@dataclass(frozen=True)
class StudySpec:
    """Everything a worker needs for one study, as plain data (it crosses a spawn boundary)."""

    name: str
    suite: str
    cell: str
    recipe: str
    bases: tuple[dict, ...]  # RunConfig.to_dict() of the trial config before sampling, one per tuning seed
    space: tuple[spaces.Param, ...]
    settings: TuneSettings
    n_evals: int  # evaluations after the start (pruning steps 1..n_evals)
    budget: str  # the base's budget and config id (what a study in a storage is checked against)
    base_config_id: str

    @property
    def base(self) -> dict:
        """The first tuning seed's config (each seed has its own: the warm start follows the seed)."""
        return self.bases[0]


def study_name(suite: str, cell: str, recipe: str) -> str:
    return f"{suite}/{cell}/{recipe}"


def plan(suite: Suite, recipes: list[str], cells: list[Cell], settings: TuneSettings) -> list[StudySpec]:
    """Build and validate every study's base config and search space (before anything runs). With
    `tune.cell`, only that cell is tuned (its choice applies to every cell)."""
    if settings.cell is not None:
        cells = [c for c in cells if c.name == settings.cell]
        if not cells:
            raise InputError(f"{suite.path}: tune.cell = {settings.cell!r} is not among the cells selected to tune "
                             "(drop --only cell=..., or select it)")
    out, checked = [], []
    extra = {f"eval.{k}": v for k, v in settings.eval.items()}  # tune.eval: the trials' own sample counts
    for cell in cells:
        for recipe in (r for r in recipes if r in suite.cell_recipes(cell)):  # a regime may run a subset
            # each tuning seed from a warm start no evaluation run uses (tune.warmstarts, settings.py)
            ws = tuning_warmstarts(suite, cell, settings)
            cfgs = [suite.run_config(cell, recipe, sd, extra={"warmstart.seed": w, **extra})
                    for sd, w in zip(settings.seeds, ws)]
            checked += cfgs
            cfg = cfgs[0]
            bases = tuple(c.to_dict() for c in cfgs)
            where = f"{suite.path}: search space of {recipe} in cell {cell.name}"
            table = settings.space_table(recipe, cell.name)
            sp = spaces.space_for(suite.registered(recipe), table, where)
            spaces.validate(sp, cfg, where)
            sp = _free(sp, cell, set(table), recipe, where)
            if settings.sampler == "grid":
                check_grid(sp, settings.trials, where)
            out.append(StudySpec(study_name(suite.name, cell.name, recipe), suite.name, cell.name, recipe,
                                 bases, sp, settings, len(cfg.eval.fractions) - 1, str(cfg.budget), cfg.config_id))
    preflight.check_runs(checked)  # the task, scale, device and backend of every base: before any run
    return out


def _free(space: tuple[spaces.Param, ...], cell: Cell, explicit: set[str], recipe: str, where: str) -> tuple:
    """The space without the paths the cell's regime sets on every run (applied last, a tuned value
    there would train every trial alike): a default range is dropped, one the suite names refused."""
    fixed = _regime_paths(cell)
    clash = [q.path for q in space if q.path in fixed and q.path in explicit]
    if clash:
        raise ConfigError(f"{where}: {', '.join(clash)} {'is' if len(clash) == 1 else 'are'} set by the regime of "
                          f"cell {cell.name} for every recipe (applied last), so tuning it would train every trial "
                          f"alike; drop it from the space ([tune.space.{recipe}] \"{clash[0]}\" = false)")
    out = tuple(q for q in space if q.path not in fixed)
    if not out:
        raise ConfigError(f"{where}: every parameter of the search space is set by the regime of cell {cell.name}")
    return out


def _regime_paths(cell: Cell) -> set[str]:
    """The dotted paths a cell's regime sets on every run (Regime.patch): a trial cannot change them."""
    return cell.regime.paths() if cell.regime else set()


def grid_size(space: tuple[spaces.Param, ...]) -> int:
    n = 1
    for p in space:
        n *= len(p.choices)
    return n


def check_grid(space: tuple[spaces.Param, ...], trials: int, where: str) -> None:
    """A grid takes choices only, and `trials` must be its size: every recipe runs its whole grid
    (the same number of trials for each, so the grids of a matched suite have one size)."""
    ranges = [p.path for p in space if p.kind != "categorical"]
    if ranges:
        raise ConfigError(f"{where}: tune.sampler = \"grid\" needs {{choices = [..]}} for every parameter; "
                          f"{', '.join(ranges)} {'is a range' if len(ranges) == 1 else 'are ranges'} (give choices, "
                          "or drop it with false)")
    if grid_size(space) != trials:
        raise ConfigError(f"{where}: the grid has {grid_size(space)} combinations ("
                          f"{' × '.join(str(len(p.choices)) for p in space)}) but tune.trials = {trials}; a grid "
                          "runs each combination once, so set trials to its size (the same for every recipe)")


def make_pruner(spec: StudySpec):
    import optuna

    s = spec.settings
    if s.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=s.startup_trials, n_warmup_steps=0)
    if s.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(1, spec.n_evals), reduction_factor=3)
    return optuna.pruners.NopPruner()


def make_sampler(spec: StudySpec, worker: int = 0):
    """TPE seeded per trial (bench/tune/sampler.py): distinct across workers and processes on one
    storage, reproducible for one worker. `worker` no longer enters the seed."""
    from bench.tune.sampler import tpe

    if spec.settings.sampler == "grid":
        import optuna

        return optuna.samplers.GridSampler({p.path: list(p.choices) for p in spec.space}, seed=spec.settings.sampler_seed)
    return tpe(spec.settings.startup_trials, spec.settings.sampler_seed)


def create(storage, spec: StudySpec):
    """Create the study, or check that an existing one searches the same problem."""
    import optuna

    study = optuna.create_study(study_name=spec.name, storage=storage, direction="maximize", load_if_exists=True)
    attrs = {"suite": spec.suite, "cell": spec.cell, "recipe": spec.recipe, "objective": spec.settings.objective,
             "metric": spec.settings.accuracy,
             "budget": spec.budget, "seeds": list(spec.settings.seeds), "sampler": spec.settings.sampler,
             "base_config_id": spec.base_config_id}
    old = study.user_attrs
    clash = {k: (old[k], v) for k, v in attrs.items() if k in old and old[k] != v}
    if clash:
        raise InputError(f"study {spec.name} already exists in this storage with other settings "
                         f"({', '.join(f'{k}: {a!r} there, {b!r} now' for k, (a, b) in clash.items())}); "
                         "use another --storage, or delete the study")
    space = [str(p) for p in spec.space]
    if "space" in old and old["space"] != space and done_trials(study):
        # Optuna refuses a categorical parameter whose choices change within a study, so every new trial
        # would fail; a grid extended past its edge is a new search (its trials get run ids of their own)
        raise InputError(f"study {spec.name} already searched {'; '.join(old['space'])} in this storage, not "
                         f"{'; '.join(space)}; tune a changed space into another --storage (e.g. a new journal "
                         "file), or delete the study")
    for k, v in attrs.items():
        study.set_user_attr(k, v)
    study.set_user_attr("space", space)
    return study


def done_trials(study) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def shares(remaining: int, workers: int) -> list[int]:
    """Split a study's remaining trials among workers exactly: [3, 3] for 6 over 2."""
    return [remaining // workers + (k < remaining % workers) for k in range(workers)]


# ---------------------------------------------------------------------------------------------
class _Reporter:
    """The Trainer's on_eval callback: report the objective so far; stop the run when pruned."""

    def __init__(self, trial, objective: str, pruner: str, accuracy: str = "eval/acc_greedy", offset: int = 0):
        self.trial, self.objective, self.pruner, self.accuracy = trial, objective, pruner, accuracy
        self.offset = offset  # the steps of the trial's earlier seeds: each seed reports on steps of its own
        self.rows: list[dict] = []

    def __call__(self, row: dict) -> None:
        from bench.engine.trainer import Stopped

        self.rows.append(row)
        if row["fraction"] == 0.0:  # the warm start: the same for every trial of the cell
            return
        step, value = len(self.rows) - 1, objective_value(self.rows, self.objective, self.accuracy)
        self.trial.report(value, self.offset + step)
        if row["fraction"] < 1.0 and self.trial.should_prune():
            raise Stopped("pruned", f"pruned ({self.pruner}) at evaluation {step}, {row['fraction']:.0%} of the "
                                    f"budget: {self.objective} {value:.3f}")


def objective_value(rows: list[dict], objective: str, accuracy: str = "eval/acc_greedy") -> float:
    """final: the accuracy column at the last evaluation; auc: its trapezoid mean over fractions so
    far. `accuracy`: the suite's declared accuracy ([report] accuracy), greedy by default; an
    evaluation where it is NaN (no well-formed sampled answer) counts 0."""
    # an evaluation with no well-formed sampled answer has no accuracy among them (NaN): none of its
    # answers is a well-formed right one, so it scores 0, the worst, as a diverged run does (a NaN
    # objective would fail the trial and hide the setting that collapsed the format)
    acc = [0.0 if r[accuracy] is None or math.isnan(r[accuracy]) else float(r[accuracy]) for r in rows]
    if objective == "final" or len(rows) == 1:
        return float(acc[-1])
    fr = [r["fraction"] for r in rows]
    area = sum((fr[i] - fr[i - 1]) * (acc[i] + acc[i - 1]) / 2 for i in range(1, len(rows)))
    return float(area / fr[-1])


def run_trial(trial, spec: StudySpec, root: Path, threads: int, out=None, resumed: bool = False) -> float:
    """Train the trial's sampled setting at every tuning seed; its value is the mean objective.

    `resumed`: an interrupted trial taken up again (`stale_trials`): its parameters are the ones it
    sampled, and a seed whose run already has a record is scored from that record, not trained again."""
    import optuna

    out = out or sys.stdout
    trial.set_user_attr("worker", _worker_id())
    params = spaces.sample(spec.space, trial)
    shown = ", ".join(f"{p.rsplit('.', 1)[-1]}={v:.3g}" if isinstance(v, float) else f"{p.rsplit('.', 1)[-1]}={v}"
                      for p, v in params.items())
    values, ids = [], []
    for i, seed in enumerate(spec.settings.seeds):
        # built once: the tuning seed's base with the sampled values, its trial tags and threads. No
        # `suite` tag: a trial is not one of the suite's runs (leaderboards selecting by tag skip it)
        cfg = RunConfig.from_dict({**merge(spec.bases[i], unflatten(params)), "threads": threads,
                                   "tags": {"cell": spec.cell, "study": spec.name, "trial": trial.number, "params": params}})
        ids.append(cfg.run_id)
        trial.set_user_attr("run_ids", ids)
        trial.set_user_attr("run_id", ids[0])
        rep = _Reporter(trial, spec.settings.objective, spec.settings.pruner, spec.settings.accuracy,
                        offset=i * spec.n_evals)
        recorded = _recorded(cfg, root) if resumed else None
        if recorded is not None:
            status, reason, wall, rep.rows = recorded
        else:
            status, reason, wall = _train(cfg, trial.number, rep, root)
        trial.set_user_attr("status", status)
        head = f"{spec.name} trial {trial.number:>3} seed {seed}:"
        if status == "pruned":
            print(f"{head} pruned    {wall:6.1f}s  {shown}  ({reason})", file=out, flush=True)
            raise optuna.TrialPruned(reason)
        values.append(0.0 if status == "diverged" else objective_value(rep.rows, spec.settings.objective,
                                                                       spec.settings.accuracy))
        print(f"{head} {status:<9} {wall:6.1f}s  {spec.settings.objective} {values[-1]:.3f}  {shown}"
              + (f"  ({reason}; a diverged run scores 0)" if status == "diverged" else ""), file=out, flush=True)
    trial.set_user_attr("values", values)
    return sum(values) / len(values)


def _train(cfg: RunConfig, number: int, rep: _Reporter, root: Path) -> tuple[str, str, float]:
    """Train one run of a trial through the harness's `run_one`: (status, reason, wall seconds)."""
    from bench.harness import worker

    # a trial's run id is its own; waiting on its lock only guards a stale temp dir
    ran = worker.run_one(cfg, root, wait=True, resume=False, on_eval=rep)
    if ran.status == "done":
        raise RuntimeError(f"run {cfg.run_id} of trial {number} already has a record")
    if ran.error is not None:
        raise ran.error  # Optuna records the trial as failed, with the cause
    return ran.status, ran.reason, ran.wall_s


def _recorded(cfg: RunConfig, root: Path) -> tuple[str, str, float, list[dict]] | None:
    """(status, reason, wall seconds, evaluation rows) of a run with a whole record; None if it has none
    (a corrupt one is trained again, as `bench suite` redoes it)."""
    import polars as pl

    from bench import results

    if not results.is_finished(root, cfg.run_id):
        return None
    d = results.run_dir(root, cfg.run_id)
    meta = results.read_meta(d)
    rows = pl.read_parquet(d / "evals.parquet").sort("fraction").to_dicts()
    return meta["status"], meta.get("reason") or "", float(meta.get("wall_s", 0.0)), rows


def _worker_id() -> str:
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def stale_trials(study, every_running: bool = False) -> list[int]:
    """Trial ids of the study's RUNNING trials whose worker was a process of this machine that is gone
    (killed, or its machine restarted): interrupted trials, taken up again under their own number so
    their finished runs count and no trial number is left half-run. A RUNNING trial of a live process,
    or of another machine (which this one cannot check), or one that recorded no worker (written
    before workers were recorded), is left alone unless `every_running` (`--take-up-running`: the
    caller knows no other worker is at work on this storage)."""
    from optuna.trial import TrialState

    host = _worker_id().rsplit(":", 1)[0]
    out = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        who = str(t.user_attrs.get("worker", ""))
        h, _, pid = who.rpartition(":")
        if every_running or (h == host and pid.isdigit() and not _alive(int(pid))):
            out.append(t._trial_id)
    return out


def resume(study, trial_id: int, spec: StudySpec, root: Path, threads: int, out=None) -> None:
    """Finish an interrupted trial (see stale_trials) and tell the study its outcome, as optimize would."""
    import optuna
    from optuna.trial import TrialState

    out = out or sys.stdout
    trial = optuna.trial.Trial(study, trial_id)
    print(f"{spec.name} trial {trial.number:>3}: interrupted, taken up again", file=out, flush=True)
    try:
        value = run_trial(trial, spec, root, threads, out=out, resumed=True)
    except optuna.TrialPruned:
        study.tell(trial, state=TrialState.PRUNED)
    except Exception as e:  # noqa: BLE001 (as optimize's catch: the trial fails with its cause, the others go on)
        trial.set_user_attr("error", f"{type(e).__name__}: {e}")
        study.tell(trial, state=TrialState.FAIL)
    else:
        study.tell(trial, value)


def work(storage_url: str, specs: list[StudySpec], counts: list[int], root: str, threads: int, worker: int,
         stale: tuple[tuple[int, ...], ...] = ()) -> int:
    """One worker: take up `stale[i]` (interrupted trials of study i, by id), then run `counts[i]` new
    trials of study i, in order. Returns the trials it ran."""
    import optuna
    from optuna.trial import TrialState

    from bench.harness.worker import quiet
    from bench.tune.storage import open_storage

    quiet()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = open_storage(storage_url)
    n = 0
    stale = stale or tuple(() for _ in specs)
    for spec, count, mine in zip(specs, counts, stale):
        if count <= 0 and not mine:
            continue
        study = optuna.load_study(study_name=spec.name, storage=storage, sampler=make_sampler(spec, worker),
                                  pruner=make_pruner(spec))
        for trial_id in mine:
            resume(study, trial_id, spec, Path(root), threads)
            n += 1
        if count <= 0:
            continue
        stop = optuna.study.MaxTrialsCallback(spec.settings.trials, states=(TrialState.COMPLETE, TrialState.PRUNED))
        before = len(study.get_trials(deepcopy=False))
        study.optimize(lambda t, spec=spec: run_trial(t, spec, Path(root), threads), n_trials=count, catch=(Exception,),
                       callbacks=[stop])
        n += len(study.get_trials(deepcopy=False)) - before
    return n


def run(storage_url: str, specs: list[StudySpec], root: Path, workers: int, threads: int, out=None,
        take_up_running: bool = False) -> None:
    """Create the studies, then run their remaining trials on `workers` processes (1: this one)."""
    out = out or sys.stdout
    from bench.tune.storage import open_storage, redact

    storage = open_storage(storage_url)
    counts, stale, pending = [], [], 0
    for spec in specs:
        study = create(storage, spec)
        left = max(0, spec.settings.trials - done_trials(study))
        pending += left
        again = stale_trials(study, take_up_running)[:left]  # interrupted trials count among those left to run
        counts.append(shares(left - len(again), workers))
        stale.append(again)
        print(f"study {spec.name}: {spec.settings.trials - left} of {spec.settings.trials} trials done, {left} to run"
              + (f" ({len(again)} interrupted, taken up again)" if again else "")
              + f"; space: {'; '.join(map(str, spec.space))}", file=out)
    print(f"storage: {redact(storage_url)} ({workers} worker(s) × {threads} thread(s)); results in {root}", file=out, flush=True)
    if not pending:
        return
    per_worker = [[c[k] for c in counts] for k in range(workers)]
    stale_of = [tuple(tuple(again[k::workers]) for again in stale) for k in range(workers)]  # dealt round the workers
    if workers == 1:
        work(storage_url, specs, per_worker[0], str(root), threads, 0, stale_of[0])
        return
    from bench.harness.executors import LocalExecutor

    # the suites' local executor: spawned workers that die with this process; Ctrl-C stops them at
    # once (their running trials stay RUNNING in the storage)
    with LocalExecutor(workers) as ex:
        ex.call(work, [(storage_url, specs, per_worker[k], str(root), threads, k, stale_of[k]) for k in range(workers)])


def edges(space: tuple[spaces.Param, ...], params: dict, cfg: RunConfig | dict | None = None) -> list[str]:
    """Where a chosen setting sits at the edge of what was searched, one phrase each: a numeric grid's
    smallest or largest choice, or a range's outer 5% (of log10 for a log range). A value at an edge
    says the optimum may lie beyond it, so the comparison would read a recipe at a setting the search
    cut short: extend the grid (or range) past it and tune again.

    `cfg` (the study's base config, or its dict: built only when a 0 is chosen): a grid's smallest
    choice 0 where the config refuses a negative value (a KL or entropy coefficient) is the knob's
    bound, not an edge: nothing lies beyond it."""
    out = []
    for p in space:
        v = params.get(p.path)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if p.kind == "categorical":
            nums = sorted(c for c in p.choices if isinstance(c, (int, float)) and not isinstance(c, bool))
            if len(nums) < 2 or len(nums) != len(p.choices):
                continue
            side = "smallest" if v == nums[0] else "largest" if v == nums[-1] else None
            if side == "smallest" and v == 0 and cfg is not None and spaces.refusal(cfg, {p.path: -nums[1]}):
                side = None  # at the knob's bound
            if side:
                out.append(f"{p.path} = {v:g} is the grid's {side} choice (of {', '.join(f'{c:g}' for c in nums)})")
            continue
        lo, hi, x = (math.log10(p.low), math.log10(p.high), math.log10(v)) if p.kind == "log_float" and v > 0 \
            else (p.low, p.high, v)
        where = (x - lo) / (hi - lo)
        if where <= EDGE or where >= 1 - EDGE:
            out.append(f"{p.path} = {v:.3g} lies in the {'low' if where <= EDGE else 'high'} {EDGE:.0%} of its range "
                       f"[{p.low:g}, {p.high:g}]")
    return out


EDGE = 0.05  # a range's outer share that counts as its edge (edges())


def tie_order(params: dict) -> tuple:
    """Smaller settings rank higher on ties: the negated values, in the space's path order."""
    return tuple((0, -v) if isinstance(v, (int, float)) else (1, str(v)) for _, v in sorted(params.items()))


def best(storage_url: str, spec: StudySpec) -> dict | None:
    """The best completed trial of a study: {"trial", "value", "params", "run_id", "counts"}; None if none."""
    import optuna
    from optuna.trial import TrialState

    from bench.tune.storage import open_storage

    study = optuna.load_study(study_name=spec.name, storage=open_storage(storage_url))
    trials = study.get_trials(deepcopy=False)
    counts = {s.name.lower(): sum(t.state == s for t in trials) for s in TrialState}
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    if not done:
        return None
    # ties go to the first setting in a fixed order of the parameters (not to the trial number, which
    # depends on which worker asked first): two workers choose what one does
    b = max(done, key=lambda t: (t.value, tie_order(t.params)))
    return {"trial": b.number, "value": b.value, "params": dict(b.params), "run_id": b.user_attrs.get("run_id"),
            "run_ids": b.user_attrs.get("run_ids", [b.user_attrs.get("run_id")]), "counts": counts}
