"""A suite's [tune] table: how `bench tune` searches. Every key is optional.

    [tune]
    trials = 8              # trials per study (one study per cell × recipe); --trials overrides
    objective = "auc"       # "final": held-out accuracy at the end of the budget; "auc": its mean over
                            # the budget (trapezoid over the evaluation fractions). Default: the suite's
                            # declared [report] primary when it is one of these, else "final"; the
                            # accuracy is the suite's [report] accuracy (greedy by default)
    pruner = "median"       # "median" | "hyperband" | "none"; on the evaluations at compute checkpoints
    startup_trials = 3      # TPE samples at random and the median pruner prunes nothing until this many
    seed = 1000             # the trials' training seed: outside the suite's seeds, so the tuned suite's
                            # runs are fresh draws and not a repeat of the best of N trials
    sampler_seed = 0        # TPE's seed (worker k uses sampler_seed + k)

    [tune.space.grpo]       # per recipe: change, add or (with false) drop search ranges; see space.py
    "train.lr" = {low = 1e-5, high = 1e-3, log = true}

Every trial of every recipe spends the cell's budget, so tuning is matched: the same number of
trials at the same per-trial budget for each recipe (pruned trials stop early and spend less).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from algorithms.errors import ConfigError
from bench.suite import Suite, unknown

OBJECTIVES = ("final", "auc")
PRUNERS = ("median", "hyperband", "none")


@dataclass(frozen=True)
class TuneSettings:
    trials: int = 8
    objective: Literal["final", "auc"] = "final"
    pruner: Literal["median", "hyperband", "none"] = "median"
    startup_trials: int = 3
    seed: int = 1000
    sampler_seed: int = 0
    space: dict = field(default_factory=dict)  # recipe -> {path: spec | false}
    accuracy: str = "eval/acc_greedy"  # the evaluation column the objective reads (the suite's [report] accuracy)

    def __post_init__(self) -> None:
        if not isinstance(self.trials, int) or self.trials < 1:
            raise ConfigError(f"tune.trials must be an int >= 1, got {self.trials!r}")
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"tune.objective: {unknown('objective', self.objective, list(OBJECTIVES))}")
        if self.pruner not in PRUNERS:
            raise ConfigError(f"tune.pruner: {unknown('pruner', self.pruner, list(PRUNERS))}")
        for f in ("startup_trials", "seed", "sampler_seed"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError(f"tune.{f} must be an int >= 0, got {v!r}")


def from_suite(suite: Suite, **cli) -> TuneSettings:
    """The suite's [tune] table, then command-line values that are not None."""
    table = dict(suite.tune)
    names = [f.name for f in dataclasses.fields(TuneSettings)]
    for k in table:
        if k not in names:
            raise ConfigError(f"{suite.path}: tune.{k}: {unknown('[tune] key', k, names)}")
    space = table.get("space", {})
    if not isinstance(space, dict) or not all(isinstance(v, dict) for v in space.values()):
        raise ConfigError(f"{suite.path}: tune.space: expected tables [tune.space.RECIPE] of path = {{low, high}} entries")
    for r in space:
        if r not in suite.recipes:
            raise ConfigError(f"{suite.path}: tune.space.{r}: {unknown('recipe', r, list(suite.recipes))}")
    if "accuracy" in table:
        raise ConfigError(f"{suite.path}: tune.accuracy: set by the suite's [report] accuracy, which tuning reads")
    table.update({k: v for k, v in cli.items() if v is not None})
    if "objective" not in table:  # tune for what the report will compare: its declared primary metric
        table["objective"] = suite.report.primary if suite.report.primary in OBJECTIVES else "final"
    table["accuracy"] = suite.report.accuracy
    try:
        s = TuneSettings(**table)
    except ConfigError as e:
        raise ConfigError(f"{suite.path}: {e}") from None
    if s.seed in suite.all_seeds:
        raise ConfigError(f"{suite.path}: tune.seed = {s.seed} is one of the suite's seeds {list(suite.all_seeds)}: the "
                          "tuned suite's run at that seed would repeat the best trial, an optimistic draw; "
                          "choose a seed outside them")
    return s
