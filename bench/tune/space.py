"""Search spaces: each recipe's defaults (`algorithms.search_space`: search_spaces.BASE and the ranges
the recipe registers with), merged with a suite's [tune.space.RECIPE] table, validated against the
recipe's RunConfig, and sampled by an Optuna trial.

    [tune.space.grpo]
    "train.lr" = {low = 1e-5, high = 1e-3, log = true}    # replace a range
    "recipe.kl.coef" = false                              # drop a parameter (keep the default value)
    "train.temperature" = {choices = [0.8, 1.0]}          # add one
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import algorithms
from algorithms.errors import ConfigError, InputError
from bench.config import RunConfig
from bench.typed import merge, unflatten

Kind = Literal["log_float", "float", "int", "categorical"]
SPEC_KEYS = {"low", "high", "log", "choices"}
TUNABLE = ("recipe.", "train.")  # what a suite's [overrides.RECIPE] may set, hence what a tuned file may


@dataclass(frozen=True)
class Param:
    path: str
    kind: Kind
    low: float | int | None = None
    high: float | int | None = None
    choices: tuple = ()

    @classmethod
    def parse(cls, path: str, spec: Any, where: str) -> Param:
        """{"low", "high"[, "log"]} or {"choices": [...]}; `where` names the source in errors."""
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: {path!r}: expected a table {{low = .., high = .. [, log = true]}} or "
                              f"{{choices = [..]}} (or false to drop it), got {spec!r}")
        keys = set(spec)
        if keys == {"choices"}:
            ch = spec["choices"]
            if not isinstance(ch, list) or not ch or len({json.dumps(c) for c in ch}) != len(ch):
                raise ConfigError(f"{where}: {path!r}: choices must be a non-empty list of distinct values, got {ch!r}")
            return cls(path, "categorical", choices=tuple(ch))
        if keys not in ({"low", "high"}, {"low", "high", "log"}):
            raise ConfigError(f"{where}: {path!r}: unknown keys {sorted(keys - {'low', 'high', 'log', 'choices'})} or a "
                              f"missing bound; expected low, high and optionally log, or choices alone")
        lo, hi, log = spec["low"], spec["high"], spec.get("log", False)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lo, hi)) or not isinstance(log, bool):
            raise ConfigError(f"{where}: {path!r}: low and high must be numbers and log true/false, got {spec!r}")
        if not lo < hi or (log and lo <= 0):
            raise ConfigError(f"{where}: {path!r}: need low < high{' and low > 0 for a log range' if log else ''}, got {spec!r}")
        kind = "log_float" if log else "int" if isinstance(lo, int) and isinstance(hi, int) else "float"
        return cls(path, kind, lo, hi)

    def probes(self) -> list:
        """Values that validation applies: both ends of a range, every choice."""
        return list(self.choices) if self.kind == "categorical" else [self.low, self.high]

    def suggest(self, trial) -> Any:
        if self.kind == "categorical":
            return trial.suggest_categorical(self.path, list(self.choices))
        if self.kind == "int":
            return trial.suggest_int(self.path, self.low, self.high)
        return trial.suggest_float(self.path, float(self.low), float(self.high), log=self.kind == "log_float")

    def __str__(self) -> str:
        if self.kind == "categorical":
            return f"{self.path} in {list(self.choices)}"
        return f"{self.path} in [{self.low:g}, {self.high:g}]{' (log)' if self.kind == 'log_float' else ''}"


def defaults(recipe: str) -> dict[str, dict]:
    """A registered recipe's default space: search_spaces.BASE and the ranges it registers with."""
    return algorithms.search_space(recipe)


def space_for(recipe: str, table: dict | None = None, where: str = "search space") -> tuple[Param, ...]:
    """The recipe's default space with a suite's [tune.space.RECIPE] table applied (false drops a key)."""
    merged = defaults(recipe)
    for path, spec in flatten(table or {}).items():
        if spec is False:
            merged.pop(path, None)
        else:
            merged[path] = spec
    out = []
    for path, spec in merged.items():
        if not path.startswith(TUNABLE):
            raise ConfigError(f"{where}: {path!r}: only {' and '.join(t + '*' for t in TUNABLE)} paths can be tuned "
                              "(budget, eval, task, scale and warm start stay matched)")
        out.append(Param.parse(path, spec, where))
    if not out:
        raise ConfigError(f"{where}: the search space of {recipe} is empty")
    return tuple(out)


def flatten(table: dict, prefix: str = "") -> dict:
    """{"train": {"lr": {low, high}}} (a TOML sub-table) -> {"train.lr": {low, high}}."""
    out = {}
    for k, v in table.items():
        if isinstance(v, dict) and v and not set(v) <= SPEC_KEYS:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def refusal(cfg: RunConfig | dict, patch: dict[str, Any]) -> Exception | None:
    """Why the config (or its tree) refuses `patch` (dotted paths, as `RunConfig.with_values` takes
    them): the error a bad path or value raises, or None where the patched config validates."""
    try:
        if isinstance(cfg, dict):  # a tree: built only here, once
            RunConfig.from_dict(merge(cfg, unflatten(patch)))
        else:
            cfg.with_values(patch)
    except (InputError, TypeError) as e:
        return e
    return None


def validate(space: tuple[Param, ...], cfg: RunConfig, where: str = "search space") -> None:
    """Apply each end of each range to cfg: a bad path names the valid fields, a bad value its rule."""
    for p in space:
        for v in p.probes():
            if (e := refusal(cfg, {p.path: v})) is not None:
                raise ConfigError(f"{where}: {p.path} = {v!r} does not fit {cfg.recipe.name}: {e}") from None


def sample(space: tuple[Param, ...], trial) -> dict[str, Any]:
    return {p.path: p.suggest(trial) for p in space}
