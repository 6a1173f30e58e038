"""Suites: a TOML file of tasks × scales × recipes × seeds, validated into a frozen `Suite`.

    recipes = ["grpo", "dapo"]
    seeds = [0, 1, 2]                 # or a count: seeds = 3
    tasks = ["addition", "chain_sum"]
    scales = ["nano"]
    device = "cpu"                    # optional; cpu, cuda, cuda:N, mps

    [budget]                          # one per (task, scale) cell: FLOPs, or "40steps" / "5e5tokens"
    "addition/nano" = 2e12            # (or `budget = 2e12` at the top level for every cell)
    "chain_sum/nano" = 2e12

    [task_params.addition]            # per task: a difficulty preset and/or task parameters
    difficulty = "easy"

    [train]      ...                  # bench.config.TrainConfig fields
    [eval]       ...                  # bench.config.EvalSchedule fields (the compute fractions)
    [warmstart]  ...                  # bench.warmstart.WarmStartConfig fields
    [resources]                       # execution only, never hashed
    threads = 1                       # torch threads per run (0: divide the machine's cores)
    gpus_per_run = 1.0                # Ray: GPUs a cuda run reserves (fractions pack runs on a GPU)

    [overrides.dapo]                  # per recipe, dotted RunConfig paths (recipe.* and train.* only)
    "recipe.objective.eps_high" = 0.3

    [tune]                            # `bench tune` settings and search spaces (bench/tune/settings.py)
    trials = 8

    [regimes.on_policy]               # optional off-policy regimes: each one a cell axis (below)
    [regimes.lag2]
    lag = 2                           # rollout.lag: rollouts of step t sampled by the policy of step t − 2
    [regimes.mb4]
    minibatches = 4                   # recipe.updates.minibatches (and epochs): updates per rollout batch
    lr = 5e-5                         # optional: train.lr for every recipe in this regime

    [report]                          # how the report decides (not hashed: changing it reruns nothing)
    primary = "auc"                   # auc | final | plateau | compute_to:0.5 (declared before the runs)
    baseline = "grpo"                 # what every recipe is compared with, paired by seed
    margin = 0.02                     # equivalence margin and the difference the power analysis sizes for
    plateau_from = 0.75               # plateau: mean accuracy of the evaluations at >= this fraction

Every run of a cell gets the same budget, evaluation fractions, task and warm start; overrides
may change only the recipe and its training settings, so comparisons stay matched. Errors name
the file, the key and the valid choices.

Regimes (issue 12). Without `[regimes.*]` a cell is task/scale and every recipe keeps its own
updates per batch (ppo and vapo 4 mini-batches, the rest 1) and lag 0: today's runs, same ids.
With regimes a cell is task/scale/regime, and the regime sets, for every recipe in it,
`rollout.lag` (default 0), `recipe.updates.epochs` and `recipe.updates.minibatches` (default 1),
and `train.lr` when it gives `lr`; its runs carry tags.regime and run.json's `regime` record.
What a matched off-policy comparison holds fixed:
  - within a regime (the comparison): everything but the recipe, i.e. the cell's FLOPs budget,
    rollout batch (prompts × G), evaluation, warm start, lr, and the off-policy degree: the
    number of optimizer updates per rollout batch (epochs × mini-batches, so the same optimizer
    steps per sample for every recipe) and the sampler's lag. Per-recipe overrides may not change
    recipe.updates (nor train.lr when a regime sets it); the regime is applied last.
  - across regimes: the budget in FLOPs, the data, and, unless a regime sets `lr`, the learning
    rate. Mini-batches multiply optimizer steps per batch at the same FLOPs (each step sees 1/M of
    the batch), so at one lr they move the policy about M times as far per batch: give such a
    regime its own `lr` to hold drift per batch instead. A lag changes neither FLOPs nor steps.
  - put the on-policy control beside them: a regime with no keys (`[regimes.on_policy]`), which
    is lag 0 and one update per batch for every recipe (ppo and vapo included, unlike the default).
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

import algorithms
from bench import models, tasks
from bench.config import Budget, EvalSchedule, Regime, RolloutConfig, RunConfig, TrainConfig
from bench.warmstart import WarmStartConfig

SUITES_DIR = Path(__file__).resolve().parent.parent / "suites"
REQUIRED = ("recipes", "seeds", "tasks", "scales", "budget")
OPTIONAL = ("description", "device", "rollout", "task_params", "train", "eval", "warmstart", "resources", "overrides",
            "tune", "report", "regimes")
SECTIONS = {"train": TrainConfig, "eval": EvalSchedule, "warmstart": WarmStartConfig}
OVERRIDABLE = ("recipe.", "train.")  # budget, eval, task, scale, warm start stay matched within a cell
FILTER_KEYS = ("recipe", "seed", "cell", "task", "scale", "regime")
REGIME_KEYS = ("lag", "epochs", "minibatches", "lr")
_DEVICE_RE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")


class SuiteError(ValueError):
    """A bad suite file: the message starts with the file and the key."""

    def __init__(self, path: Path | str, key: str, msg: str):
        super().__init__(f"{path}: {key}: {msg}" if key else f"{path}: {msg}")


@dataclass(frozen=True)
class Cell:
    task: str
    scale: str
    budget: Budget
    regime: Regime | None = None  # None: every recipe keeps its own updates per batch, lag 0

    @property
    def name(self) -> str:
        return f"{self.task}/{self.scale}" + (f"/{self.regime.name}" if self.regime else "")


@dataclass(frozen=True)
class Resources:
    threads: int = 0  # torch threads per run; 0: the executor divides the cores among workers
    gpus_per_run: float = 1.0  # Ray only, for device cuda

    def __post_init__(self) -> None:
        if self.threads < 0:
            raise ValueError(f"threads must be >= 0, got {self.threads}")
        if not self.gpus_per_run > 0:
            raise ValueError(f"gpus_per_run must be > 0, got {self.gpus_per_run}")


PRIMARY_METRICS = ("auc", "final", "plateau", "compute_to:<accuracy>")
DEFAULT_PRIMARY = "auc"


@dataclass(frozen=True)
class ReportSettings:
    """A suite's `[report]` table: the analysis declared before the runs (never hashed).

    primary   the metric the leaderboard sorts, marks and sizes power by: auc (mean held-out accuracy
              over the budget), final (accuracy at the end), plateau (mean accuracy of the
              evaluations at fractions >= plateau_from) or compute_to:X (the fraction of the budget
              at which accuracy first reaches X; lower is better)
    baseline  the recipe every other is compared with (default: grpo when the suite has it, else
              its first recipe)
    margin    differences smaller than this (in the primary metric's units) count as no difference:
              the equivalence margin, and the difference the report says how many seeds would detect
    declared  whether the suite file declared `primary` (the report says which default it used)
    """

    primary: str = DEFAULT_PRIMARY
    baseline: str | None = None
    margin: float = 0.02
    plateau_from: float = 0.75
    declared: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.primary, str) or not (self.primary in ("auc", "final", "plateau")
                                                     or self.primary.startswith("compute_to:")):
            raise ValueError(unknown("primary metric", self.primary, list(PRIMARY_METRICS)))
        if self.primary.startswith("compute_to:"):
            raw = self.primary.split(":", 1)[1]
            try:
                level = float(raw)
            except ValueError:
                raise ValueError(f"primary {self.primary!r}: the threshold {raw!r} is not a number "
                                 "(e.g. compute_to:0.5)") from None
            if not 0 < level <= 1:
                raise ValueError(f"primary {self.primary!r}: the accuracy threshold must be in (0, 1]")
        if isinstance(self.margin, bool) or not isinstance(self.margin, (int, float)) or not 0 < self.margin < 1:
            raise ValueError(f"margin must be a number in (0, 1), got {self.margin!r}")
        if (isinstance(self.plateau_from, bool) or not isinstance(self.plateau_from, (int, float))
                or not 0 <= self.plateau_from < 1):
            raise ValueError(f"plateau_from must be a number in [0, 1), got {self.plateau_from!r}")

    @property
    def threshold(self) -> float | None:
        """compute_to's accuracy level, else None."""
        return float(self.primary.split(":", 1)[1]) if self.primary.startswith("compute_to:") else None

    @property
    def higher_is_better(self) -> bool:
        return self.threshold is None


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    recipes: tuple[str, ...]
    seeds: tuple[int, ...]
    cells: tuple[Cell, ...]
    task_params: dict[str, dict] = field(default_factory=dict)
    train: TrainConfig = TrainConfig()
    eval: EvalSchedule = EvalSchedule()
    warmstart: WarmStartConfig = WarmStartConfig()
    overrides: dict[str, tuple[str, ...]] = field(default_factory=dict)  # recipe -> ("path=json", ...)
    device: str = "cpu"
    rollout: RolloutConfig = RolloutConfig()  # `rollout = "vllm"` or a [rollout] table {backend, lag}
    resources: Resources = Resources()
    description: str = ""
    tune: dict = field(default_factory=dict)  # the [tune] table, validated by bench.tune when it tunes
    report: ReportSettings = ReportSettings()
    # (cell name, recipe) -> ("path=json", ...): tuned values (`bench suite --tuned`), applied last
    cell_overrides: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    def run_config(self, cell: Cell, recipe: str, seed: int) -> RunConfig:
        tags = {"suite": self.name, "cell": cell.name} | ({"regime": cell.regime.name} if cell.regime else {})
        cfg = RunConfig(recipe=algorithms.get(recipe), task=cell.task, scale=cell.scale, budget=cell.budget,
                        seed=seed, task_params=dict(self.task_params.get(cell.task, {})), train=self.train,
                        eval=self.eval, warmstart=self.warmstart, rollout=self.rollout,
                        tags=tags, device=self.device, threads=self.resources.threads)
        cfg = cfg.with_overrides(list(self.overrides[recipe])) if recipe in self.overrides else cfg
        tuned = self.cell_overrides.get((cell.name, recipe))
        cfg = cfg if tuned is None else cfg.with_overrides([*tuned, "tags.tuned=true"])
        return cfg if cell.regime is None else cfg.with_overrides(cell.regime.overrides())  # last: the regime holds

    def expand(self, only: dict[str, list[str]] | None = None) -> list[RunConfig]:
        """Run configs in plan order (cell, recipe, seed), restricted by `only` (see parse_only)."""
        only = only or {}
        out = []
        for cell in self.cells:
            for recipe in self.recipes:
                for seed in self.seeds:
                    labels = {"recipe": recipe, "seed": str(seed), "cell": cell.name, "task": cell.task,
                              "scale": cell.scale, "regime": cell.regime.name if cell.regime else ""}
                    if all(labels[k] in v for k, v in only.items()):
                        out.append(self.run_config(cell, recipe, seed))
        return out

    def labels(self) -> dict[str, list[str]]:
        """The values each --only key may take in this suite."""
        return {"recipe": list(self.recipes), "seed": [str(s) for s in self.seeds],
                "cell": [c.name for c in self.cells], "task": sorted({c.task for c in self.cells}),
                "scale": sorted({c.scale for c in self.cells}),
                "regime": list(dict.fromkeys(c.regime.name for c in self.cells if c.regime))}

    def parse_only(self, specs: list[str]) -> dict[str, list[str]]:
        """['recipe=grpo,dapo', 'seed=0'] -> {'recipe': ['grpo', 'dapo'], 'seed': ['0']}, validated."""
        valid = self.labels()
        out: dict[str, list[str]] = {}
        for spec in specs:
            key, sep, vals = spec.partition("=")
            key = key.strip()
            if not sep or key not in FILTER_KEYS:
                raise ValueError(f"--only {spec!r}: expected KEY=V1,V2 with KEY one of {', '.join(FILTER_KEYS)}")
            for v in (v.strip() for v in vals.split(",")):
                if v not in valid[key]:
                    raise ValueError(f"--only {spec!r}: {unknown(key, v, valid[key])} (in suite {self.name})")
                out.setdefault(key, []).append(v)
        return out


# ---------------------------------------------------------------------------------------------
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
            raise FileNotFoundError(f"suite file {s} does not exist")
        return p
    p = SUITES_DIR / f"{s}.toml"
    if not p.is_file():
        raise ValueError(unknown("suite", s, names()) + f" (or a path to a .toml file; suites live in {SUITES_DIR})")
    return p


def load(name_or_path: str | Path) -> Suite:
    path = resolve(name_or_path)
    text = path.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        lines = text.splitlines()
        shown = f": {lines[int(m.group(1)) - 1].strip()!r}" if m and 0 < int(m.group(1)) <= len(lines) else ""
        raise SuiteError(path, "", f"invalid TOML: {e}{shown}") from None
    return from_dict(data, path)


def from_dict(data: dict, path: Path | str = "<suite>") -> Suite:
    path = Path(path)
    err = lambda key, msg: SuiteError(path, key, msg)  # noqa: E731
    for key in data:
        if key not in REQUIRED + OPTIONAL:
            raise err(key, unknown("top-level key", key, list(REQUIRED + OPTIONAL)))
    for key in REQUIRED:
        if key not in data:
            raise err(key, f"missing required key {key!r} (a suite needs {', '.join(REQUIRED)})")

    recipes = _names(data["recipes"], "recipes", algorithms.names(), err)
    task_names = _names(data["tasks"], "tasks", tasks.names(), err)
    scale_names = _names(data["scales"], "scales", None, err)
    for s in scale_names:
        try:
            models.get(s)
        except (ValueError, FileNotFoundError) as e:
            raise err("scales", str(e)) from None
    seeds = _seeds(data["seeds"], err)
    regimes = _regimes(_table(data.get("regimes", {}), "regimes", err), err)
    cells = [dataclasses.replace(c, regime=r) for c in _cells(data["budget"], task_names, scale_names, err)
             for r in (regimes or [None])]

    task_params = _table(data.get("task_params", {}), "task_params", err)
    for t, params in task_params.items():
        if t not in task_names:
            raise err(f"task_params.{t}", unknown("task", t, task_names) + " (task_params keys are the suite's tasks)")
        if not isinstance(params, dict):
            raise err(f"task_params.{t}", "expected a table, e.g. [task_params.addition] difficulty = \"easy\"")
        try:
            tasks.get(t, **params)
        except (ValueError, TypeError) as e:
            raise err(f"task_params.{t}", str(e)) from None

    sections = {k: _section(typ, _table(data.get(k, {}), k, err), k, err) for k, typ in SECTIONS.items()}
    resources = _section(Resources, _table(data.get("resources", {}), "resources", err), "resources", err)
    device = data.get("device", "cpu")
    if not isinstance(device, str) or not _DEVICE_RE.match(device):
        raise err("device", f"expected cpu, cuda, cuda:N or mps, got {device!r}")
    raw_rollout = data.get("rollout", "native")
    if isinstance(raw_rollout, str) and raw_rollout not in ("native", "vllm"):
        raise err("rollout", unknown("rollout backend", raw_rollout, ["native", "vllm"]))
    try:
        rollout = RolloutConfig.parse(raw_rollout)
    except (ValueError, TypeError) as e:
        raise err("rollout", str(e)) from None
    description = data.get("description", "")
    if not isinstance(description, str):
        raise err("description", "expected a string")
    tune = _table(data.get("tune", {}), "tune", err)
    report_table = _table(data.get("report", {}), "report", err)
    report = _section(ReportSettings, {k: v for k, v in report_table.items() if k != "declared"}
                      | ({"declared": True} if "primary" in report_table else {}), "report", err)
    if "declared" in report_table:
        raise err("report.declared", unknown("[report] field", "declared", ["primary", "baseline", "margin", "plateau_from"]))
    if report.baseline is not None and report.baseline not in recipes:
        raise err("report.baseline", unknown("recipe", report.baseline, recipes) + " (the baseline is one of the suite's recipes)")

    overrides: dict[str, tuple[str, ...]] = {}
    for recipe, table in _table(data.get("overrides", {}), "overrides", err).items():
        where = f"overrides.{recipe}"
        if recipe not in recipes:
            raise err(where, unknown("recipe", recipe, recipes) + " (overrides apply to the suite's recipes)")
        if not isinstance(table, dict):
            raise err(where, 'expected a table of dotted paths, e.g. "recipe.objective.eps_high" = 0.3')
        flat = _flatten(table)
        for p in flat:
            if not p.startswith(OVERRIDABLE):
                raise err(f"{where}.{p}", f"only {' and '.join(o + '*' for o in OVERRIDABLE)} may be overridden per "
                                          "recipe; budget, eval, task, scale and warm start stay matched within a cell")
            if regimes and (p.startswith("recipe.updates") or (p == "train.lr" and any(r.lr for r in regimes))):
                raise err(f"{where}.{p}", "the suite's regimes set it for every recipe (updates per batch, and lr "
                                          "where a regime gives one), so a cell compares recipes at one regime")
        overrides[recipe] = tuple(f"{p}={json.dumps(v)}" for p, v in flat.items())

    suite = Suite(name=path.stem, path=path, recipes=tuple(recipes), seeds=tuple(seeds), cells=tuple(cells),
                  task_params=task_params, overrides=overrides, device=device, rollout=rollout,
                  resources=resources, description=description, tune=tune, report=report, **sections)
    for recipe in overrides:  # build the runs once: bad override paths and values fail here, not in a worker
        for cell in cells:
            try:
                suite.run_config(cell, recipe, seeds[0])
            except (ValueError, TypeError) as e:
                raise err(f"overrides.{recipe}", str(e)) from None
    return suite


def _names(value, key: str, valid: list[str] | None, err) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise err(key, f"expected a non-empty list of names{', valid: ' + ', '.join(valid) if valid else ''}")
    if len(set(value)) != len(value):
        raise err(key, f"duplicate names in {value}")
    for v in value:
        if valid is not None and v not in valid:
            raise err(key, unknown(key.rstrip("s"), v, valid))
    return value


def _seeds(value, err) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise err("seeds", f"a seed count must be > 0, got {value}")
        return list(range(value))
    if (not isinstance(value, list) or not value
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value)):
        raise err("seeds", f"expected a count (seeds = 3) or a non-empty list of ints >= 0, got {value!r}")
    if len(set(value)) != len(value):
        raise err("seeds", f"duplicate seeds in {value}")
    return value


