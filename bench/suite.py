"""Suites: a TOML file of tasks × scales × recipes × seeds, validated into a frozen `Suite`.

    recipes = ["grpo", "dapo"]
    seeds = [0, 1, 2]                 # or a count: seeds = 3
    tasks = ["addition", "chain_sum"]
    scales = ["nano"]
    device = "cpu"                    # optional; cpu, cuda, cuda:N, mps

    [budget]                          # one per (task, scale) cell: FLOPs, or "40steps" / "5e5tokens"
    "addition/nano" = 2e12            # (or `budget = 2e12` at the top level for every cell)
    [lr]                              # optional, per task/scale cell: its runs' learning rate
    "addition/small" = 3e-5           # (else [train] lr; a regime's lr still wins)
    "chain_sum/nano" = 2e12

    [task_params.addition]            # per task: a difficulty preset and/or task parameters
    difficulty = "easy"

    [train]      ...                  # bench.config.TrainConfig fields
    [eval]       ...                  # bench.config.EvalSchedule fields (the compute fractions;
                                      # spacing = "log" with points and first: dense early)
    [warmstart]  ...                  # bench.warmstart.WarmStartConfig fields
    [regimes.on_policy]               # optional off-policy regimes: cells become task/scale/regime and
    lag = 0                           # every recipe of a cell runs with this rollout lag and these
    [regimes.stale]                   # updates per batch (epochs × minibatches)
    lag = 2
    epochs = 2
    recipes = ["grpo", "dapo"]        # optional: only these of the suite's recipes run in this regime
    cells = ["addition/nano"]         # optional: only in these task/scale cells
    seeds = 20                        # optional: this regime's cells run more (or other) seeds
    budget = 1e11                     # optional: this regime's cells' budget (else the suite's [budget])
    warmstarts = 3                    # optional: 3 independently trained warm starts (seed s uses s mod 3)
    grad_clip = 0                     # optional: this regime's gradient-norm clip (0: off; else [train]'s)
    [report]                          # how the report decides (not hashed: changing it reruns nothing)
    primary = "auc"                   # auc | final | plateau | compute_to:0.5 (declared before the runs)
    baseline = "grpo"                 # what every recipe is compared with, paired by seed
    margin = 0.02                     # equivalence margin and the difference the power analysis sizes for
    plateau_from = 0.75               # plateau: mean accuracy of the evaluations at >= this fraction
    accuracy = "eval/acc_formatted"   # the accuracy every statistic reads (default eval/acc_greedy;
                                      # eval/acc_formatted, eval/avg_k, eval/pass_k, eval/acc_ood)
    [claims.NAME]                     # optional: a literature claim as a paired contrast (report: Claims)
    paper = "Yu et al. 2025, DAPO"    # a = recipe or recipe@cell, b likewise; metric auc | final |
    claim = "clip-higher keeps entropy up"   # plateau | auc_to:FLOPS | steps:COLUMN | slope:COLUMN;
                                             # expect greater | less | equivalent. auc_to:1e11: mean
                                             # accuracy over the first 1e11 FLOPs, for arms whose cells'
                                             # budgets differ; slope: a column's slope over the run
                                             # (growth); mechanism = "steps:COLUMN" beside an accuracy
                                             # claim
    cell = "addition/nano/stale"
    a = "dapo"
    b = "grpo"
    metric = "steps:policy/entropy"
    expect = "greater"
    engage = "steps:policy/clip_frac_high"   # the engagement gate: the part acts when |the metric| on
    engage_min = 0.02                        # engage_arm (a, b, or diff = |a − b|; default a) reaches
    engage_arm = "b"                         # engage_min; below it the claim is `not engaged`
    [resources]                       # execution only, never hashed
    threads = 1                       # torch threads per run (0: divide the machine's cores)
    gpus_per_run = 1.0                # Ray: GPUs a cuda run reserves (fractions pack runs on a GPU)

    [overrides.dapo]                  # per recipe, dotted RunConfig paths (recipe.* and train.* only)
    "recipe.objective.eps_high" = 0.3

    [variants.grpo_cliphigher]        # a recipe of the suite's own: its base (a recipe or an earlier
    base = "grpo"                     # variant) with the parts or fields it changes, dotted recipe paths;
    "objective.eps_high" = 0.28       # named in recipes like any recipe, hashed by its parts; a variant
    [variants.grpo_batchstd]          # that changes nothing is refused. A table with another `type`
    base = "grpo"                     # replaces the part whole
    advantage = {type = "group_norm", scale = "batch"}

    [tune]                            # `bench tune` settings and search spaces (bench/tune/settings.py)
    trials = 8

Every run of a cell gets the same budget, evaluation fractions, task and warm start; overrides
may change only the recipe and its training settings, so comparisons stay matched. The tables
are bench.config's typed sections (`SuiteFile` is the file's schema), so a type or range error
reads like any other config error; names are then checked against the registries. Errors name
the file, the key and the valid choices. Overrides (and tuned values) are deep merges of tables
on each run's config, validated once. The validated `Suite` derives from `SuiteFile`: a suite field
is declared once, there, and read on the Suite (`suite.train`); see `Suite` for the few it resolves.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, field_validator

import algorithms
from algorithms.errors import InputError
from algorithms.serialize import from_dict as part_from_dict
from bench import models, rewards as reward_fns, tasks
from bench.config import (ACCURACY_METRICS, DEFAULT_PRIMARY, PRIMARY_METRICS, Budget, Claim, EvalSchedule, Regime, ReportSettings,
                          Resources, RolloutConfig, RunConfig, Seed, TrainConfig, WarmStartConfig, _count_or_list, check_device)
from bench.results import step_schema
from bench.typed import ConfigError, Section, merge, unflatten
from bench.textfile import read_text

SUITES_DIR = Path(__file__).resolve().parent.parent / "suites"
OVERRIDABLE = ("recipe", "train")  # budget, eval, task, scale, warm start stay matched within a cell
__all__ = ["DEFAULT_PRIMARY", "PRIMARY_METRICS", "Cell", "ReportSettings", "Resources", "Suite", "SuiteError", "SuiteFile",
           "from_dict", "load", "names", "resolve", "unknown"]


class SuiteError(ConfigError):
    """A bad suite file: the message starts with the file and the key (a ConfigError: one line, exit 2)."""

    def __init__(self, path: Path | str, key: str, msg: str):
        super().__init__(f"{path}: {key}: {msg}" if key else f"{path}: {msg}")


def _one_or_many(v: Any) -> Any:
    return [v] if isinstance(v, str) else v


Names = Annotated[list[str], BeforeValidator(_one_or_many), Field(min_length=1)]


class SuiteFile(Section):
    """The schema of a suite file, where each suite field is declared once (`Suite` derives from it);
    names are checked against the registries in `from_dict`."""

    WHERE: ClassVar[str] = ""
    recipes: Names
    seeds: Annotated[list[Seed], BeforeValidator(_count_or_list),
                     Field(min_length=1, description="a count, seeds = 3, or a list, seeds = [0, 1, 2]")]
    tasks: Names
    scales: Names
    budget: Any = Field(description="FLOPs, or a string with a unit ('40steps'), or a [budget] table per task/scale")
    # per task/scale cell: the learning rate of its runs (else [train] lr): scales fit other step sizes
    lr: dict[str, Any] = {}
    description: str = ""
    device: Annotated[str, BeforeValidator(check_device)] = "cpu"
    rollout: RolloutConfig = RolloutConfig()
    task_params: dict[str, dict[str, Any]] = {}
    train: TrainConfig = TrainConfig()
    eval: EvalSchedule = EvalSchedule()
    warmstart: WarmStartConfig = WarmStartConfig()
    rewards: dict[str, Any] = dict(reward_fns.DEFAULT)  # bench/rewards.py: reward function -> weight
    resources: Resources = Resources()
    overrides: dict[str, dict[str, Any]] = {}
    tune: dict[str, Any] = {}  # validated by bench.tune when it tunes
    regimes: dict[str, dict[str, Any]] = {}  # NAME -> Regime fields (the name comes from the key)
    report: ReportSettings = ReportSettings()  # how the report reads the suite; never hashed
    claims: dict[str, dict[str, Any]] = {}  # NAME -> Claim fields (the name comes from the key); never hashed
    variants: dict[str, Any] = {}  # NAME -> {base, description?, recipe paths}: recipes of the suite's own

    @field_validator("rewards", mode="before")
    @classmethod
    def _rewards(cls, v: Any) -> Any:
        return reward_fns.check(v)

    @field_validator("lr", mode="before")
    @classmethod
    def _lrs(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            raise ConfigError(f"lr: got {v!r}; expected a table of task/scale = learning rate")
        for key, x in v.items():
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
                raise ConfigError(f"lr.{key}: got {x!r}; expected a finite number > 0")
        return {k: float(x) for k, x in v.items()}

    @field_validator("warmstart", mode="before")
    @classmethod
    def _no_warmstart(cls, v: Any) -> Any:
        return {"steps": 0} if v == "none" else v  # warmstart = "none": the model as it is, no SFT

    @field_validator("recipes", "tasks", "scales", "seeds")
    @classmethod
    def _distinct(cls, v: list) -> list:
        if len(set(v)) != len(v):
            raise ConfigError(f"duplicates in {v}")
        return v


@dataclass(frozen=True)
class Cell:
    task: str
    scale: str
    budget: Budget
    regime: Regime | None = None  # None: every recipe keeps its own updates per batch, lag 0
    lr: float | None = None  # the suite's [lr] for this task/scale; None: its [train] lr

    @property
    def name(self) -> str:
        return f"{self.task}/{self.scale}" + (f"/{self.regime.name}" if self.regime else "")


@dataclass(frozen=True)
class Variant:
    """A recipe of the suite's own: `base` (a registered recipe or an earlier variant) with the
    parts or fields its table changes. It runs, hashes, tunes and reports like a registered recipe;
    its search space is that of the registered recipe at the root of its chain."""

    name: str
    base: str
    root: str  # the registered recipe the chain of bases starts from
    recipe: algorithms.Recipe
    changes: dict[str, tuple]  # field path -> (the base's value, the variant's)


# SuiteFile's fields that Suite declares again, in their validated form (every other field it inherits)
RESOLVED = ("recipes", "seeds", "overrides", "regimes", "claims", "variants")


class Suite(SuiteFile):
    """A validated suite: the file's fields (SuiteFile's, read here as validated) and what validation
    makes of them. A suite field is declared once, on SuiteFile; only a field whose validated form
    differs from the file's is declared again here, with that form (RESOLVED), and a field that exists
    only after validation is added below them. tests/harness/test_suite_model.py fails on drift.
    Build one with `load` or `from_dict`; `suite.replace(...)` is a copy whose fields are type-checked again."""

    # the file's fields in their validated form (SuiteFile declares them as written)
    recipes: tuple[str, ...]  # file: entries replaced by the names of their variants
    seeds: tuple[Seed, ...]
    overrides: dict[str, dict] = {}  # recipe -> nested tables merged into its runs (the file's dotted paths)
    regimes: tuple[Regime, ...] = ()  # in file order, each named by its table's key
    claims: tuple[Claim, ...] = ()  # in file order, each named by its table's key
    variants: dict[str, Variant] = {}  # NAME -> the recipe its table builds, bases first
    # what only validation makes
    name: str  # the file's stem
    path: Path
    cells: tuple[Cell, ...]  # tasks × scales (× regimes), each with its budget and lr
    # (cell name, recipe) -> {dotted path: value}: tuned values (`bench suite --tuned`), applied last
    cell_overrides: dict[tuple[str, str], dict] = {}
    tuned_from: Path | None = None  # the tuned settings file applied (suites/tuned/NAME.toml or --tuned-file)

    def recipe(self, name: str) -> algorithms.Recipe:
        """A recipe of the suite by name: one of its variants, else the registry's."""
        return self.variants[name].recipe if name in self.variants else algorithms.get(name)

    def registered(self, name: str) -> str:
        """The registered recipe a suite recipe is (a variant: the root of its chain of bases)."""
        return self.variants[name].root if name in self.variants else name

    def run_config(self, cell: Cell, recipe: str, seed: int, extra: dict | None = None) -> RunConfig:
        """The config of one run, built once (RunConfig.compose); `extra` (dotted paths) merged last."""
        tags = {"suite": self.name, "cell": cell.name} | ({"regime": cell.regime.name} if cell.regime else {})
        train = self.train if cell.lr is None else self.train.replace(lr=cell.lr)
        patch = self.overrides.get(recipe, {})
        tuned = self.cell_overrides.get((cell.name, recipe))
        if tuned is not None:
            patch = merge(patch, unflatten({**tuned, "tags.tuned": True}))
        if cell.regime:  # last: every recipe of the cell gets the regime, whatever it overrides
            patch = merge(patch, cell.regime.patch())
            if cell.regime.warmstarts:
                patch = merge(patch, {"warmstart": {"seed": self.warmstart_seed(cell, seed)}})
        if extra:
            patch = merge(patch, unflatten(extra))
        return RunConfig.compose(patch, recipe=self.recipe(recipe), task=cell.task, scale=cell.scale, budget=cell.budget,
                                 seed=seed, task_params=dict(self.task_params.get(cell.task, {})), train=train,
                                 eval=self.eval, warmstart=task_warmstart(self.warmstart, {c.task for c in self.cells}, cell.task),
                                 rollout=self.rollout, tags=tags,
                                 rewards=self.rewards, device=self.device, threads=self.resources.threads)

    def warmstart_seed(self, cell: Cell | str, seed: int) -> int:
        """The warm start a run of `seed` starts from in `cell` (its warmstart.seed)."""
        n = self.cell(cell).regime.warmstarts if self.cell(cell).regime else None
        return self.warmstart.seed + (seed % n if n else 0)

    def cell(self, cell: Cell | str) -> Cell:
        """A cell of the suite by name (a Cell passes through)."""
        return cell if isinstance(cell, Cell) else next(c for c in self.cells if c.name == cell)

    def cell_recipes(self, cell: Cell | str) -> tuple[str, ...]:
        """The recipes that run in a cell, in the suite's order (a regime may name a subset)."""
        cell = self.cell(cell)
        only = cell.regime.recipes if cell.regime else None
        return self.recipes if only is None else tuple(r for r in self.recipes if r in only)

    def cell_seeds(self, cell: Cell | str) -> tuple[int, ...]:
        """The seeds a cell runs: its regime's `seeds` where it sets them, else the suite's."""
        cell = self.cell(cell)
        return cell.regime.seeds if cell.regime and cell.regime.seeds is not None else self.seeds

    @property
    def all_seeds(self) -> tuple[int, ...]:
        """Every seed some cell runs, in order (the suite's first, then the regimes' extra ones)."""
        out = list(self.seeds)
        for c in self.cells:
            out += [s for s in self.cell_seeds(c) if s not in out]
        return tuple(out)

    def expand(self, only: dict[str, list[str]] | None = None) -> list[RunConfig]:
        """Run configs in plan order (cell, recipe, seed), restricted by `only` (see parse_only)."""
        only = only or {}
        out = []
        for cell in self.cells:
            for recipe in self.cell_recipes(cell):
                for seed in self.cell_seeds(cell):
                    labels = {"recipe": recipe, "seed": str(seed), "cell": cell.name, "task": cell.task,
                              "scale": cell.scale, "regime": cell.regime.name if cell.regime else ""}
                    claims = {c.name for c in self.claims if (recipe, cell.name) in (c.arm("a"), c.arm("b"))}
                    if all(labels[k] in v for k, v in only.items() if k != "claim") and (
                            "claim" not in only or claims & set(only["claim"])):
                        out.append(self.run_config(cell, recipe, seed))
        return out

    def labels(self) -> dict[str, list[str]]:
        """The values each --only key may take in this suite."""
        return {"recipe": list(self.recipes), "seed": [str(s) for s in self.all_seeds],
                "cell": [c.name for c in self.cells], "task": sorted({c.task for c in self.cells}),
                "scale": sorted({c.scale for c in self.cells}), "regime": [r.name for r in self.regimes],
                "claim": [c.name for c in self.claims]}

    def parse_only(self, specs: list[str]) -> dict[str, list[str]]:
        """['recipe=grpo,dapo', 'seed=0'] -> {'recipe': ['grpo', 'dapo'], 'seed': ['0']}, validated."""
        return parse_filters(specs, self.labels(), f"in suite {self.name}")


