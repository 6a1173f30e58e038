"""RunConfig: everything that determines a run, frozen, validated, hashed into its id.

A run id hashes the canonical JSON of the config (recipe parts with their type tags included);
execution settings that do not change the result's meaning (device, threads) are left out of it.
`config_id` leaves the seed out too, so seeds of one configuration group together.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import algorithms
from bench.engine.evaluate import EvalConfig
from bench.warmstart import WarmStartConfig

BudgetKind = Literal["flops", "steps", "tokens"]
HASHED_TAGS = ("study", "trial")  # bench tune's trial identity (see RunConfig._hashed)
_BUDGET_RE = re.compile(r"^\s*([0-9.eE+]+)\s*(flops|steps|tokens)?\s*$")


@dataclass(frozen=True)
class Budget:
    value: float
    kind: BudgetKind = "flops"

    def __post_init__(self) -> None:
        if self.kind not in ("flops", "steps", "tokens"):
            raise ValueError(f"budget kind must be one of flops, steps, tokens; got {self.kind!r}")
        if not self.value > 0:
            raise ValueError(f"budget must be > 0, got {self.value}")

    @classmethod
    def parse(cls, text: str | float | int) -> Budget:
        """'2e12' or '2e12flops', '40steps', '5e5tokens' (generated tokens)."""
        if isinstance(text, (int, float)):
            return cls(float(text))
        m = _BUDGET_RE.match(str(text))
        if not m:
            raise ValueError(f"budget {text!r}: expected a number with an optional unit flops|steps|tokens, e.g. 2e12 or 40steps")
        try:
            value = float(m.group(1))
        except ValueError:
            raise ValueError(f"budget {text!r}: {m.group(1)!r} is not a number") from None
        return cls(value, m.group(2) or "flops")

    def __str__(self) -> str:
        return f"{self.value:g}{self.kind}"


@dataclass(frozen=True)
class TrainConfig:
    prompts_per_step: int = 16  # prompt groups per rollout batch
    group_size: int = 8  # completions per prompt (G)
    max_new_tokens: int | None = None  # None: the task's cap
    temperature: float = 1.0
    top_p: float = 1.0
    lr: float = 2e-4
    critic_lr: float = 5e-4
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    grad_clip: float = 1.0
    warmup_steps: int = 0
    schedule: Literal["constant", "cosine"] = "constant"
    micro_batch_size: int = 64  # rows per forward/backward; memory only, never changes the gradient
    precision: Literal["fp32", "bf16"] = "fp32"  # bf16: autocast forwards (GPUs); weights and optimizer stay fp32
    # Truncated importance sampling for vLLM rollouts (engine setting, any recipe): each token's
    # policy-gradient loss × min(π_train_old / π_vllm, tis_cap); None: off. TRL and verl use 2.
    tis_cap: float | None = None

    def __post_init__(self) -> None:
        for f in ("prompts_per_step", "group_size", "micro_batch_size"):
            if getattr(self, f) <= 0:
                raise ValueError(f"train.{f} must be > 0, got {getattr(self, f)}")
        if self.max_new_tokens is not None and self.max_new_tokens <= 0:
            raise ValueError(f"train.max_new_tokens must be > 0, got {self.max_new_tokens}")
        for f in ("temperature", "lr", "critic_lr"):
            if not getattr(self, f) > 0:
                raise ValueError(f"train.{f} must be > 0, got {getattr(self, f)}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"train.top_p must be in (0, 1], got {self.top_p}")
        for f in ("adam_beta1", "adam_beta2"):
            if not 0 <= getattr(self, f) < 1:
                raise ValueError(f"train.{f} must be in [0, 1), got {getattr(self, f)}")
        if not self.adam_eps > 0:
            raise ValueError(f"train.adam_eps must be > 0, got {self.adam_eps}")
        if self.weight_decay < 0 or self.grad_clip < 0 or self.warmup_steps < 0:
            raise ValueError("train.weight_decay, train.grad_clip and train.warmup_steps must be >= 0")
        if self.precision not in ("fp32", "bf16"):
            raise ValueError(f"train.precision must be 'fp32' or 'bf16', got {self.precision!r}")
        if self.schedule not in ("constant", "cosine"):
            raise ValueError(f"train.schedule must be 'constant' or 'cosine', got {self.schedule!r}")
        if self.tis_cap is not None and not (isinstance(self.tis_cap, (int, float)) and self.tis_cap > 0):
            raise ValueError(f"train.tis_cap must be a number > 0 or null, got {self.tis_cap!r}")


@dataclass(frozen=True)
class EvalSchedule:
    """When held-out evaluations happen, as fractions of the budget (always at 0 and at 1).

    spacing "linear": every `every` of the budget (0.1: 11 points). spacing "log": `points`
    fractions log-spaced from `first` to 1, plus 0, dense early where the learning curve bends, so
    the sigmoid fit's midpoint and compute-to-threshold are identifiable (0.01 and 8 points: 0, 0.01,
    0.019, 0.037, 0.072, 0.14, 0.27, 0.52, 1); `every` is not used then.
    """

    every: float = 0.1  # evaluate at every `every` fraction of the budget (and at 0 and 1)
    n_examples: int = 200
    k: int = 4
    temperature: float = 1.0
    spacing: Literal["linear", "log"] = "linear"
    points: int = 8  # log spacing: evaluation points above 0, the last at 1
    first: float = 0.01  # log spacing: the first evaluation point above 0

    def __post_init__(self) -> None:
        if self.spacing not in ("linear", "log"):
            raise ValueError(f"eval.spacing must be 'linear' or 'log', got {self.spacing!r}")
        if self.spacing == "linear" and (
                not 0 < self.every <= 1 or abs(round(1 / self.every) * self.every - 1) > 1e-9):
            raise ValueError(f"eval.every must be 1/n for an integer n >= 1 (e.g. 0.1, 0.25), got {self.every}")
        if self.spacing == "log":
            if isinstance(self.points, bool) or not isinstance(self.points, int) or not 2 <= self.points <= 100:
                raise ValueError(f"eval.points must be an integer in [2, 100] with spacing 'log', got {self.points!r}")
            if not 0 < self.first < 1:
                raise ValueError(f"eval.first must be in (0, 1) with spacing 'log', got {self.first!r}")
        EvalConfig(n_examples=self.n_examples, k=self.k, temperature=self.temperature)  # validates

    @property
    def fractions(self) -> list[float]:
        if self.spacing == "log":
            n = self.points
            return [0.0] + [round(self.first ** (1 - i / (n - 1)), 12) for i in range(n - 1)] + [1.0]
        n = round(1 / self.every)
        return [i / n for i in range(n + 1)]

    def eval_config(self) -> EvalConfig:
        return EvalConfig(n_examples=self.n_examples, k=self.k, temperature=self.temperature)

    def canonical(self) -> dict:
        """The hashed form: the fields of linear spacing as before log spacing existed (so run ids
        of linear schedules are unchanged); with log spacing, its fields instead of `every`."""
        d = dataclasses.asdict(self)
        if self.spacing == "linear":
            for k in ("spacing", "points", "first"):
                del d[k]
        else:
            del d["every"]
        return d


@dataclass(frozen=True)
class RolloutConfig:
    """Where rollouts come from: the backend, and how stale the sampling policy is.

    lag k: the rollouts of step t are sampled by the policy of step t − k (the weights before the
    update k steps earlier; the warm start while t ≤ k), as in an asynchronous pipeline whose
    sampler runs k versions behind the learner (verl's one-step-off, PipelineRL). 0: on-policy.
    """

    backend: Literal["native", "vllm"] = "native"  # vllm: bench/engine/vllm_backend.py (its own venv)
    lag: int = 0

    def __post_init__(self) -> None:
        if self.backend not in ("native", "vllm"):
            raise ValueError(f"rollout backend {self.backend!r} is not available; valid: native, vllm")
        if isinstance(self.lag, bool) or not isinstance(self.lag, int) or self.lag < 0:
            raise ValueError(f"rollout.lag must be an int >= 0, got {self.lag!r}")

    @classmethod
    def parse(cls, value: Any) -> RolloutConfig:
        """A backend name ("vllm", the form before lags existed), a {backend, lag} table, or itself."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls(backend=value)
        if isinstance(value, dict):
            return _build(cls, value, "rollout")
        raise ValueError(f"rollout: expected a backend name (native, vllm) or a table {{backend, lag}}, got {value!r}")

    def canonical(self) -> str | dict:
        """The hashed form: the bare backend name at lag 0, so run ids from before lags stay."""
        return self.backend if self.lag == 0 else dataclasses.asdict(self)


@dataclass(frozen=True)
class Regime:
    """An off-policy regime: how stale the sampling policy is, and how many optimizer updates each
    rollout batch gets (epochs × mini-batches). ρ = π_θ/π_old differs from 1 only off-policy.

    A suite's `[regimes.NAME]` table imposes one on every recipe of a cell (lag → rollout.lag,
    epochs and minibatches → recipe.updates, lr → train.lr when given; bench/suite.py says what a
    matched comparison holds fixed); `Regime.of(cfg)` reads the regime any run config is in.
    """

    name: str = ""
    lag: int = 0
    epochs: int = 1
    minibatches: int = 1
    lr: float | None = None  # None: the suite's (or the recipe's overridden) train.lr

    def __post_init__(self) -> None:
        RolloutConfig(lag=self.lag)  # validates the lag
        for f in ("epochs", "minibatches"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"regime {self.name!r}: {f} must be an int >= 1, got {v!r}")
        if self.lr is not None and not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise ValueError(f"regime {self.name!r}: lr must be a number > 0, got {self.lr!r}")

    @property
    def updates_per_batch(self) -> int:
        return self.epochs * self.minibatches

    @property
    def auto_name(self) -> str:
        """'on_policy', or the parts that differ from it: 'lag2', '4mb', '2ep_16mb_lag1'."""
        parts = [f"{self.epochs}ep" if self.epochs > 1 else "", f"{self.minibatches}mb" if self.minibatches > 1 else "",
                 f"lag{self.lag}" if self.lag else ""]
        return "_".join(p for p in parts if p) or "on_policy"

    def overrides(self) -> list[str]:
        """The RunConfig overrides that put a run in this regime."""
        out = [f"rollout.lag={self.lag}", f"recipe.updates.epochs={self.epochs}",
               f"recipe.updates.minibatches={self.minibatches}"]
        return out + ([f"train.lr={float(self.lr)!r}"] if self.lr is not None else [])

    @classmethod
    def of(cls, cfg: RunConfig) -> Regime:
        """The regime a run is in: its suite's regime name (tags.regime) or the automatic one."""
        u = cfg.recipe.updates
        r = cls(lag=cfg.rollout.lag, epochs=u.epochs, minibatches=u.minibatches)
        return dataclasses.replace(r, name=cfg.tags.get("regime") or r.auto_name)

    def record(self) -> dict:
        """run.json's `regime`: {name, lag, epochs, minibatches, updates_per_batch}."""
        return {"name": self.name or self.auto_name, "lag": self.lag, "epochs": self.epochs,
                "minibatches": self.minibatches, "updates_per_batch": self.updates_per_batch}

    def describe(self) -> str:
        return (f"{self.name or self.auto_name} (lag {self.lag}, {self.epochs} epoch(s) × {self.minibatches} "
                f"mini-batch(es) = {self.updates_per_batch} update(s) per batch)")


@dataclass(frozen=True)
class RunConfig:
    recipe: Any  # algorithms.Recipe
    task: str
    scale: str
    budget: Budget
    seed: int = 0
    task_params: dict = field(default_factory=dict)
    train: TrainConfig = TrainConfig()
    eval: EvalSchedule = EvalSchedule()
    warmstart: WarmStartConfig = WarmStartConfig()
    rollout: RolloutConfig = RolloutConfig()  # backend and lag; RolloutConfig.parse("vllm") for the bare name
    tags: dict = field(default_factory=dict)  # free-form labels (suite, cell, ...); hashed: only HASHED_TAGS
    device: str = "cpu"  # execution settings: recorded, not hashed
    threads: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.rollout, RolloutConfig):
            raise ValueError(f"rollout: expected a RolloutConfig (RolloutConfig.parse({self.rollout!r})), "
                             f"got {type(self.rollout).__name__}")
        if self.train.tis_cap is not None and self.rollout.backend != "vllm":
            raise ValueError("train.tis_cap corrects the vLLM-vs-trainer log-prob mismatch: it needs rollout='vllm'")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")

    # -- canonical form -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "recipe": json.loads(self.recipe.to_json()),
            "task": self.task,
            "task_params": dict(sorted(self.task_params.items())),
            "scale": self.scale,
            "budget": dataclasses.asdict(self.budget),
            "seed": self.seed,
            "train": _train_dict(self.train),
            "eval": self.eval.canonical(),
            "warmstart": dataclasses.asdict(self.warmstart),
            "rollout": self.rollout.canonical(),
            "tags": dict(self.tags),
            "device": self.device,
            "threads": self.threads,
        }

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown run config keys {sorted(unknown)}; valid: {sorted(known)}")
        d = dict(d)
        d["recipe"] = algorithms.from_json(json.dumps(d["recipe"])) if isinstance(d["recipe"], dict) else d["recipe"]
        d["budget"] = Budget(**d["budget"]) if isinstance(d["budget"], dict) else Budget.parse(d["budget"])
        for key, typ in (("train", TrainConfig), ("eval", EvalSchedule), ("warmstart", WarmStartConfig)):
            if key in d and isinstance(d[key], dict):
                d[key] = _build(typ, d[key], key)
        if "rollout" in d:
            d["rollout"] = RolloutConfig.parse(d["rollout"])
        return cls(**d)

    def _hashed(self, with_seed: bool) -> str:
        d = self.to_dict()
        for k in ("tags", "device", "threads") + (() if with_seed else ("seed",)):
            d.pop(k)
        # a tuning trial is a run of its own, even when it samples a config that another trial (or a
        # suite) already ran: its record belongs to the trial. Absent for every other run.
        trial = {k: self.tags[k] for k in HASHED_TAGS if k in self.tags}
        if trial:
            d["trial"] = trial
        return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]

    @property
    def run_id(self) -> str:
        return self._hashed(with_seed=True)

    @property
    def config_id(self) -> str:
        return self._hashed(with_seed=False)

    def with_overrides(self, assignments: list[str]) -> RunConfig:
        """Apply `path=value` overrides, e.g. train.lr=1e-4, recipe.objective.eps_high=0.28."""
        d = self.to_dict()
        d["train"] = dataclasses.asdict(self.train)  # every field settable, defaults included
        d["rollout"] = dataclasses.asdict(self.rollout)  # rollout.lag=2 as well as rollout=vllm
        for a in assignments:
            if "=" not in a:
                raise ValueError(f"override {a!r}: expected path=value, e.g. train.lr=1e-4")
            path, raw = a.split("=", 1)
            set_path(d, path.strip(), parse_value(raw.strip()))
        return RunConfig.from_dict(d)


def _train_dict(train: TrainConfig) -> dict:
    """Fields added after results existed are left out at their default, so earlier run ids stay."""
    d = dataclasses.asdict(train)
    if d["tis_cap"] is None:
        del d["tis_cap"]
    return d


def _build(typ, values: dict, where: str):
    known = {f.name for f in dataclasses.fields(typ)}
    unknown = set(values) - known
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; valid: {sorted(known)}")
    return typ(**values)


def parse_value(raw: str) -> Any:
    """JSON when it parses (numbers, true/false/null, lists), else the plain string."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def set_path(d: dict, path: str, value: Any) -> None:
    keys = path.split(".")
    cur = d
    for i, k in enumerate(keys[:-1]):
        if not isinstance(cur, dict) or k not in cur or not isinstance(cur[k], dict):
            here = ".".join(keys[: i + 1])
            valid = sorted(cur) if isinstance(cur, dict) else []
            raise ValueError(f"override {path!r}: no section {here!r}; valid here: {valid}")
        cur = cur[k]
    last = keys[-1]
    if last not in cur and not path.startswith(("task_params.", "tags.")):
        raise ValueError(f"override {path!r}: unknown field {last!r}; valid: {sorted(k for k in cur if k != 'type')}")
    cur[last] = value
