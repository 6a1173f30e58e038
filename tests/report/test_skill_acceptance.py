"""Issue 22's acceptance, read from the published runs themselves (each run's run.json and
evals.parquet), not from the report code that summarises them: in every cell of math-small, reasoning
and math-scales the sampled format rate before RL is >= 0.95, and the baseline's gain in accuracy
among well-formed sampled answers (last evaluation - first, per run) has a mean over seeds of at
least 5 standard errors; math-scales spans >= 3 scales and >= 25x in parameters; math-small covers 2
tasks and its power table decides at 2 points."""
import functools
import json
import math
import statistics
from pathlib import Path

import polars as pl
import pytest

from bench import suite as suites

REPORTS = Path(__file__).resolve().parents[2] / "reports"
SKILL_REPORTS = ("math-small", "reasoning", "math-scales")


@functools.cache
def cells(name: str) -> dict[str, list[dict]]:
    """cell -> [{recipe, params, format0, gain}] over the suite's runs (a run another suite
    trained, linked here, belongs to the cells of this suite whose expansion has its run id)."""
    where: dict[str, list[str]] = {}
    for cfg in suites.load(name).expand():
        where.setdefault(cfg.run_id, []).append(cfg.tags["cell"])
    out: dict[str, list[dict]] = {}
    for run_id, in_cells in where.items():
        run = REPORTS / name / "data" / "runs" / run_id
        assert (run / "run.json").is_file(), (name, run_id, in_cells)
        meta = json.loads((run / "run.json").read_text())
        assert meta["status"] == "finished", (name, run_id)
        ev = pl.read_parquet(run / "evals.parquet").sort("step")
        cfg = meta["config"]
        row = {"recipe": cfg["recipe"]["name"], "params": meta["model"]["params"],
               "format0": ev.filter(pl.col("fraction") == 0)["eval/format_rate"].item(),
               "gain": ev["eval/acc_formatted"][-1] - ev["eval/acc_formatted"][0]}
        for cell in in_cells:
            out.setdefault(cell, []).append(row)
    return out


@pytest.mark.parametrize("name", SKILL_REPORTS)
def test_every_cell_starts_well_formed_and_the_baseline_gains_5_se(name):
    found, baseline = cells(name), suites.load(name).report.baseline
    assert found, name
    for cell, runs in found.items():
        assert statistics.mean(r["format0"] for r in runs) >= 0.95, (name, cell)
        gains = [r["gain"] for r in runs if r["recipe"] == baseline]
        assert len(gains) >= 3, (name, cell)
        mean, se = statistics.mean(gains), statistics.stdev(gains) / math.sqrt(len(gains))
        assert mean >= 5 * se and mean > 0, (name, cell, mean, se)


def test_math_scales_spans_three_scales_and_25x_parameters():
    params = {r["params"] for runs in cells("math-scales").values() for r in runs}
    assert len(params) >= 3 and max(params) >= 25 * min(params), sorted(params)


def test_math_small_covers_two_tasks():
    assert len({cell.split("/")[0] for cell in cells("math-small")}) >= 2


def test_math_small_decides_at_2_points_in_every_cell():
    """Issue 22, acceptance 2: the minimum detectable difference on the primary metric (the report's
    power table: paired by seed, Holm over the cell's comparisons, power 0.8) is <= 0.02 in every cell."""
    s = suites.load("math-small")
    power = pl.read_csv(REPORTS / "math-small" / "power.csv").filter(pl.col("primary"))
    assert s.report.margin <= 0.02
    assert sorted(power["cell"]) == sorted(c.name for c in s.cells)
    for row in power.iter_rows(named=True):
        assert row["mdd"] <= 0.02, row
