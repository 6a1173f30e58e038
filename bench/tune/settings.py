"""A suite's [tune] table: how `bench tune` searches. Every key is optional.

    [tune]
    trials = 8              # trials per study (one study per cell × recipe); --trials overrides
    objective = "auc"       # "final": held-out accuracy at the end of the budget; "auc": its mean over
                            # the budget (trapezoid over the evaluation fractions). Default: the suite's
                            # declared [report] primary when it is one of these, else "final"; the
                            # accuracy is the suite's [report] accuracy (greedy by default)
    metric = "eval/pass@64" # the evaluation column the objective reads: the suite's [report] accuracy
                            # by default; any accuracy the report can read (eval/acc_greedy,
                            # eval/acc_formatted, eval/avg_k, eval/pass_k, eval/acc_ood) or a point of
                            # the coverage curve, eval/pass@K with K a power of two <= the suite's
                            # eval.k, so that a recipe can be tuned for coverage or greedy skill
                            # rather than sampled pass@1 (the tuned file and report name it)
    pruner = "median"       # "median" | "hyperband" | "none"; on the evaluations at compute checkpoints
    startup_trials = 3      # TPE samples at random and the median pruner prunes nothing until this many
    seed = 1000             # the trials' training seed: outside the suite's seeds, so the tuned suite's
                            # runs are fresh draws and not a repeat of the best of N trials
    warmstarts = [1000]     # the warm starts (warmstart.seed) the tuning seeds start from, seed i from
                            # warmstarts[i mod len]: none of them a warm start the suite's evaluation
                            # runs use (refused otherwise), so a setting is not chosen on the very
                            # warm starts it is then judged on. Default: warmstart.seed + 1000 + i mod W,
                            # W the cell's warm starts (its regime's `warmstarts`, else 1)
    sampler_seed = 0        # TPE's seed (worker k uses sampler_seed + k)

    eval = {k = 4, sampled_examples = 500}   # the trials' evaluation, where it may be cheaper than the
                            # suite's: only k, sampled_examples and ood_examples (the objective's points
                            # and problems, hence what it estimates, stay the suite's)

    [tune.space.grpo]       # per recipe: change, add or (with false) drop search ranges; see space.py
    "train.lr" = {low = 1e-5, high = 1e-3, log = true}

    [tune.cells."gcd/nano/on_policy".space.grpo]   # per cell and recipe, applied after [tune.space.grpo]
    "train.lr" = {choices = [5e-5, 1e-4, 2e-4]}  # path by path: a grid centred where this cell's optimum is

Every trial of every recipe spends the cell's budget, so tuning is matched: the same number of
trials at the same per-trial budget for each recipe (pruned trials stop early and spend less).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from algorithms.errors import ConfigError
from algorithms.metrics import PASS_AT_MAX
from bench.config import ACCURACY_COLUMNS
from bench.suite import Suite, unknown
from bench.tune.space import flatten

OBJECTIVES = ("final", "auc")
PRUNERS = ("median", "hyperband", "none")
SAMPLERS = ("tpe", "grid")
DEFAULT_SEEDS = (1000,)
EVAL_KEYS = ("k", "sampled_examples", "ood_examples")  # what tune.eval may change: how many samples, not which points
WARMSTART_OFFSET = 1000  # default tuning warm starts: warmstart.seed + this + i mod W (see the module docstring)


@dataclass(frozen=True)
class TuneSettings:
    trials: int = 8
    objective: Literal["final", "auc"] = "final"
    pruner: Literal["median", "hyperband", "none"] = "median"
    startup_trials: int = 3
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    sampler: Literal["tpe", "grid"] = "tpe"
    sampler_seed: int = 0
    cell: str | None = None
    warmstarts: tuple[int, ...] | None = None  # None: WARMSTART_OFFSET's default (see the module docstring)
    space: dict = field(default_factory=dict)  # recipe -> {path: spec | false}
    cells: dict = field(default_factory=dict)  # cell name -> {"space": {recipe -> {path: spec | false}}}
    eval: dict = field(default_factory=dict)  # the trials' [eval] keys that differ from the suite's (EVAL_KEYS)
    accuracy: str = "eval/acc_greedy"  # the evaluation column the objective reads (tune.metric, else the suite's [report] accuracy)

    def __post_init__(self) -> None:
        if not isinstance(self.trials, int) or self.trials < 1:
            raise ConfigError(f"tune.trials must be an int >= 1, got {self.trials!r}")
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"tune.objective: {unknown('objective', self.objective, list(OBJECTIVES))}")
        if self.pruner not in PRUNERS:
            raise ConfigError(f"tune.pruner: {unknown('pruner', self.pruner, list(PRUNERS))}")
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"tune.sampler: {unknown('sampler', self.sampler, list(SAMPLERS))}")
        for f in ("startup_trials", "sampler_seed"):
            v = getattr(self, f)
            if not _natural(v):
                raise ConfigError(f"tune.{f} must be an int >= 0, got {v!r}")
        if (not isinstance(self.seeds, tuple) or not self.seeds or not all(map(_natural, self.seeds))
                or len(set(self.seeds)) != len(self.seeds)):
            raise ConfigError(f"tune.seeds must be a non-empty list of distinct ints >= 0, got {list(self.seeds)!r}")
        w = self.warmstarts
        if w is not None and (not isinstance(w, tuple) or not w or not all(map(_natural, w)) or len(set(w)) != len(w)):
            raise ConfigError(f"tune.warmstarts must be a non-empty list of distinct ints >= 0 (warm-start seeds), "
                              f"got {list(w) if isinstance(w, tuple) else w!r}")

    def space_table(self, recipe: str, cell: str) -> dict:
        """The suite's search-space table of `recipe` in `cell`: [tune.space.RECIPE], then
        [tune.cells.CELL.space.RECIPE] path by path (flattened dotted paths; false drops one)."""
        out = flatten(self.space.get(recipe) or {})
        out.update(flatten(((self.cells.get(cell) or {}).get("space") or {}).get(recipe) or {}))
        return out

    @property
    def seed(self) -> int:
        """The first tuning seed: the one a trial's base config is built with."""
        return self.seeds[0]