# ---------------------------------------------------------------------------------------------
def _per_task(params: dict, suite_tasks) -> bool:
    """warmstart.task_params keyed by task ([warmstart.task_params.gcd] max_value = 99): every key a task
    of the suite and every value a table; else one table for every task."""
    return bool(params) and all(k in suite_tasks and isinstance(v, dict) for k, v in params.items())


def task_warmstart(ws: WarmStartConfig, suite_tasks, task: str) -> WarmStartConfig:
    """The suite's warm-start settings for one task: a per-task warmstart.task_params reduced to its table."""
    if not _per_task(ws.task_params, suite_tasks):
        return ws
    return ws.replace(task_params=dict(ws.task_params.get(task, {})))


def parse_filters(specs: list[str], valid: dict[str, list[str]], where: str) -> dict[str, list[str]]:
    """--only specs ['KEY=V1,V2', ...] -> {KEY: [V1, V2]}, every key and value one of `valid`'s."""
    out: dict[str, list[str]] = {}
    for spec in specs:
        key, sep, vals = spec.partition("=")
        key = key.strip()
        if not sep or key not in valid:
            raise algorithms.InputError(f"--only {spec!r}: expected KEY=V1,V2 with KEY one of {', '.join(valid)}")
        for v in (v.strip() for v in vals.split(",")):
            if v not in valid[key]:
                raise algorithms.InputError(f"--only {spec!r}: {unknown(key, v, valid[key])} ({where})")
            out.setdefault(key, []).append(v)
    return out


