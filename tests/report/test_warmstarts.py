"""Warm starts as a random effect in the coverage verdicts: a cell whose seeds start from several warm
starts is read over warm starts (bench/report/coverage.py `verdicts`, `per_warmstart`), a cell of one
warm start over seeds exactly as before."""
import math

import numpy as np
import polars as pl
import pytest
from scipy.stats import t as student

from bench import report, results
from bench import suite as suites
from bench.report import coverage, stats
from bench.report import data as report_data

TOML = """
recipes = ["grpo", "dapo"]
seeds = 6
tasks = ["addition"]
scales = ["nano"]
budget = 1e9
[eval]
every = 0.5
k = 8
[regimes.ws3]
warmstarts = 3
[regimes.one]
grad_clip = 0.5  # else its seeds of warm start 0 would be ws3's runs (the same config, the same run id)
[report]
accuracy = "eval/acc_formatted"
primary = "final"
"""
WS3, ONE = "addition/nano/ws3", "addition/nano/one"
START = (0.30, 0.40, 0.70)  # pass1, greedy, pass@8 at the warm start (every recipe's first evaluation)


def base_end(seed: int) -> tuple[float, float, float]:
    """grpo's final (pass1, greedy, pass@8) on a seed: seeds differ, so only pairing removes the spread."""
    return 0.50 + 0.01 * seed, 0.45 + 0.005 * seed, 0.75 - 0.004 * seed


def gap(cell: str, seed: int) -> tuple[float, float, float]:
    """dapo − grpo on each axis. ws3: +0.10 on every axis on warm starts 0 and 1 (seeds s with s mod 3
    < 2), none on warm start 2. one: gaps that vary with the seed, so the seed-level t has a spread."""
    if cell == WS3:
        return (0.0, 0.0, 0.0) if seed % 3 == 2 else (0.10, 0.10, 0.10)
    return 0.02 + 0.01 * (seed % 3), -0.005 + 0.003 * seed, 0.01 - 0.004 * (seed % 2)


def end(cell: str, recipe: str, seed: int) -> tuple[float, ...]:
    b = base_end(seed)
    return b if recipe == "grpo" else tuple(v + g for v, g in zip(b, gap(cell, seed)))


@pytest.fixture(scope="module")
def built(tmp_path_factory, fake_runs):
    """(suite, results root, data): both cells' runs, the final evaluation exactly `end`."""
    d = tmp_path_factory.mktemp("warmstarts")
    path = d / "ws.toml"
    path.write_text(TOML)
    s = suites.load(path)
    root = d / "results"
    for cfg in s.expand():
        steps, evals = fake_runs.curves("grpo", cfg.seed, fake_runs.steps)
        fin = end(cfg.tags["cell"], cfg.recipe.name, cfg.seed)
        for e in evals:
            t = e["fraction"]
            p1, g, pk = fin if t == 1.0 else (a + t * (b - a) for a, b in zip(START, fin))
            e.update({"eval/acc_formatted": p1, "eval/acc_greedy": g, "eval/format_rate": 0.99,
                      "eval/pass@1": p1, "eval/pass@2": (p1 + pk) / 2, "eval/pass@4": pk - 0.01, "eval/pass@8": pk,
                      "eval/pass_k": pk})
        results.write_run(root, cfg.run_id, fake_runs.meta(cfg, "finished", fake_runs.steps), steps, evals)
    return s, root, report_data.load(s, root)


def test_the_suite_gives_the_ws3_cell_three_warm_starts(built):
    s, _, data = built
    ws = {(c.tags["cell"], c.seed): c.warmstart.seed for c in data.cfgs.values()}
    w0 = s.warmstart.seed
    assert {ws[WS3, seed] - w0 for seed in range(6)} == {0, 1, 2}
    assert all(ws[WS3, seed] - w0 == seed % 3 for seed in range(6))
    assert {ws[ONE, seed] for seed in range(6)} == {w0}


