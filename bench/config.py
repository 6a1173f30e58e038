"""RunConfig and its sections: everything that determines a run, typed, frozen, validated once.

Every section is a `bench.typed.Section` (a strict, frozen pydantic model): types and ranges are
declared on the fields, and a bad value fails in one line naming the field, the value and the
range (`train.lr: got inf; expected a finite number > 0`). Suites, `--set`, tuned values and
run.json all build configs through these classes; overrides are deep merges of plain tables on
the config tree (`with_values({"train": {"lr": 1e-4}})`), validated once after the merge.

A run id hashes the canonical JSON of the config (recipe parts with their type tags included);
execution settings that do not change the result's meaning (device, threads) are left out of it.
`config_id` leaves the seed out too, so seeds of one configuration group together. Ints given for
float fields are stored as floats, so `--set train.lr=1` and `lr = 1.0` give one run id.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

import algorithms
from algorithms.serialize import from_dict as recipe_from_dict
from bench import rewards as reward_fns
from bench.typed import ConfigError, Section, merge, unflatten

BudgetKind = Literal["flops", "steps", "tokens"]
# a sampler's weight precision (bench.engine.rollout.PRECISIONS; a test holds the two equal)
SamplerPrecision = Literal["fp32", "bf16", "fp16", "int8", "int4"]
HASHED_TAGS = ("study", "trial")  # bench tune's trial identity (see run_id_of)
MAX_SEED = 2**63 - 1  # torch.manual_seed takes up to 2**64 - 1; derived seeds stay in int64
_BUDGET_RE = re.compile(r"^\s*([0-9.eE+-]+)\s*(flops|steps|tokens)?\s*$")
_DEVICE_RE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]


class Budget(Section):
    """A compute budget: FLOPs by default, or optimizer steps, or generated tokens."""

    WHERE: ClassVar[str] = "budget"
    value: float = Field(gt=0)
    kind: BudgetKind = "flops"

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, v: Any) -> Any:
        if isinstance(v, (str, int, float)) and not isinstance(v, bool):
            return _parse_budget(v)
        if not isinstance(v, dict):
            raise ConfigError(f"expected FLOPs (2e12) or a string with a unit ('40steps', '5e5tokens'), got {v!r}")
        return v

    @model_validator(mode="after")
    def _whole_steps(self) -> Budget:
        if self.kind == "steps" and self.value != int(self.value):
            raise ConfigError(f"a steps budget must be a whole number of steps, got {self.value:g}steps")
        return self

    @classmethod
    def parse(cls, text: str | float | int) -> Budget:
        """'2e12' or '2e12flops', '40steps', '5e5tokens' (generated tokens)."""
        return cls.build(text)

    def __str__(self) -> str:
        return f"{self.value:g}{self.kind}"


def _parse_budget(text: str | int | float) -> dict:
    if not isinstance(text, str):
        return {"value": float(text) if math.isfinite(text) else text}
    m = _BUDGET_RE.match(text)
    if not m:
        raise ConfigError(f"got {text!r}; expected a number with an optional unit flops|steps|tokens, "
                          "e.g. 2e12 or 40steps")
    try:
        value = float(m.group(1))
    except ValueError:
        raise ConfigError(f"got {text!r}; {m.group(1)!r} is not a number") from None
    return {"value": value, "kind": m.group(2) or "flops"}


class TrainConfig(Section):
    WHERE: ClassVar[str] = "train"
    LATER: ClassVar[tuple[str, ...]] = ("tis_cap", "prompt_pool", "kl_metrics")

    prompts_per_step: int = Field(16, ge=1)  # prompt groups per rollout batch
    group_size: int = Field(8, ge=2)  # completions per prompt (G); 1 leaves every group-relative advantage 0
    max_new_tokens: int | None = Field(None, ge=1)  # None: the task's cap
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    lr: float = Field(2e-4, gt=0)
    critic_lr: float = Field(5e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    adam_beta1: float = Field(0.9, ge=0, lt=1)
    adam_beta2: float = Field(0.999, ge=0, lt=1)
    adam_eps: float = Field(1e-8, gt=0)
    grad_clip: float = Field(1.0, ge=0)
    warmup_steps: int = Field(0, ge=0)
    schedule: Literal["constant", "cosine"] = "constant"
    micro_batch_size: int = Field(64, ge=1)  # rows per forward/backward; memory only, never changes the gradient
    precision: Literal["fp32", "bf16"] = "fp32"  # bf16: autocast forwards (GPUs); weights and optimizer stay fp32
    # Truncated importance sampling for vLLM rollouts (engine setting, any recipe): each token's
    # policy-gradient loss × min(π_train_old / π_vllm, tis_cap); None: off. TRL and verl use 2.
    tis_cap: float | None = Field(None, gt=0)
    # Distinct training prompts a run cycles through: None = all of a dataset task's train split,
    # 4096 of a generated task's endless stream (tasks.GeneratedTask.default_pool); a number caps it.
    prompt_pool: int | None = Field(None, ge=1)
    # KL-to-reference metrics (kl/k1, kl/k3), which need a frozen copy of the model and a forward
    # pass per step; recipes with a KL term always get it. None: on for built-in scales, off for a
    # local model directory (a pretrained model's copy costs memory and FLOPs).
    kl_metrics: bool | None = None


class EvalConfig(Section):
    """One held-out evaluation (bench/engine/evaluate.py)."""

    WHERE: ClassVar[str] = "eval"
    n_examples: int = Field(200, ge=1)  # held-out prompts
    k: int = Field(4, ge=0)  # samples per prompt for avg@k / pass@k (0: greedy only)
    temperature: float = Field(1.0, gt=0)
    batch_size: int = Field(256, ge=1)  # prompts per generate call, bounds KV-cache memory
    ood_examples: int = Field(0, ge=0)  # problems of the harder split (Task.ood) for eval/acc_ood; 0: none
    # problems (the first of the n_examples) that get the k samples; None: all. Greedy runs on all n_examples
    sampled_examples: int | None = Field(None, ge=1)


class EvalSchedule(Section):
    """When held-out evaluations happen, as fractions of the budget (always at 0 and at 1), and how.

    spacing "linear": every `every` of the budget (0.1: 11 points). spacing "log": `points`
    fractions log-spaced from `first` to 1, plus 0, dense early where the learning curve bends, so
    the sigmoid fit's midpoint and compute-to-threshold are identifiable (0.01 and 8 points: 0, 0.01,
    0.019, 0.037, 0.072, 0.14, 0.27, 0.52, 1); `every` is not used then.
    """

    WHERE: ClassVar[str] = "eval"
    LATER: ClassVar[tuple[str, ...]] = ("items", "ood_examples", "sampled_examples")
    every: float = Field(0.1, gt=0, le=1)  # evaluate at every `every` fraction of the budget (and at 0 and 1)
    n_examples: int = Field(200, ge=1)
    k: int = Field(4, ge=0)
    temperature: float = Field(1.0, gt=0)
    # "fixed": every run evaluates on the first n_examples of the task's test split. "per_seed": each
    # seed draws its own n_examples held-out problems (Task.eval_set), so that the variance between
    # seeds includes the variance of test items (a user's next test set is another draw).
    items: Literal["fixed", "per_seed"] = "fixed"
    ood_examples: int = Field(0, ge=0)  # problems of the task one difficulty step harder (eval/acc_ood); 0: none
    # The coverage curve pass@1 ... pass@k needs k samples per problem, and greedy accuracy one answer: the
    # first sampled_examples of the n_examples problems get the k samples (sampled pass@1, pass@k, format
    # rate, accuracy among well-formed answers, KL), all n_examples the greedy answer. None: all of them.
    sampled_examples: int | None = Field(None, ge=1)
    spacing: Literal["linear", "log"] = "linear"
    points: int = Field(8, ge=2, le=100)  # log spacing: evaluation points above 0, the last at 1
    first: float = Field(0.01, gt=0, lt=1)  # log spacing: the first evaluation point above 0

    @model_validator(mode="after")
    def _one_over_n(self) -> EvalSchedule:
        if self.spacing == "linear" and abs(round(1 / self.every) * self.every - 1) > 1e-9:
            raise ConfigError(f"eval.every: got {self.every!r}; expected 1/n for an integer n >= 1 (e.g. 0.1, 0.25)")
        if self.sampled_examples is not None and self.sampled_examples > self.n_examples:
            raise ConfigError(f"eval.sampled_examples: got {self.sampled_examples}, more than eval.n_examples "
                              f"({self.n_examples}); expected 1 to {self.n_examples}, or leave it out (all of them)")
        return self

    @property
    def fractions(self) -> list[float]:
        if self.spacing == "log":
            n = self.points
            return [0.0] + [round(self.first ** (1 - i / (n - 1)), 12) for i in range(n - 1)] + [1.0]
        n = round(1 / self.every)
        return [i / n for i in range(n + 1)]

    def eval_config(self) -> EvalConfig:
        return EvalConfig(n_examples=self.n_examples, k=self.k, temperature=self.temperature,
                          ood_examples=self.ood_examples, sampled_examples=self.sampled_examples)

    def canonical(self) -> dict:
        """The hashed form: the fields of linear spacing as before log spacing existed (so run ids
        of linear schedules are unchanged); with log spacing, its fields instead of `every`."""
        d = super().canonical()
        for k in (("spacing", "points", "first") if self.spacing == "linear" else ("every",)):
            del d[k]
        return d


class WarmStartConfig(Section):
    """Supervised warm start on the task's worked solutions (bench/warmstart.py)."""

    WHERE: ClassVar[str] = "warmstart"
    LATER: ClassVar[tuple[str, ...]] = ("calibrated", "task_params", "stop_at", "check_every", "check_examples")
    steps: int | None = Field(None, ge=0)  # None: the task's warm_start_steps for the scale (bench/tasks/base.py)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(3e-3, gt=0)
    warmup_steps: int = Field(20, ge=0)
    weight_decay: float = Field(0.0, ge=0)
    pool: int = Field(8192, ge=1)  # distinct train examples cycled through
    seed: Seed = 0
    eval_examples: int = Field(200, ge=1)
    # Share of the SFT demonstrations that state only the final `#### answer` line, without the
    # worked steps (chosen per example by a seeded hash of its prompt). Real SFT corpora mix worked
    # and bare answers; a policy warm-started on such a mix must discover under RL which strategy
    # its verifier rewards (suites/math-small.toml). 0: every demonstration is worked.
    direct_frac: float = Field(0.0, ge=0, lt=1)
    # True: steps and lr come from the committed calibration of this task, scale and warm-start
    # settings (bench/calibration.json, written by `bench calibrate`), filled in when the run's config
    # is built, so the run id names the values used. A run config that states steps keeps them.
    calibrated: bool = False
    # The task parameters the SFT demonstrations are drawn with, over the run's own task_params: a
    # warm start that has seen only part of the task (gcd up to 99, RL and evaluation up to 999), so
    # RL has problems the warm start cannot yet solve but sometimes does: room for coverage to grow.
    # {}: the run's task, as it is.
    task_params: dict[str, Any] = {}
    # Train until the warm start reaches a level, not for a number of steps: every `check_every` steps
    # SFT measures sampled pass@1 (4 answers at T = 1) and the format rate on `check_examples` train
    # problems outside its pool, and stops at the first check with pass@1 >= stop_at and format rate
    # >= 0.95; `steps` is then the most it trains (and the lr schedule's horizon). A task whose SFT
    # learns in a jump (addition: pass@1 0.02 -> 0.4 in ~150 steps, at a step that differs by 300+
    # between SFT seeds) gets warm starts of one level whatever the seed, where a fixed step count
    # gives some seeds a warm start that has not learned the task yet. None: train `steps` steps.
    stop_at: float | None = Field(None, gt=0, le=1)
    check_every: int = Field(25, ge=1)
    check_examples: int = Field(200, ge=1)

    @model_validator(mode="after")
    def _stop_not_calibrated(self) -> WarmStartConfig:
        if self.stop_at is not None and self.calibrated:
            raise ConfigError("warmstart.stop_at chooses where each warm start stops; it cannot be combined with "
                              "warmstart.calibrated = true (a step count chosen for one seed): set warmstart.steps, "
                              "the most steps it trains, instead")
        if self.stop_at is not None and self.steps == 0:
            raise ConfigError("warmstart.stop_at needs SFT steps to stop in: set warmstart.steps (the most it trains), "
                              "not 0 (no warm start)")
        return self

    def __hash__(self) -> int:  # task_params is a dict: hash the settings' JSON (equal configs, equal hashes)
        return hash(json.dumps(self.model_dump(), sort_keys=True, default=str))

    def sft_params(self, task_params: dict) -> dict:
        """The task parameters of the SFT data: the run's task_params with these over them."""
        return {**task_params, **self.task_params}

    def resolve(self, task_name: str, scale_name: str) -> WarmStartConfig:
        """Steps filled in from the task's per-scale table (Task.warm_start_steps) when not given."""
        if self.steps is not None:
            return self
        from bench import tasks

        steps = tasks.warm_start_steps(task_name, scale_name)
        # with bare-answer demonstrations mixed in, train longer so that as many worked solutions
        # are seen as in the all-worked warm start the table was tuned for
        return self.replace(steps=round(steps / (1 - self.direct_frac)))