def unknown(what: str, value: object, choices: list[str]) -> str:
    msg = f"unknown {what} {value!r}; valid: {', '.join(map(str, choices))}"
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
    return msg + (f" (did you mean {close[0]!r}?)" if close else "")


def names() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.toml"))


def resolve(name_or_path: str | Path) -> Path:
    """A suite name in suites/ or a path to a .toml file."""
    s = str(name_or_path)
    if s.endswith(".toml") or "/" in s or Path(s).is_file():
        p = Path(s)
        if not p.is_file():
            raise algorithms.MissingInput(f"suite file {s} does not exist")
        return p
    p = SUITES_DIR / f"{s}.toml"
    if not p.is_file():
        raise algorithms.InputError(unknown("suite", s, names()) + f" (or a path to a .toml file; suites live in {SUITES_DIR})")
    return p


def load(name_or_path: str | Path, tuned: bool = True) -> Suite:
    """A suite file, with its committed tuned settings (suites/tuned/NAME.toml) applied when they
    exist and `tuned` is true (`bench suite --defaults` passes false)."""
    path = resolve(name_or_path)
    text = read_text(path)  # file:line errors for non-UTF-8 bytes, huge files, huge lines
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        lines = text.splitlines()
        shown = f": {lines[int(m.group(1)) - 1].strip()!r}" if m and 0 < int(m.group(1)) <= len(lines) else ""
        raise SuiteError(path, "", f"invalid TOML: {e}{shown}") from None
    suite = from_dict(data, path)
    beside = tuned_beside(path)
    return apply_tuned(suite, beside) if tuned and beside.is_file() else suite