def _cells(value, task_names: list[str], scale_names: list[str], err) -> list[Cell]:
    grid = [f"{t}/{s}" for t in task_names for s in scale_names]
    if not isinstance(value, dict):
        value = {g: value for g in grid}
    for key in value:
        if key not in grid:
            raise err(f"budget.{key}", unknown("cell", key, grid) + " (keys are task/scale from tasks × scales)")
    cells = []
    for g in grid:
        if g not in value:
            raise err(f"budget.{g}", f"missing budget for cell {g!r}; every task/scale cell needs one: {', '.join(grid)}")
        raw = value[g]
        if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
            raise err(f"budget.{g}", f"expected FLOPs (2e12) or a string with a unit ('40steps'), got {raw!r}")
        try:
            budget = Budget.parse(raw)
        except ValueError as e:
            raise err(f"budget.{g}", str(e)) from None
        if budget.kind == "steps" and budget.value != int(budget.value):
            raise err(f"budget.{g}", f"a steps budget must be a whole number, got {raw!r}")
        t, s = g.split("/", 1)
        cells.append(Cell(t, s, budget))
    return cells


def _regimes(table: dict, err) -> list[Regime]:
    """[regimes.NAME] tables -> Regimes, in file order (keys: lag, epochs, minibatches, lr)."""
    out = []
    for name, values in table.items():
        where = f"regimes.{name}"
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise err(where, "a regime name is letters, digits, '_', '-' or '.' (it becomes part of the cell name)")
        if not isinstance(values, dict):
            raise err(where, "expected a table, e.g. [regimes.lag2] lag = 2 (an empty table is the on-policy control)")
        for k in values:
            if k not in REGIME_KEYS:
                raise err(f"{where}.{k}", unknown("regime key", k, list(REGIME_KEYS)))
        out.append(_section(Regime, {"name": name, **values}, where, err))
    return out