def _check_space(suite: Suite, space, where: str, table: str) -> None:
    """A {recipe: {path: spec}} table (`where` its key, `table` how a user writes it): known recipes."""
    if not isinstance(space, dict) or not all(isinstance(v, dict) for v in space.values()):
        raise ConfigError(f"{suite.path}: {where}: expected tables {table} of path = {{low, high}} or {{choices}} entries")
    for r in space:
        if r not in suite.recipes:
            raise ConfigError(f"{suite.path}: {where}.{r}: {unknown('recipe', r, list(suite.recipes))}")


def _check_cells(suite: Suite, cells) -> None:
    """[tune.cells.CELL.space.RECIPE] tables: known cells, only a `space` key, known recipes."""
    names = [c.name for c in suite.cells]
    if not isinstance(cells, dict):
        raise ConfigError(f"{suite.path}: tune.cells: expected tables [tune.cells.\"CELL\".space.RECIPE], got {cells!r}")
    for c, t in cells.items():
        if c not in names:
            raise ConfigError(f"{suite.path}: tune.cells.{c!r}: {unknown('cell', c, names)}")
        if not isinstance(t, dict) or set(t) - {"space"}:
            bad = sorted(set(t) - {"space"}) if isinstance(t, dict) else t
            raise ConfigError(f"{suite.path}: tune.cells.{c!r}: only a space table per cell "
                              f"([tune.cells.\"{c}\".space.RECIPE]), got {bad!r}")
        _check_space(suite, t.get("space", {}), f"tune.cells.{c!r}.space", f'[tune.cells."{c}".space.RECIPE]')


