"""A TPE sampler seeded per trial, so that workers on one storage never sample alike.

A seed per process repeats whenever two `bench tune` processes start on one journal (both are
worker 0 of their own pool) and then both sample identical parameter sets. Here every trial
gets a fresh TPE seeded from (the suite's tune seed, the trial's number); trial numbers come from
the storage, so no two trials of a study share a seed whichever process or machine runs them,
and one worker alone samples the same sequence on every rerun.

TPE keeps no state between trials but its random state (it reads the history from the storage;
constant_liar sees running trials there), so rebuilding it per trial changes nothing else.
"""
from __future__ import annotations

from collections.abc import Callable

import optuna


def trial_seed(base: int, number: int) -> int:
    return (base * 1_000_003 + number * 7_919 + 1) % 2**32


class TrialSeeded(optuna.samplers.BaseSampler):
    """Delegates to `make(trial_seed(base, trial.number))`, built in before_trial."""

    def __init__(self, make: Callable[[int], optuna.samplers.BaseSampler], base: int):
        self._make, self._base = make, base
        self._inner = make(trial_seed(base, 0))

    def before_trial(self, study, trial):
        self._inner = self._make(trial_seed(self._base, trial.number))
        self._inner.before_trial(study, trial)

    def infer_relative_search_space(self, study, trial):
        return self._inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return self._inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self._inner.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study, trial, state, values):
        self._inner.after_trial(study, trial, state, values)


def tpe(startup_trials: int, base: int) -> TrialSeeded:
    return TrialSeeded(lambda seed: optuna.samplers.TPESampler(n_startup_trials=startup_trials, seed=seed,
                                                               constant_liar=True), base)