def _table(value, key: str, err) -> dict:
    if not isinstance(value, dict):
        raise err(key, f"expected a table ([{key}]), got {value!r}")
    return value


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """{"recipe": {"objective": {"eps_high": 0.3}}} or {"recipe.objective.eps_high": 0.3} -> dotted keys."""
    out = {}
    for k, v in d.items():
        p = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, p + "."))
        else:
            out[p] = v
    return out


def _section(typ, values: dict, key: str, err):
    """Build a frozen config dataclass from a TOML table, checking names and types first."""
    hints = typing.get_type_hints(typ)
    fields = [f.name for f in dataclasses.fields(typ)]
    kwargs = {}
    for name, v in values.items():
        if name not in fields:
            raise err(f"{key}.{name}", unknown(f"[{key}] field", name, fields))
        if not _matches(v, hints[name]):
            raise err(f"{key}.{name}", f"expected {_describe(hints[name])}, got {v!r}")
        kwargs[name] = float(v) if _is_float(hints[name]) and isinstance(v, int) else v  # 1 and 1.0 hash alike
    try:
        return typ(**kwargs)
    except (ValueError, TypeError) as e:
        raise err(key, str(e)) from None


def _is_float(tp) -> bool:
    return tp is float or (typing.get_origin(tp) in (Union, types.UnionType) and float in typing.get_args(tp))


def _matches(v, tp) -> bool:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return v in args
    if origin in (Union, types.UnionType):
        return any(_matches(v, a) for a in args)
    if tp is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if tp is int:
        return isinstance(v, int) and not isinstance(v, bool)
    if tp is type(None):
        return v is None
    return isinstance(v, tp) if isinstance(tp, type) else True


def _describe(tp) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in args if a is not type(None))
    return getattr(tp, "__name__", str(tp))