def from_dict(data: dict, path: Path | str = "<suite>") -> Suite:
    """Types and ranges from the schema (one line per error), then names against the registries."""
    path = Path(path)
    err = lambda key, msg: SuiteError(path, key, msg)  # noqa: E731
    report = data.get("report")
    if isinstance(report, dict) and "declared" in report:  # derived below, never written by hand
        raise err("report.declared", "unknown field 'declared'; valid: primary, baseline, margin, plateau_from")
    try:
        f = SuiteFile.build(data)
    except ConfigError as e:
        raise SuiteError(path, "", str(e)) from None
    if isinstance(report, dict) and "primary" in report:
        f = f.replace(report=f.report.replace(declared=True))

    f = _file_recipes(f, path, err)
    variants = _variants(f.variants, err)
    for key, valid in (("recipes", algorithms.names() + list(variants)), ("tasks", tasks.names())):
        for v in getattr(f, key):
            if v not in valid:
                raise err(key, unknown(key.rstrip("s"), v, valid))
    for name in variants:
        if name not in f.recipes:
            raise err(f"variants.{name}", f"not among the suite's recipes ({', '.join(f.recipes)}); name it in "
                      "recipes to run it, or remove the table")
    for s in f.scales:
        try:
            models.get(s)
        except InputError as e:
            raise err("scales", str(e)) from None
    for t, params in f.task_params.items():
        if t not in f.tasks:
            raise err(f"task_params.{t}", unknown("task", t, f.tasks) + " (task_params keys are the suite's tasks)")
        try:
            tasks.get(t, **params)
        except (InputError, TypeError, OSError) as e:  # TypeError: a parameter of the wrong type; OSError: a data file
            raise err(f"task_params.{t}", str(e)) from None
    if f.warmstart.task_params:
        per_task = _per_task(f.warmstart.task_params, f.tasks)
        for t in f.tasks:  # the SFT data of every task: its task_params with warmstart.task_params over them
            try:
                tasks.get(t, **task_warmstart(f.warmstart, f.tasks, t).sft_params(f.task_params.get(t, {})))
            except (InputError, TypeError, OSError) as e:
                where = f"warmstart.task_params.{t}" if per_task else "warmstart.task_params"
                raise err(where, str(e) + ("" if per_task else f" (they apply to every task of the suite: "
                                           f"{', '.join(f.tasks)}; [warmstart.task_params.TASK] sets one task's)")) \
                    from None
    if f.report.baseline is not None and f.report.baseline not in f.recipes:
        raise err("report.baseline", unknown("recipe", f.report.baseline, f.recipes) + " (the suite's recipes)")

    regimes = []
    grid = [f"{t}/{s}" for t in f.tasks for s in f.scales]
    for name, table in f.regimes.items():  # in file order
        if "name" in table:
            raise err(f"regimes.{name}.name", "the table's key is the regime's name")
        try:
            regimes.append(Regime.build({"name": name, **table}, where=f"regimes.{name}"))
        except ConfigError as e:
            raise SuiteError(path, "", str(e)) from None
        r = regimes[-1]
        for key, names, valid, what in (("recipes", r.recipes, f.recipes, "recipe"), ("cells", r.cells, grid, "cell")):
            for n in names or ():
                if n not in valid:
                    raise err(f"regimes.{name}.{key}", unknown(what, n, valid) + f" (the suite's {key})")
        base = f.report.baseline or ("grpo" if "grpo" in f.recipes else f.recipes[0])
        if r.recipes is not None and base not in r.recipes:
            raise err(f"regimes.{name}.recipes", f"must include the report's baseline {base!r}: every comparison "
                      "in a cell is paired with it")
    overrides = {}
    for recipe, table in f.overrides.items():
        if recipe not in f.recipes:
            raise err(f"overrides.{recipe}", unknown("recipe", recipe, f.recipes) + " (overrides apply to the suite's recipes)")
        patch = unflatten(table, f"{path}: overrides.{recipe}")
        for k in patch:
            if k not in OVERRIDABLE:
                raise err(f"overrides.{recipe}.{k}", f"only {' and '.join(o + '.*' for o in OVERRIDABLE)} may be "
                          "overridden per recipe; budget, eval, task, scale and warm start stay matched within a cell")
        if regimes and "updates" in patch.get("recipe", {}):
            raise err(f"overrides.{recipe}.recipe.updates", "set by the suite's [regimes] for every recipe alike, "
                      "so a cell compares recipes at one regime")
        for key in ("lr", "grad_clip"):
            if any(getattr(r, key) is not None for r in regimes) and key in patch.get("train", {}):
                raise err(f"overrides.{recipe}.train.{key}", f"set by the suite's [regimes] (a regime gives {key}) for "
                          "every recipe alike")
        overrides[recipe] = patch

    # every field of the file as validated, the resolved ones in their Suite form (claims: below, from the suite)
    suite = Suite(**{**dict(f), "recipes": tuple(f.recipes), "seeds": tuple(f.seeds), "overrides": overrides,
                     "regimes": tuple(regimes), "claims": (), "variants": variants},
                  name=path.stem, path=path, cells=tuple(_cells(f, regimes, err)))
    claims = []
    for name, table in f.claims.items():  # in file order
        if not isinstance(table, dict):
            raise err(f"claims.{name}", f"got {table!r}; expected a table")
        if "name" in table:
            raise err(f"claims.{name}.name", "the table's key is the claim's name")
        try:
            c = Claim.build({"name": name, **table}, where=f"claims.{name}")
        except ConfigError as e:
            raise SuiteError(path, "", str(e)) from None
        cell_names = [x.name for x in suite.cells]
        if c.cell not in cell_names:
            raise err(f"claims.{name}.cell", unknown("cell", c.cell, cell_names))
        for which in ("a", "b"):
            recipe, cell = c.arm(which)
            if cell not in cell_names:
                raise err(f"claims.{name}.{which}", unknown("cell", cell, cell_names) + " (after '@')")
            if recipe not in suite.cell_recipes(cell):
                raise err(f"claims.{name}.{which}", unknown("recipe", recipe, list(suite.cell_recipes(cell)))
                          + f" (the recipes of cell {cell})")
        if c.arm("a") == c.arm("b"):
            raise err(f"claims.{name}.b", "the same arm as a: a claim contrasts two arms")
        metric = c.metric
        if metric.startswith("auc_to:"):
            x = _auc_to(metric)
            if x is None:
                raise err(f"claims.{name}.metric", f"got {metric!r}; auc_to:FLOPS needs a compute > 0 in FLOPs, "
                          "e.g. auc_to:1e11")
            for which in ("a", "b"):
                budget = suite.cell(c.arm(which)[1]).budget
                if budget.kind != "flops" or budget.value < x:
                    raise err(f"claims.{name}.metric", f"{metric}: arm {which}'s cell {c.arm(which)[1]} has budget "
                              f"{budget}; auc_to needs FLOPs budgets of at least {x:g} in both arms")
        elif metric not in ACCURACY_METRICS:
            if (why := _step_metric_error(metric)) is not None:
                raise err(f"claims.{name}.metric", f"got {metric!r}; expected {', '.join(ACCURACY_METRICS)}, "
                          f"auc_to:FLOPS, {why}")
            if c.expect == "equivalent" and c.margin is None:
                raise err(f"claims.{name}.margin", f"an equivalence claim on a {metric.split(':')[0]}: metric needs "
                          "its own margin (in that metric's units)")
        if c.mechanism is not None:
            if not c.on_accuracy:
                raise err(f"claims.{name}.mechanism", f"the claim's metric {metric!r} is its mechanism already; "
                          "mechanism is for a claim decided on an accuracy metric")
            if (why := _step_metric_error(c.mechanism)) is not None:
                raise err(f"claims.{name}.mechanism", f"got {c.mechanism!r}; expected {why}")
        if (c.engage is None) != (c.engage_min is None):
            raise err(f"claims.{name}.{'engage_min' if c.engage_min is None else 'engage'}",
                      "an engagement gate needs both engage (the mechanism metric) and engage_min (the value at "
                      "which the part acts)")
        if c.engage is not None and (why := _step_metric_error(c.engage, gate=True)) is not None:
            raise err(f"claims.{name}.engage", f"got {c.engage!r}; expected {why}")
        claims.append(c)
    if claims:
        suite = suite.replace(claims=tuple(claims))
    for recipe in overrides:  # build the runs once: bad override paths and values fail here, not in a worker
        for cell in (c for c in suite.cells if recipe in suite.cell_recipes(c)):
            try:
                suite.run_config(cell, recipe, suite.seeds[0])
            except InputError as e:
                raise err(f"overrides.{recipe}", str(e)) from None
    return suite


