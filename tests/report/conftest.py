"""A tiny suite (grpo, dapo, ppo × 3 seeds on addition/nano) with hand-made results: dapo learns,
grpo a little, ppo not; dapo seed 2 diverged, ppo seed 1 failed, ppo seed 2 never ran, and a stale
run of an older version of the suite (same tag, another id) sits beside them."""
import math

import pytest

from bench import results
from bench import suite as suites

SUITE_TOML = """
description = "report test suite"
recipes = ["grpo", "dapo", "ppo"]
seeds = 3
tasks = ["addition"]
scales = ["nano"]
budget = 1e9
[eval]
every = 0.25
"""

GAIN = {"grpo": 0.1, "dapo": 0.3, "ppo": 0.0}
BUDGET = 1e9
STEPS = 20


def meta(cfg, status: str, steps_done: int, reason: str = "") -> dict:
    return {"run_id": cfg.run_id, "config_id": cfg.config_id, "recipe_name": cfg.recipe.name,
            "recipe_id": cfg.recipe.id, "status": status, "reason": reason,
            "steps_done": steps_done, "flops_spent": BUDGET * steps_done / STEPS, "gen_tokens": 100 * steps_done,
            "wall_s": 1.0, "config": cfg.to_dict(), "max_new_tokens": 24,
            "packages": {"torch": "2.13.0+cpu", "grpo-bench": "0.1.0"}, "git_commit": "abc123", "git_dirty": False,
            "hardware": {"machine": "x86_64", "cpus": 2, "python": "3.11.7", "torch_threads": 1}}


def curves(recipe: str, seed: int, n_steps: int) -> tuple[list[dict], list[dict]]:
    gain = GAIN[recipe]
    updates = 4 if recipe == "ppo" else 1
    steps = []
    for i in range(1, n_steps + 1):
        f = i / STEPS
        steps.append({"step": i, "compute/flops": BUDGET * f, "compute/gen_tokens": 100.0 * i,
                      "kl/k1": 0.01 * f * (1 + seed), "kl/k3": 0.005 * f * (1 + seed),
                      "policy/entropy": 0.5 - 0.2 * f, "len/mean": 12.0 + 2 * f,
                      "policy/clip_frac_low": 0.0 if updates == 1 else 0.01 * f,
                      "policy/clip_frac_high": 0.0 if updates == 1 else 0.02 * f})
    evals = []
    for frac in [0.0, 0.25, 0.5, 0.75, 1.0]:
        step = round(frac * STEPS)
        if step > n_steps:
            break
        acc = 0.4 + gain * frac + 0.01 * (seed - 1)
        evals.append({"step": step, "fraction": frac, "compute/flops": BUDGET * frac, "eval/acc_greedy": acc,
                      "eval/len_mean": 12.0, "eval/len_correct": 10.0 - (gain * 10) * frac + 0.1 * seed,
                      "eval/len_incorrect": 14.0 + 2 * frac, "eval/n": 100.0})
    return steps, evals


def write_results(root, suite):
    """The suite's runs as described in the module docstring; returns {label: run_id}."""
    ids = {}
    for cfg in suite.expand():
        label = f"{cfg.recipe.name}{cfg.seed}"
        ids[label] = cfg.run_id
        if label == "ppo2":
            continue  # never ran
        if label == "dapo2":
            steps, evals = curves("dapo", 2, 11)
            steps[-1]["kl/k1"] = math.nan
            results.write_run(root, cfg.run_id, meta(cfg, "diverged", 11, "non-finite loss at step 11"), steps, evals)
        elif label == "ppo1":
            results.write_run(root, cfg.run_id, meta(cfg, "failed", 0, "RuntimeError: out of memory"), [], [])
        else:
            steps, evals = curves(cfg.recipe.name, cfg.seed, STEPS)
            results.write_run(root, cfg.run_id, meta(cfg, "finished", STEPS), steps, evals)
    stale = suite.expand()[0]
    steps, evals = curves("grpo", 0, STEPS)
    results.write_run(root, "stale0000000", {**meta(stale, "finished", STEPS), "run_id": "stale0000000"}, steps,
                      [{**e, "eval/acc_greedy": 0.99} for e in evals])
    return ids


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(suite, results root, {label: run id})."""
    d = tmp_path_factory.mktemp("report")
    path = d / "tiny.toml"
    path.write_text(SUITE_TOML)
    s = suites.load(path)
    root = d / "results"
    return s, root, write_results(root, s)


@pytest.fixture(scope="session")
def fake_runs():
    """This module's record helpers (meta, curves, STEPS) for tests that write runs of their own suites
    (test modules cannot import one of several conftest.py files reliably)."""
    from types import SimpleNamespace

    return SimpleNamespace(meta=meta, curves=curves, steps=STEPS)