class RolloutConfig(Section):
    """The rollout backend and the off-policy lag (rollouts for step t come from the policy of step t - lag).

    A bare string is the backend (`rollout = "vllm"`, old run.json files); canonical form: the
    bare backend while lag is 0, so run ids from before the lag existed stay."""

    WHERE: ClassVar[str] = "rollout"
    backend: Literal["native", "vllm"] = "native"  # vllm: bench/engine/vllm_backend.py (its own venv)
    lag: int = Field(0, ge=0)
    # the sampler's weight precision (native backend): "bf16"/"fp16" sample with the trainer's fp32
    # weights rounded, "int8"/"int4" with its matrices quantised weight-only (bench/engine/rollout.py),
    # so the behaviour log-probs differ from the trainer's (the mismatch regime); logp_old is then
    # recomputed in fp32 and the gap logged as rollout/logp_mismatch
    precision: SamplerPrecision = "fp32"
    LATER: ClassVar[tuple[str, ...]] = ("precision",)

    @model_validator(mode="before")
    @classmethod
    def _backend_only(cls, v: Any) -> Any:
        return {"backend": v} if isinstance(v, str) else v

    @classmethod
    def parse(cls, value: Any) -> RolloutConfig:
        """A backend name ("vllm", the form before lags existed), a {backend, lag} table, or itself."""
        return value if isinstance(value, cls) else cls.build(value)

    def canonical(self) -> Any:  # type: ignore[override]
        return self.backend if self.lag == 0 and self.precision == "fp32" else super().canonical()

    @model_validator(mode="after")
    def _precision_native(self) -> RolloutConfig:
        if self.precision != "fp32" and self.backend != "native":
            raise ConfigError(f"rollout.precision: {self.precision!r} needs backend 'native' (got {self.backend!r}; "
                              "vLLM samples in fp32 here and has its own mismatch)")
        return self