_VARIANT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_RECIPE_FIELDS = tuple(f.name for f in dataclasses.fields(algorithms.Recipe) if f.name not in ("name", "description"))


def _step_metric_error(metric: str, gate: bool = False) -> str | None:
    """None when metric is steps:COLUMN or slope:COLUMN of a steps.parquet column (for an engagement
    gate also fall:COLUMN, and COLUMN may be A+B), else what is expected."""
    kind, _, col = metric.partition(":")
    kinds = ("steps", "slope", "fall") if gate else ("steps", "slope")
    cols = col.split("+") if gate else [col]
    bad = [c for c in cols if c not in step_schema()]
    if kind in kinds and not bad:
        return None
    return ("steps:COLUMN (its mean over the run) or slope:COLUMN (its slope over the run's budget)"
            + (", fall:COLUMN (its relative fall from the first budget bin to the last), COLUMN a steps.parquet "
               "column or several joined by '+'" if gate else " with COLUMN a steps.parquet column")
            + (f" ({unknown('column', bad[0], list(step_schema()))})" if kind in kinds else ""))


def _file_recipes(f: SuiteFile, path: Path, err) -> SuiteFile:
    """recipes = ["file:my_trl_run.toml"]: a variant file `bench recipe --write` wrote (its path relative to
    the suite file) joins the suite's [variants] under its table's name; one equal to a registered recipe
    (base only) is that recipe."""
    import tomllib

    if not any(r.startswith("file:") for r in f.recipes):
        return f
    names, tables = [], dict(f.variants)
    for r in f.recipes:
        if not r.startswith("file:"):
            names.append(r)
            continue
        p = path.parent / r[len("file:"):]
        try:
            tree = tomllib.loads(p.read_text(encoding="utf-8"))
        except OSError as e:
            raise err("recipes", f"{r}: {e.strerror or e} ({p})") from None
        except tomllib.TOMLDecodeError as e:
            raise err("recipes", f"{r}: {p}: not valid TOML: {e}") from None
        found = tree.get("variants")
        if set(tree) != {"variants"} or not isinstance(found, dict) or len(found) != 1:
            raise err("recipes", f"{r}: {p}: expected exactly one [variants.NAME] table")
        (name, table), = found.items()
        if isinstance(table, dict) and set(table) <= {"base", "description"} and table.get("base") in algorithms.names():
            names.append(table["base"])
            continue
        if name in tables:
            raise err("recipes", f"{r}: its variant {name!r} is also a [variants] table of the suite; rename one")
        tables[name] = table
        names.append(name)
    return f.replace(recipes=names, variants=tables)


