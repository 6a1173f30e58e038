"""`bench tune`: Optuna studies whose trials are runs, matched across recipes, with pruning.

    suite [tune] + algorithms.search_space(recipe) ─► space.py (validated ranges) ─► study.py: one study
    per cell × recipe; a trial = a run (tags study, trial) reporting each evaluation to the pruner
    ─► tuned.py: best values as results/tuned/SUITE.toml ─► `bench suite SUITE --tuned`
    costs.py: tuning cost and tuned vs default, from results/ alone

Storage (storage.py): a journal file under results/tune/ by default, or any database URL Optuna
accepts; `optuna-dashboard <the same path or URL>` shows the studies.
"""
from bench.tune.costs import compare, summary, trial_runs

__all__ = ["compare", "summary", "trial_runs"]