def test_several_warm_starts_are_read_over_warm_starts_not_seeds(built):
    s, _, data = built
    row = coverage.verdicts(s, data).filter(pl.col("cell") == WS3).row(0, named=True)
    assert (row["recipe"], row["level"], row["warmstarts"], row["pairs"]) == ("dapo", "warm start", 3, 6)

    # pooled as six independent seeds, the gap would look settled: its t(5) interval excludes 0
    seeds = [gap(WS3, seed)[0] for seed in range(6)]
    pooled = stats.paired_t(np.array(seeds), np.zeros(6))
    assert pooled.lo > 0.01

    # over warm starts: the mean of the three warm starts' means, a t(2) interval over those means
    means = np.array([0.10, 0.10, 0.0])  # warm starts 0, 1, 2: each the mean of its two seeds' gaps
    diff = means.mean()
    se = means.std(ddof=1) / math.sqrt(3)
    tq = student.ppf(0.975, 2)
    p = 2 * student.sf(diff / se, 2)  # t = 2.0 on 2 df: p = 0.18
    for axis in coverage.AXES:
        assert row[f"{axis}_diff"] == pytest.approx(0.2 / 3, abs=1e-12)
        assert row[f"{axis}_lo"] == pytest.approx(diff - tq * se, abs=1e-12)
        assert row[f"{axis}_hi"] == pytest.approx(diff + tq * se, abs=1e-12)
        assert row[f"{axis}_lo"] < 0 < row[f"{axis}_hi"]
        assert row[f"{axis}_p_holm"] == pytest.approx(p, abs=1e-12)  # one recipe: Holm leaves p
        assert row[f"{axis}_mdd"] == pytest.approx(stats.paired_mdd(means.std(ddof=1), 3), rel=1e-9)
        assert row[f"{axis}_dir"] == "flat"
    assert row["kind"] == "undecided"  # the seed-level reading would have called it skill


def test_per_warmstart_shows_the_warm_start_that_erases_the_gap(built):
    s, _, data = built
    t = coverage.per_warmstart(s, data)
    assert t["cell"].unique().to_list() == [WS3]  # the one-warm-start cell has no rows
    w0 = s.warmstart.seed
    assert t["warmstart"].to_list() == [w0, w0 + 1, w0 + 2] and t["pairs"].to_list() == [2, 2, 2]
    rows = t.rows(named=True)
    for r, g in zip(rows, (0.10, 0.10, 0.0)):
        for axis in coverage.AXES:
            assert r[f"{axis}_diff"] == pytest.approx(g, abs=1e-12)
    # every seed of warm starts 0 and 1 gains 0.10 on every axis (p 0): skill; warm start 2's gap is 0
    # on both seeds, inside the 0.02 margin: equivalent
    assert [r["kind"] for r in rows] == ["skill", "skill", "equivalent"]
    assert [r["pass_k_dir"] for r in rows] == ["up", "up", "equivalent"]


def test_one_warm_start_keeps_the_seed_level_numbers(built):
    s, _, data = built
    row = coverage.verdicts(s, data).filter(pl.col("cell") == ONE).row(0, named=True)
    assert (row["level"], row["warmstarts"], row["pairs"]) == ("seed", 1, 6)
    for i, axis in enumerate(coverage.AXES):
        x = np.array([end(ONE, "dapo", seed)[i] for seed in range(6)])
        y = np.array([end(ONE, "grpo", seed)[i] for seed in range(6)])
        t = stats.paired_t(x, y)
        assert t.sd > 0
        got = (row[f"{axis}_diff"], row[f"{axis}_lo"], row[f"{axis}_hi"], row[f"{axis}_p_holm"], row[f"{axis}_mdd"])
        assert got == (t.diff, t.lo, t.hi, t.p, stats.paired_mdd(t.sd, t.n))  # exactly: the same computation


def test_cluster_paired_t_weights_each_cluster_equally():
    # cluster 0 has three pairs (gap 0.3), cluster 1 one (gap 0.1): the mean is 0.2, not the pooled 0.25
    x, y, g = [1.3, 1.3, 1.3, 1.1], [1.0, 1.0, 1.0, 1.0], [0, 0, 0, 1]
    assert stats.cluster_means(x, y, g) == pytest.approx({0: 0.3, 1: 0.1})
    r = stats.cluster_paired_t(x, y, g)
    assert (r.n, r.diff) == (2, pytest.approx(0.2))
    assert r.sd == pytest.approx(0.2 / math.sqrt(2))  # the SD of (0.3, 0.1)
    one = stats.cluster_paired_t(x[:3], y[:3], g[:3])  # a single cluster: no interval
    assert one.n == 1 and math.isnan(one.lo) and math.isnan(one.p)


def test_report_adds_the_per_warm_start_table(built, tmp_path):
    s, root, _ = built
    out = report.build(s, root, tmp_path / "out")
    by = pl.read_csv(out / "coverage_by_warmstart.csv")
    assert by.height == 3 and by["kind"].to_list() == ["skill", "skill", "equivalent"]
    cov = pl.read_csv(out / "coverage.csv")
    assert dict(zip(cov["cell"], cov["level"])) == {WS3: "warm start", ONE: "seed"}
    md = (out / "report.md").read_text()
    assert (f"{WS3}: the kinds above are over its 3 warm starts; the warm starts differ on the kind for dapo "
            "(undecided over them; each alone: skill, skill, equivalent).") in md