def _variants(tables: dict[str, Any], err) -> dict[str, Variant]:
    """[variants.NAME] tables -> Variants, each built on its base (bases first; a cycle is refused)."""
    registered = algorithms.names()
    out: dict[str, Variant] = {}

    def build(name: str, chain: tuple[str, ...]) -> Variant:
        if name in out:
            return out[name]
        if name in chain:
            raise err(f"variants.{chain[0]}.base", "a cycle of bases: " + " -> ".join((*chain, name)))
        key = f"variants.{name}"
        table = tables[name]
        if not isinstance(table, dict):
            raise err(key, f"got {table!r}; expected a table: base = \"grpo\" and the parts or fields it changes")
        if name in registered:
            raise err(key, f"{name!r} is a registered recipe; a variant needs a name of its own (e.g. {name}_v2)")
        if not _VARIANT_NAME.match(name):
            raise err(key, "a variant's name is lower-case letters, digits and _, starting with a letter")
        for k in ("name", "type"):
            if k in table:
                raise err(f"{key}.{k}", "the table's key is the variant's name, and a variant is a recipe"
                          if k == "name" else "a variant is a recipe: its type is not set")
        base = table.get("base")
        if base is None:
            raise err(f"{key}.base", "missing: the recipe it changes, one of " + ", ".join(registered + list(tables)))
        if base not in registered and base not in tables:
            raise err(f"{key}.base", unknown("recipe", base, registered + [t for t in tables if t != name]))
        description = table.get("description", "")
        if not isinstance(description, str):
            raise err(f"{key}.description", f"got {description!r}; expected text")
        changes = {k: v for k, v in table.items() if k not in ("base", "description")}
        if not changes:
            raise err(key, f"changes nothing from {base}: give the parts or fields it changes, e.g. "
                      "\"objective.eps_high\" = 0.28")
        try:
            patch = unflatten(changes, key)
        except ConfigError as e:
            raise err("", str(e)) from None
        for k in patch:
            if k not in _RECIPE_FIELDS:
                hint = " (paths are relative to the recipe: write objective.eps_high, not recipe.objective.eps_high)" \
                    if k == "recipe" else ""
                raise err(f"{key}.{k}", unknown("recipe field", k, list(_RECIPE_FIELDS)) + hint)
        parent = build(base, (*chain, name)) if base in tables else None
        base_recipe = parent.recipe if parent else algorithms.get(base)
        try:
            recipe = part_from_dict(merge({**base_recipe.to_dict(), "name": name}, patch), key)
        except InputError as e:
            raise err("", str(e)) from None  # the message names the path (variants.NAME.part.field)
        diff = recipe.diff(base_recipe)
        if not diff:
            raise err(key, f"changes nothing from {base}: every value it gives equals {base}'s")
        text = description or f"{base} with " + ", ".join(f"{k} = {v[0]!r}" for k, v in diff.items())
        out[name] = Variant(name, base, parent.root if parent else base, recipe.replace(description=text), diff)
        return out[name]

    for name in tables:  # in file order, bases first
        build(name, ())
    return out


