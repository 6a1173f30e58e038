"""Reward functions: a registry of named per-completion rewards combined with weights.

    rewards = {correct = 1.0, format = 0.1}            # in a suite (top level), or
    bench run ... --set rewards.format=0.1             # on the command line
    bench run ... --set 'rewards={"correct": 1, "length": 0.05}'

A run's reward is Σ weight × fn(samples). The default, {correct = 1.0}, is the task verifier's
0/1 verdict alone, as before this registry existed (run ids at the default are unchanged). The
verdict itself is never replaced: `reward/correct` and `acc/train` log correctness whatever the
weights, and held-out evaluations score correctness only, so accuracy stays comparable between
runs with different reward mixes. Each function in the mix is logged unweighted as
`reward/<name>`; `reward/mean` is the combined reward after the recipe's shaping.

Built in (each a tensor of shape (B,), higher is better):
  correct    1 when the task's verifier accepts the completion, else 0
  format     1 when the task finds a final answer in it (`#### N`, `\\boxed{...}`, ...), else 0
  length     -(completion tokens / max_new_tokens), in [-1, 0]: a length penalty
  overlong   DAPO's soft overlong punishment: 0 up to max_new_tokens − buffer, then linear down to
             −1 at the cap (buffer = 20% of max_new_tokens, at least 1 token). Recipes that
             already shape rewards for length (dapo) would count it twice.

More: `@register("name")` on a function of `Samples` returning a (B,) float tensor; registering
declares its column `reward/<name>` (algorithms.metrics.reward_metric), so steps.parquet stores it.
"""
from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from algorithms import metrics as metric_registry
from algorithms.errors import ConfigError

DEFAULT: dict[str, float] = {"correct": 1.0}
OVERLONG_BUFFER_FRAC = 0.2  # DAPO: 4k of a 20k cap


@dataclass(frozen=True)
class Samples:
    """One batch of completions, what every reward function sees."""

    texts: list[str]
    examples: list  # tasks.Example per completion
    correct: torch.Tensor  # (B,) bool: the task verifier's verdict
    lengths: torch.Tensor  # (B,) completion tokens (EOS included)
    truncated: torch.Tensor  # (B,) bool: hit max_new_tokens without EOS
    max_new_tokens: int
    task: object  # the tasks.Task


RewardFn = Callable[[Samples], torch.Tensor]
_REWARDS: dict[str, RewardFn] = {}


def register(name: str) -> Callable[[RewardFn], RewardFn]:
    """Register a reward function under `name` and declare its metric column `reward/<name>`."""
    def deco(fn: RewardFn) -> RewardFn:
        if name in _REWARDS:
            raise ValueError(f"reward function {name!r} is already registered")
        try:
            metric_registry.reward_metric(name)
        except metric_registry.MetricError as e:  # a malformed name, or one whose column is another metric (mean, std)
            raise ValueError(f"reward function {name!r}: its column reward/{name} cannot be declared: {e}") from None
        _REWARDS[name] = fn
        return fn
    return deco


def names() -> list[str]:
    return sorted(_REWARDS)


@register("correct")
def correct(s: Samples) -> torch.Tensor:
    return s.correct.float()


@register("format")
def format_(s: Samples) -> torch.Tensor:
    return torch.tensor([float(s.task.extract(t) is not None) for t in s.texts], device=s.correct.device)


@register("length")
def length(s: Samples) -> torch.Tensor:
    return -(s.lengths.float() / s.max_new_tokens)


@register("overlong")
def overlong(s: Samples) -> torch.Tensor:
    buffer = max(1, round(OVERLONG_BUFFER_FRAC * s.max_new_tokens))
    start = s.max_new_tokens - buffer
    return -((s.lengths.float() - start) / buffer).clamp(min=0.0, max=1.0)


def check(spec: object) -> dict[str, float]:
    """A validated {name: weight}; unknown names and non-numbers raise, naming the choices."""
    if not isinstance(spec, dict) or not spec:
        raise ConfigError(f"rewards must be a table of reward function -> weight, e.g. "
                          f"{{correct = 1.0, format = 0.1}}; got {spec!r}")
    out = {}
    for name, w in spec.items():
        if name not in _REWARDS:
            close = difflib.get_close_matches(str(name), names(), n=1)
            raise ConfigError(f"unknown reward function {name!r}; choose from: {', '.join(names())}"
                              + (f" (did you mean {close[0]!r}?)" if close else ""))
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
            raise ConfigError(f"rewards.{name}: the weight must be a finite number, got {w!r}")
        out[name] = float(w)
    return dict(sorted(out.items()))


def combine(spec: dict[str, float], s: Samples) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(Σ weight × fn(s), {name: fn(s)} unweighted). The default spec gives exactly the verdict."""
    parts = {name: _REWARDS[name](s).to(torch.float32) for name in spec}
    total = sum(w * parts[name] for name, w in spec.items())
    return total, parts


def metrics(parts: list[dict[str, torch.Tensor]], correct: torch.Tensor) -> dict[str, float]:
    """`reward/correct` and `reward/<name>` means over every sampled completion of a step."""
    out = {"reward/correct": correct.float().mean().item() if correct.numel() else math.nan}
    for name in {k for p in parts for k in p}:
        out[f"reward/{name}"] = torch.cat([p[name] for p in parts]).mean().item()
    return out
