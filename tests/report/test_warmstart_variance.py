"""Several warm starts in one cell: the suite assigns them by seed, the report splits the variance."""
import math

import polars as pl
import pytest

from bench import report, results
from bench import suite as suites
from bench.report.sections.power import between_share

TOML = """
recipes = ["grpo", "dapo"]
seeds = 6
tasks = ["addition"]
scales = ["nano"]
budget = 1e9
[eval]
every = 0.5
[regimes.ws3]
warmstarts = 3
"""


def test_between_share_matches_a_hand_computed_anova():
    assert between_share([1, 1, 2, 2], [0, 0, 1, 1]) == 1.0  # all variance between groups
    assert between_share([1, 2, 1, 2], [0, 0, 1, 1]) == 0.0  # none
    # groups (1, 3) and (5, 7): MSB = 2 * 2^2 * 2 / 1 = 16, MSW = 2, n0 = 2: between (16 - 2) / 2 = 7
    assert between_share([1, 3, 5, 7], [0, 0, 1, 1]) == pytest.approx(7 / 9)
    assert math.isnan(between_share([1, 2], [0, 1]))  # no replication within a group


def load(tmp_path):
    path = tmp_path / "ws.toml"
    path.write_text(TOML)
    return suites.load(path)


def test_seeds_cycle_through_the_warm_starts_and_recipes_share_them(tmp_path):
    s = load(tmp_path)
    cfgs = s.expand()
    assert {(c.recipe.name, c.seed): c.warmstart.seed for c in cfgs} == {
        (r, seed): seed % 3 for r in ("grpo", "dapo") for seed in range(6)}
    assert len({c.run_id for c in cfgs}) == 12


def test_the_report_splits_variance_between_warm_starts(tmp_path, fake_runs):
    s = load(tmp_path)
    root = tmp_path / "results"
    for cfg in s.expand():
        steps, evals = fake_runs.curves("grpo", cfg.seed, fake_runs.steps)
        w = cfg.warmstart.seed
        for e in evals:  # the level moves with the warm start, dapo's lead does not (except on warm start 2)
            lead = (0.05 if w < 2 else -0.01) if cfg.recipe.name == "dapo" else 0.0
            e["eval/acc_greedy"] = 0.2 + 0.1 * w + (0.2 + lead + 0.001 * cfg.seed) * e["fraction"]
        results.write_run(root, cfg.run_id, fake_runs.meta(cfg, "finished", fake_runs.steps), steps, evals)
    out = report.build(s, root, tmp_path / "out")
    t = pl.read_csv(out / "warmstart_variance.csv")
    grpo, dapo = t.row(0, named=True), t.row(1, named=True)
    assert grpo["share_level"] > 0.9 and grpo["warmstarts"] == 3
    assert dapo["same_sign"] is False and dapo["diff_by_warmstart"].startswith("0:+")
    md = (out / "report.md").read_text()
    assert "Warm-start variance" in md and "share of difference" in md