# ------------------------------------------------------------------------------------ tuned settings
TUNED_DIR = "tuned"  # suites/tuned/NAME.toml: a suite's committed tuned settings, applied by `load`


def tuned_beside(path: Path) -> Path:
    """Where a suite file's committed tuned settings live: suites/tuned/NAME.toml beside suites/NAME.toml."""
    return Path(path).parent / TUNED_DIR / f"{Path(path).stem}.toml"


def read_tuned(path: Path) -> dict[tuple[str, str], dict]:
    """(cell, recipe) -> {path: value}; cell is "" for a table that applies to every cell."""
    path = Path(path)
    try:
        data = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    if set(data) - {"overrides"}:
        raise ConfigError(f"{path}: unknown top-level keys {sorted(set(data) - {'overrides'})}; a tuned file holds "
                          "[overrides.\"TASK/SCALE\".RECIPE] tables")
    out = {}
    for key, table in data.get("overrides", {}).items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: overrides.{key}: expected a table")
        if "/" in key:  # a cell: recipes below it
            for recipe, values in table.items():
                out[(key, recipe)] = _tuned_values(path, f"overrides.\"{key}\".{recipe}", values)
        else:
            out[("", key)] = _tuned_values(path, f"overrides.{key}", table)
    return out


def _tuned_values(path: Path, where: str, values) -> dict:
    if not isinstance(values, dict) or any(isinstance(v, dict) for v in values.values()):
        raise ConfigError(f'{path}: {where}: expected dotted paths with values, e.g. "train.lr" = 1e-4')
    for p in values:
        if not p.startswith(tuple(o + "." for o in OVERRIDABLE)):
            raise ConfigError(f"{path}: {where}: {p!r}: only {' and '.join(o + '.*' for o in OVERRIDABLE)} paths")
    return dict(values)