def _names(v: Any) -> Any:
    """A TOML list of names (or one name) as a tuple, so a frozen section stays hashable."""
    v = (v,) if isinstance(v, str) else tuple(v) if isinstance(v, list) else v
    if v is not None and not (isinstance(v, tuple) and v and all(isinstance(n, str) for n in v)):
        raise ConfigError(f"got {list(v) if isinstance(v, tuple) else v!r}; expected a non-empty list of names")
    return v


def _count_or_list(v: Any) -> Any:
    """seeds = 3 means seeds [0, 1, 2]; anything else is left to the field's own validation."""
    return list(range(v)) if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else v


def _seed_list(v: Any) -> Any:
    """A regime's seeds: a count or a non-empty list (as a tuple, so the section stays hashable); None stays None."""
    v = _count_or_list(v)
    if v is None or isinstance(v, list) and v:
        return v if v is None else tuple(v)
    raise ConfigError(f"got {v!r}; expected a count >= 1 (seeds = 20) or a non-empty list of seeds")


class Regime(Section):
    """An off-policy regime: how stale the sampling policy is, and how many optimizer updates each
    rollout batch gets (epochs × mini-batches); a suite's `[regimes.NAME]` imposes one on every
    recipe of a cell (bench/suite.py). `Regime.of(cfg)` reads the regime any run config is in."""

    WHERE: ClassVar[str] = "regimes"
    name: str = Field("", pattern=r"^[A-Za-z0-9_.-]*$", description="letters, digits, '_', '-' or '.'")
    lag: int = Field(0, ge=0)
    epochs: int = Field(1, ge=1)
    minibatches: int = Field(1, ge=1)
    lr: float | None = Field(None, gt=0)  # None: the suite's (or the recipe's overridden) train.lr
    # the gradient-norm clip of this regime's runs (train.grad_clip; 0 turns it off); None: the suite's.
    # A cell with grad_clip = 0 checks whether a ranking holds when no recipe's steps are rescaled
    grad_clip: float | None = Field(None, ge=0)
    # the sampler's weight precision (RolloutConfig.precision): "bf16", "int8", ... the mismatch regimes
    precision: SamplerPrecision = "fp32"
    # where a suite runs the regime (never part of a run's config): a subset of the suite's recipes
    # and of its task/scale cells; None: all of them
    recipes: Annotated[tuple[str, ...] | None, BeforeValidator(_names)] = None
    cells: Annotated[tuple[str, ...] | None, BeforeValidator(_names)] = None
    # the seeds this regime's cells run (a count or a list); None: the suite's. A noisier regime can
    # take more seeds than the others, so every cell reaches the power the suite needs
    seeds: Annotated[tuple[Seed, ...] | None, BeforeValidator(_seed_list)] = None
    # the compute budget of this regime's cells (FLOPs, or '40steps', '5e5tokens'); None: the
    # suite's [budget] for the task/scale. Many updates per batch learn most of what they will in the
    # first batches, so an off-policy cell can be sized on its own curve
    budget: Budget | None = None
    # independently trained warm starts in this regime's cells: seed s starts from the one with
    # warmstart.seed = (the suite's warmstart.seed + s) mod N, every recipe of a seed from the same one
    # (comparisons stay paired), so the report can say what share of the variance warm starts add
    # and whether its verdicts hold on each. None: one warm start for every seed.
    warmstarts: int | None = Field(None, ge=1)

    @property
    def updates_per_batch(self) -> int:
        return self.epochs * self.minibatches

    @property
    def auto_name(self) -> str:
        """'on_policy', or the parts that differ from it: 'lag2', '4mb', '2ep_16mb_lag1'."""
        parts = [f"{self.epochs}ep" if self.epochs > 1 else "", f"{self.minibatches}mb" if self.minibatches > 1 else "",
                 f"lag{self.lag}" if self.lag else "", self.precision if self.precision != "fp32" else ""]
        return "_".join(p for p in parts if p) or "on_policy"

    def patch(self) -> dict:
        """The RunConfig tables this regime sets (applied last: the regime holds)."""
        out = {"rollout": {"lag": self.lag, "precision": self.precision},
               "recipe": {"updates": {"epochs": self.epochs, "minibatches": self.minibatches}}}
        train = {k: v for k, v in (("lr", self.lr), ("grad_clip", self.grad_clip)) if v is not None}
        return out | ({"train": train} if train else {})

    def paths(self) -> set[str]:
        """The dotted RunConfig paths the regime sets (its patch's leaves): no override, tuned value or
        trial can change them."""
        def leaves(table: dict, prefix: str = "") -> list[str]:
            return [p for k, v in table.items()
                    for p in (leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"])]
        return set(leaves(self.patch()))

    @classmethod
    def of(cls, cfg: RunConfig) -> Regime:
        """The regime a run is in: its suite's regime name (tags.regime) or the automatic one."""
        u = cfg.recipe.updates
        r = cls(lag=cfg.rollout.lag, epochs=u.epochs, minibatches=u.minibatches, precision=cfg.rollout.precision)
        return r.replace(name=cfg.tags.get("regime") or r.auto_name)

    def record(self) -> dict:
        """run.json's `regime`: {name, lag, epochs, minibatches, updates_per_batch}."""
        out = {"name": self.name or self.auto_name, "lag": self.lag, "epochs": self.epochs,
               "minibatches": self.minibatches, "updates_per_batch": self.updates_per_batch}
        return out | ({"precision": self.precision} if self.precision != "fp32" else {})

    def describe(self) -> str:
        return (f"{self.name or self.auto_name} (lag {self.lag}, {self.epochs} epoch(s) × {self.minibatches} "
                f"mini-batch(es) = {self.updates_per_batch} update(s) per batch"
                + (f", sampler weights in {self.precision}" if self.precision != "fp32" else "") + ")")


class Resources(Section):
    """A suite's execution settings, never hashed: `[resources]`."""

    WHERE: ClassVar[str] = "resources"
    threads: int = Field(0, ge=0)  # torch threads per run; 0: the executor divides the cores among workers
    gpus_per_run: float = Field(1.0, gt=0)  # Ray only, for device cuda
    # runs of one cell trained as one stack (bench/engine/stack.py); 1: one at a time; None (unset): one
    # at a time on a CPU, the measured best stack for the scale on CUDA (bench/harness/runner.py, GPU_STACK)
    stack: int | None = Field(None, ge=1)


ACCURACY_METRICS = ("auc", "final", "plateau")  # per-run held-out accuracy metrics (bench/report/tables.py)
PRIMARY_METRICS = (*ACCURACY_METRICS, "compute_to:<accuracy>")
DEFAULT_PRIMARY = "auc"


class Claim(Section):
    """A claim of the literature as an experiment (a suite's `[claims.NAME]` table, never hashed).

    The contrast is a − b on `metric`, paired by seed: `a` and `b` are recipes of the suite, each
    optionally `recipe@cell` (default: `cell`). metric: auc | final | plateau (held-out accuracy, as
    the leaderboard computes them), auc_to:FLOPS, steps:COLUMN (the run's mean of a steps.parquet
    column over its steps, e.g. steps:policy/entropy) or slope:COLUMN (that column's least-squares
    slope over the run's budget: a claim about growth). expect: greater (a > b), less (a < b) or equivalent (|a − b| <
    margin). The verdict: reproduced, contradicted or undecided at this power (bench/report/tables.py).
    kind = "sanity": a contrast that holds by construction (a check that the code is right, not a
    finding): reported apart (sanity.csv), must pass, not counted and not in the claims' Holm family.
    """

    WHERE: ClassVar[str] = "claims"
    name: str = Field("", pattern=r"^[A-Za-z0-9_.-]*$", description="letters, digits, '_', '-' or '.'")
    paper: str = Field(min_length=1)
    claim: str = Field(min_length=1)
    cell: str = Field(min_length=1)
    a: str = Field(min_length=1)
    b: str = Field(min_length=1)
    metric: str = Field(min_length=1)
    expect: Literal["greater", "less", "equivalent"]
    margin: float | None = Field(None, gt=0)  # None: the report's margin for accuracy metrics
    kind: Literal["claim", "sanity"] = "claim"
    # the mechanism an outcome claim works through (steps:COLUMN or slope:COLUMN), reported beside it;
    # a claim on a steps:/slope: metric is its own mechanism, and every claim reports the outcome (the
    # report's primary) too
    mechanism: str | None = None
    # The engagement gate: the part acts when |value| of `engage` (steps:COLUMN, slope:COLUMN or
    # fall:COLUMN, the relative fall of the column from the run's first budget bin to its last; columns
    # may be summed, steps:policy/clip_frac_low+policy/clip_frac_high) reaches `engage_min`, read on
    # `engage_arm`: arm a's or b's mean over seeds, or |mean a − mean b| ("diff": the share a part
    # moves). A claim below its gate is `not engaged`: neither reproduced nor contradicted.
    engage: str | None = None
    engage_min: float | None = Field(None, gt=0)
    engage_arm: Literal["a", "b", "diff"] = "a"

    def arm(self, which: str) -> tuple[str, str]:
        """(recipe, cell) of arm 'a' or 'b'."""
        recipe, _, cell = getattr(self, which).partition("@")
        return recipe, cell or self.cell

    @property
    def on_accuracy(self) -> bool:
        """Decided on held-out accuracy (auc, final, plateau, auc_to:FLOPS), not on a step metric."""
        return self.metric in ACCURACY_METRICS or self.metric.startswith("auc_to:")

    @property
    def step_columns(self) -> list[str]:
        """The steps.parquet columns the claim reads (its metric, mechanism or engagement gate)."""
        return [col for m in (self.metric, self.mechanism or "", self.engage or "")
                if m.startswith(("steps:", "slope:", "fall:")) for col in m.partition(":")[2].split("+")]


# What each accuracy column a report can read is, in the report's words.
ACCURACY_COLUMNS = {
    "eval/acc_greedy": "held-out greedy accuracy",
    "eval/acc_formatted": "held-out accuracy among well-formed sampled answers",
    "eval/avg_k": "held-out sampled pass@1 (avg@k)",
    "eval/pass_k": "held-out pass@k",
    "eval/acc_ood": "accuracy on the harder held-out split (sampled)",
}


class ReportSettings(Section):
    """A suite's `[report]` table: the analysis declared before the runs (never hashed).

    primary   the metric the leaderboard sorts, marks and sizes power by: auc (mean held-out accuracy
              over the budget), final (accuracy at the end), plateau (mean accuracy of the
              evaluations at fractions >= plateau_from) or compute_to:X (the fraction of the budget
              at which accuracy first reaches X; lower is better)
    baseline  the recipe every other is compared with (default: grpo when the suite has it, else
              its first recipe)
    margin    differences smaller than this (in the primary metric's units) count as no difference:
              the equivalence margin, and the difference the report says how many seeds would detect
    accuracy  the evaluation column every accuracy in the report reads (ACCURACY_COLUMNS): held-out greedy
              accuracy by default; eval/acc_formatted (accuracy among well-formed sampled answers: skill
              apart from format), eval/avg_k (sampled pass@1), eval/pass_k or eval/acc_ood
    declared  whether the suite file declared `primary` (the report says which default it used);
              set by the suite loader, not by the file
    """

    WHERE: ClassVar[str] = "report"
    primary: str = DEFAULT_PRIMARY
    baseline: str | None = None
    margin: float = Field(0.02, gt=0, lt=1)
    plateau_from: float = Field(0.75, ge=0, lt=1)
    accuracy: Literal["eval/acc_greedy", "eval/acc_formatted", "eval/avg_k", "eval/pass_k", "eval/acc_ood"] = \
        "eval/acc_greedy"
    declared: bool = False

    @property
    def accuracy_text(self) -> str:
        """How the report names its accuracy: ACCURACY_COLUMNS[accuracy]."""
        return ACCURACY_COLUMNS[self.accuracy]

    @field_validator("primary")
    @classmethod
    def _metric(cls, v: str) -> str:
        m = re.fullmatch(r"compute_to:(.+)", v)
        if not (v in ACCURACY_METRICS or (m is not None and _unit_float(m.group(1)))):
            raise ConfigError(f"report.primary: got {v!r}; expected auc, final, plateau or compute_to:ACC with ACC "
                              "in (0, 1], e.g. compute_to:0.5")
        return v

    @property
    def threshold(self) -> float | None:
        """compute_to's accuracy level, else None."""
        return float(self.primary.split(":", 1)[1]) if self.primary.startswith("compute_to:") else None

    @property
    def higher_is_better(self) -> bool:
        return self.threshold is None


def _unit_float(text: str) -> bool:
    try:
        return 0 < float(text) <= 1
    except ValueError:
        return False


def check_device(v: str) -> str:
    if not isinstance(v, str) or not _DEVICE_RE.match(v):
        raise ConfigError(f"device: got {v!r}; expected cpu, cuda, cuda:N or mps")
    return v


def _recipe(v: Any) -> Any:
    if isinstance(v, algorithms.Recipe):
        return v
    if not isinstance(v, dict):
        raise ConfigError(f"recipe: got {v!r}; expected a table of recipe fields (e.g. recipe.objective.eps_high=0.28); "
                          "the recipe itself is chosen by name (--recipe, a suite's recipes)")
    r = recipe_from_dict(v, "recipe")
    if not isinstance(r, algorithms.Recipe):
        raise ConfigError(f"recipe: got a {r.tag!r} part; expected a recipe table (type 'recipe')")
    return r


class RunConfig(Section):
    recipe: Annotated[algorithms.Recipe, BeforeValidator(_recipe)]
    task: str
    scale: str
    budget: Budget
    seed: Seed = 0
    task_params: dict[str, Any] = {}
    train: TrainConfig = TrainConfig()
    eval: EvalSchedule = EvalSchedule()
    warmstart: WarmStartConfig = WarmStartConfig()
    rollout: RolloutConfig = RolloutConfig()
    rewards: dict[str, Any] = dict(reward_fns.DEFAULT)  # bench/rewards.py: reward function -> weight
    tags: dict[str, Any] = {}  # free-form labels (suite, cell, ...); hashed: only HASHED_TAGS
    device: Annotated[str, BeforeValidator(check_device)] = "cpu"  # execution settings: recorded, not hashed
    threads: int = Field(0, ge=0)

    @field_validator("rewards", mode="before")
    @classmethod
    def _rewards(cls, v: Any) -> Any:
        return reward_fns.check(v)

    @field_validator("warmstart", mode="before")
    @classmethod
    def _no_warmstart(cls, v: Any) -> Any:
        return {"steps": 0} if v == "none" else v  # warmstart = "none": the model as it is, no SFT

    @model_validator(mode="after")
    def _calibrated(self) -> RunConfig:
        if self.warmstart.calibrated and self.warmstart.steps is None:  # a builder fills them (with_calibration)
            raise ConfigError("warmstart.calibrated: steps and lr come from bench/calibration.json when the config is "
                              "built from its tree (RunConfig.compose, from_dict, with_values); this one was validated "
                              "without them: build it with RunConfig.compose(...) or state warmstart.steps")
        return self

    @model_validator(mode="after")
    def _cross(self) -> RunConfig:
        if self.train.tis_cap is not None and self.rollout.backend != "vllm" and self.rollout.precision == "fp32":
            raise ConfigError(f"train.tis_cap: got {self.train.tis_cap!r} with rollout {self.rollout.backend!r} in fp32; "
                              "it corrects the sampler-vs-trainer log-prob mismatch, so it needs rollout = 'vllm' or "
                              "rollout.precision = 'bf16', 'fp16', 'int8' or 'int4' (or tis_cap = null; recipes correct with "
                              "RolloutCorrection, e.g. grpo_tis)")
        return self

    # -- canonical form -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The canonical tree (what run.json stores and the run id hashes)."""
        return {
            "recipe": json.loads(self.recipe.to_json()),
            "task": self.task,
            "task_params": dict(sorted(self.task_params.items())),
            "scale": self.scale,
            "budget": self.budget.canonical(),
            "seed": self.seed,
            "train": self.train.canonical(),
            "eval": self.eval.canonical(),
            "warmstart": self.warmstart.canonical(),
            "rollout": self.rollout.canonical(),
            # added after results existed: left out at its default so earlier run ids stay
            **({} if self.rewards == reward_fns.DEFAULT else {"rewards": dict(self.rewards)}),
            "tags": dict(self.tags),
            "device": self.device,
            "threads": self.threads,
        }

    def full_dict(self) -> dict:
        """The tree with every field written out, defaults included: what overrides merge into."""
        return {name: _table(getattr(self, name)) for name in type(self).model_fields}

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        """The config a run.json stores (or `to_dict` wrote); `from_dict(c.to_dict()) == c`."""
        return cls.build(with_calibration(d), where="")

    @property
    def run_id(self) -> str:
        return run_id_of(self.to_dict())

    @property
    def config_id(self) -> str:
        return run_id_of(self.to_dict(), with_seed=False)

    # -- overrides ------------------------------------------------------------------------------
    @classmethod
    def compose(cls, patch: dict[str, Any] | None = None, **fields: Any) -> RunConfig:
        """A run's config from its fields (sections as objects or tables) with `patch` (nested tables or
        dotted keys) deep-merged on top, validated once: what a suite builds for each of its runs.
        Equal to `RunConfig(**fields).with_values(patch)` without building the config in between."""
        ws = fields.get("warmstart")
        if not patch and not (isinstance(ws, WarmStartConfig) and ws.calibrated and ws.steps is None):
            return cls(**fields)
        return cls.from_dict(merge({k: _table(v) for k, v in fields.items()}, unflatten(patch or {})))

    def with_values(self, patch: dict[str, Any]) -> RunConfig:
        """Deep-merge `patch` (nested tables, or dotted keys: {"train.lr": 1e-4}) and validate once."""
        return RunConfig.from_dict(merge(self.full_dict(), unflatten(patch)))

    def with_overrides(self, assignments: list[str]) -> RunConfig:
        """`--set` text: `path=value` (train.lr=1e-4, recipe.objective.eps_high=0.28), parsed once."""
        return self.with_values(parse_assignments(assignments))


def with_calibration(tree: dict) -> dict:
    """A config tree whose `warmstart.calibrated = true` asks for steps and lr it does not state, with
    them filled in from the committed calibration (bench/calibration.json, read once per process while
    unchanged), so the run id names the values used; any other tree as it is. Done on the tree, before
    validation: validating a config never reads a file."""
    ws = tree.get("warmstart")
    if isinstance(ws, WarmStartConfig):
        ws = ws.model_dump()
    if (not isinstance(ws, dict) or ws.get("calibrated") is not True or ws.get("steps") is not None
            or not isinstance(tree.get("task"), str) or not isinstance(tree.get("scale"), str)):
        return tree
    from bench import calibration

    try:
        settings = WarmStartConfig.build(ws)
    except ConfigError:
        return tree  # the validation that follows names the fault, under its path
    task_params = tree.get("task_params") if isinstance(tree.get("task_params"), dict) else {}
    entry = calibration.lookup(tree.get("task"), settings.sft_params(task_params), tree.get("scale"), settings)
    return {**tree, "warmstart": {**ws, "steps": entry["steps"], "lr": entry["lr"]}}


def run_id_of(tree: dict, with_seed: bool = True) -> str:
    """The run id of a canonical config tree (RunConfig.to_dict; run.json's `config`), without
    building the config: 12 hex digits over everything but the tags, device and threads (and the
    seed, for the config id)."""
    d = {k: v for k, v in tree.items() if k not in ("tags", "device", "threads") + (() if with_seed else ("seed",))}
    # a tuning trial is a run of its own, even when it samples a config that another trial (or a
    # suite) already ran: its record belongs to the trial. Absent for every other run.
    tags = tree.get("tags", {})
    trial = {k: tags[k] for k in HASHED_TAGS if k in tags}
    if trial:
        d["trial"] = trial
    return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]


def _table(value: Any) -> Any:
    """A RunConfig field as a plain table, defaults written out: what a patch merges into (full_dict, compose)."""
    if isinstance(value, algorithms.Recipe):
        return json.loads(value.to_json())
    if isinstance(value, Budget):
        return value.canonical()
    if isinstance(value, Section):
        return value.model_dump()
    return dict(value) if isinstance(value, dict) else value


def parse_assignments(assignments: list[str]) -> dict[str, Any]:
    """["train.lr=1e-4", ...] -> {"train.lr": 0.0001, ...}: values as JSON when they parse, else text."""
    out: dict[str, Any] = {}
    for a in assignments:
        path, sep, raw = a.partition("=")
        if not sep or not path.strip():
            raise ConfigError(f"--set {a!r}: expected PATH=VALUE, e.g. train.lr=1e-4")
        out[path.strip()] = parse_value(raw.strip())
    return out


def parse_value(raw: str) -> Any:
    """JSON when it parses (numbers, true/false/null, lists, tables), else the plain string."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


__all__ = ["Budget", "ConfigError", "EvalConfig", "EvalSchedule", "HASHED_TAGS", "MAX_SEED", "Regime", "ReportSettings",
           "Resources", "Seed",
           "RolloutConfig", "RunConfig", "run_id_of", "TrainConfig", "WarmStartConfig", "check_device", "parse_assignments",
           "parse_value"]