def _natural(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def from_suite(suite: Suite, **cli) -> TuneSettings:
    """The suite's [tune] table, then command-line values that are not None."""
    table = dict(suite.tune)
    names = [f.name for f in dataclasses.fields(TuneSettings) if f.name != "accuracy"] + ["seed", "metric"]
    if "accuracy" in table:
        raise ConfigError(f"{suite.path}: tune.accuracy: the column tuning reads is tune.metric (default: the "
                          "suite's [report] accuracy)")
    for k in table:
        if k not in names:
            raise ConfigError(f"{suite.path}: tune.{k}: {unknown('[tune] key', k, names)}")
    _check_space(suite, table.get("space", {}), "tune.space", "[tune.space.RECIPE]")
    _check_cells(suite, table.get("cells", {}))
    ev = table.get("eval", {})
    if not isinstance(ev, dict) or set(ev) - set(EVAL_KEYS):
        bad = sorted(set(ev) - set(EVAL_KEYS)) if isinstance(ev, dict) else ev
        raise ConfigError(f"{suite.path}: tune.eval: got {bad!r}; a trial's evaluation may change only "
                          f"{', '.join(EVAL_KEYS)} (its points, problems and temperature are what the objective "
                          "estimates, so they stay the suite's)")
    table.update({k: v for k, v in cli.items() if v is not None})
    if "seed" in table:
        if "seeds" in table:
            raise ConfigError(f"{suite.path}: tune.seed and tune.seeds both given; keep one (seeds = [..] for several)")
        table["seeds"] = [table.pop("seed")]
    for key in ("seeds", "warmstarts"):
        if key in table:
            table[key] = tuple(table[key]) if isinstance(table[key], list) else table[key]
    if "cell" in table:
        names = [c.name for c in suite.cells]
        if table["cell"] not in names:
            raise ConfigError(f"{suite.path}: tune.cell: {unknown('cell', table['cell'], names)}")
    if "objective" not in table:  # tune for what the report will compare: its declared primary metric
        table["objective"] = suite.report.primary if suite.report.primary in OBJECTIVES else "final"
    k = table.get("eval", {}).get("k", suite.eval.k)
    table["accuracy"] = _metric(suite, table.pop("metric"), k) if "metric" in table else suite.report.accuracy
    try:
        s = TuneSettings(**table)
    except ConfigError as e:
        raise ConfigError(f"{suite.path}: {e}") from None
    both = sorted(set(s.seeds) & set(suite.all_seeds))
    if both:
        raise ConfigError(f"{suite.path}: tuning seed(s) {both} are among the suite's evaluation seeds "
                          f"{list(suite.all_seeds)}: a tuned run at such a seed would repeat a trial, the best of "
                          "N draws, an optimistic one; choose tune.seeds outside them (e.g. from 1000)")
    if s.warmstarts is not None:
        used = evaluation_warmstarts(suite)
        clash = sorted(set(s.warmstarts) & set(used))
        if clash:
            raise ConfigError(f"{suite.path}: tune.warmstarts {clash} {'is' if len(clash) == 1 else 'are'} among the "
                              f"warm starts the suite's evaluation runs use {sorted(used)}: a setting chosen on the warm "
                              "starts it is then judged on is chosen for them; choose others (e.g. from "
                              f"{suite.warmstart.seed + WARMSTART_OFFSET}), or leave tune.warmstarts out for that default")
    return s


def _metric(suite: Suite, v, k: int) -> str:
    """tune.metric, checked: an accuracy column the report reads, or eval/pass@K that every trial's
    evaluation logs (K a power of two, K <= k: tune.eval's k, else the suite's eval.k)."""
    ks = [1 << i for i in range(min(k, PASS_AT_MAX).bit_length())] if k > 0 else []
    valid = [*ACCURACY_COLUMNS, *(f"eval/pass@{x}" for x in ks)]
    if v not in valid:
        why = (f"the trials' eval.k = {k} logs pass@1..pass@{ks[-1]}" if ks else "eval.k = 0 logs no sampled metric") \
            if isinstance(v, str) and v.startswith("eval/pass@") else "unknown metric"
        raise ConfigError(f"{suite.path}: tune.metric: got {v!r} ({why}); expected one of {', '.join(valid)}")
    return v


def evaluation_warmstarts(suite: Suite) -> set[int]:
    """Every warm-start seed a run of the suite's expansion starts from (over its cells and seeds)."""
    return {suite.warmstart_seed(cell, seed) for cell in suite.cells for seed in suite.all_seeds}


def tuning_warmstarts(suite: Suite, cell, settings: TuneSettings) -> tuple[int, ...]:
    """The warm start (warmstart.seed) of each tuning seed in `cell`, in settings.seeds' order: from
    tune.warmstarts (seed i: warmstarts[i mod len]), else warmstart.seed + WARMSTART_OFFSET + i mod W,
    W the cell's warm starts (a regime's `warmstarts`, else 1). Refused where one is an evaluation
    warm start (possible only for the default when the suite's seeds reach WARMSTART_OFFSET)."""
    cell = suite.cell(cell)
    n = (cell.regime.warmstarts if cell.regime else None) or 1
    own = settings.warmstarts or tuple(suite.warmstart.seed + WARMSTART_OFFSET + i for i in range(n))
    out = tuple(own[i % len(own)] for i in range(len(settings.seeds)))
    clash = sorted(set(out) & evaluation_warmstarts(suite))
    if clash:
        raise ConfigError(f"{suite.path}: the tuning warm starts {clash} of cell {cell.name} are among the evaluation's "
                          f"{sorted(evaluation_warmstarts(suite))}; set tune.warmstarts to others")
    return out