def apply_tuned(suite: Suite, path: Path) -> Suite:
    """The suite with the file's tuned values; checks cells, recipes and values against the suite."""
    path = Path(path)
    if not path.is_file():
        raise algorithms.MissingInput(f"no tuned overrides at {path}; run `bench tune {suite.name} --all` first "
                                      "(or pass --tuned-file)")
    tables = read_tuned(path)
    cells = [c.name for c in suite.cells]
    per = {}
    for (cell, recipe), values in sorted(tables.items(), key=lambda kv: kv[0][0] != ""):  # a cell's table wins
        if recipe not in suite.recipes:
            raise ConfigError(f"{path}: {unknown('recipe', recipe, list(suite.recipes))} (in suite {suite.name})")
        if cell and cell not in cells:
            raise ConfigError(f"{path}: {unknown('cell', cell, cells)} (in suite {suite.name})")
        for c in ([cell] if cell else cells):
            per[(c, recipe)] = {**per.get((c, recipe), {}), **values}
    tuned = suite.replace(cell_overrides=per, tuned_from=path)
    for (c, recipe), values in per.items():  # bad paths or values fail here, before any run
        cell = next(x for x in suite.cells if x.name == c)
        if cell.regime:  # the regime's settings are applied last, so a tuned value for them would never act
            held = cell.regime.paths()
            for p in values:
                if p in held:
                    raise ConfigError(f"{path}: {c} {recipe}: {p!r} is set by the cell's regime "
                                      f"({cell.regime.name}) for every recipe alike, so a tuned value would never "
                                      f"act; the regime sets {', '.join(sorted(held))}")
        try:
            tuned.run_config(cell, recipe, suite.seeds[0])
        except InputError as e:
            raise ConfigError(f"{path}: {c} {recipe}: {e}") from None
    return tuned


def _auc_to(metric: str) -> float | None:
    """The compute X of a claim metric 'auc_to:X' (FLOPs), or None when X is not a number > 0."""
    try:
        x = float(metric.removeprefix("auc_to:"))
    except ValueError:
        return None
    return x if math.isfinite(x) and x > 0 else None


def _cells(f: SuiteFile, regimes: list[Regime], err) -> list[Cell]:
    grid = [f"{t}/{s}" for t in f.tasks for s in f.scales]
    table = f.budget if isinstance(f.budget, dict) else {g: f.budget for g in grid}
    for key in table:
        if key not in grid:
            raise err(f"budget.{key}", unknown("cell", key, grid) + " (keys are task/scale from tasks × scales)")
    for key in f.lr:
        if key not in grid:
            raise err(f"lr.{key}", unknown("cell", key, grid) + " (keys are task/scale from tasks × scales)")
    cells = []
    for g in grid:
        if g not in table:
            raise err(f"budget.{g}", f"missing budget for cell {g!r}; every task/scale cell needs one: {', '.join(grid)}")
        try:
            budget = Budget.build(table[g], where="")
        except ConfigError as e:
            raise err(f"budget.{g}", str(e)) from None
        t, s = g.split("/", 1)
        cells += [Cell(t, s, r.budget if r is not None and r.budget is not None else budget, r, f.lr.get(g))
                  for r in regimes or [None] if r is None or r.cells is None or g in r.cells]
    return cells
