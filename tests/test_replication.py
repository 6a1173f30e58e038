"""`bench reproduce --verdicts`: the published conclusions against a rerun's (bench/replication.py).

The rerun here is the published runs themselves (a machine that reproduced them bit for bit), against
a copy of the report in which one recipe's primary metric was lowered by 0.05: every conclusion
that involves that recipe must fail and be named, the others must hold."""
import shutil
from pathlib import Path

import polars as pl
import pytest

from algorithms.errors import InputError
from bench import publish, replication
from bench import suite as suites

REPORT = Path(__file__).resolve().parents[1] / "reports" / "math-small"
CELL = "addition/nano/on_policy"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """The cell's runs of reports/math-small copied (links resolved) into a results root."""
    suite = suites.load("math-small")
    root = tmp_path_factory.mktemp("published")
    for cfg in suite.expand({"cell": [CELL]}):
        shutil.copytree(REPORT / "data" / "runs" / cfg.run_id, root / "runs" / cfg.run_id, symlinks=False)
    return suite, root


def _lower(root: Path, suite, recipe: str, by: float) -> None:
    """Lower the suite's accuracy column by `by` in every evaluation of `recipe`'s runs in the cell:
    its AUC (the cell's primary metric) falls by exactly `by`."""
    col = suite.report.accuracy
    for cfg in suite.expand({"cell": [CELL], "recipe": [recipe]}):
        f = root / "runs" / cfg.run_id / "evals.parquet"
        ev = pl.read_parquet(f)
        ev.with_columns(pl.col(col) - by).write_parquet(f)


def test_identical_runs_reproduce_every_conclusion(published):
    suite, root = published
    check = replication.compare(suite, root, root, [CELL])
    assert check.ok, check.failures
    assert {c.recipe for c in check.contrasts} == {"dr_grpo", "dapo", "gspo"}  # every recipe but the baseline
    assert all(c.shift == 0 and c.verdict_pub == c.verdict_new for c in check.contrasts)
    # one warm start in this cell: levels are reported, not judged
    assert {lv.recipe for lv in check.levels} == {"grpo", "dr_grpo", "dapo", "gspo"}
    assert all(lv.ok is None and lv.warm_starts == 1 for lv in check.levels)


def test_a_recipe_lowered_by_005_fails_and_is_named(published, tmp_path, capsys):
    suite, root = published
    altered = tmp_path / "altered"
    shutil.copytree(root, altered)
    _lower(altered, suite, "dapo", 0.05)
    check = replication.compare(suite, altered, root, [CELL])  # published: the altered copy
    assert not check.ok
    bad = {c.recipe for c in check.contrasts if not c.ok}
    assert bad == {"dapo"}, check.failures
    dapo = next(c for c in check.contrasts if c.recipe == "dapo")
    assert dapo.shift == pytest.approx(0.05, abs=1e-9) and not dapo.equivalent
    lv = next(lv for lv in check.levels if lv.recipe == "dapo")
    assert lv.shift == pytest.approx(0.05, abs=1e-9) and lv.ok is None  # one warm start: reported only
    replication.render(check, __import__("sys").stdout)
    out = capsys.readouterr().out
    assert "dapo: its contrast with the baseline moved by +0.0500" in out
    assert "level depends on the warm start" in out
    assert "do not reproduce" in out


def test_levels_are_judged_over_several_warm_starts(published, tmp_path, monkeypatch):
    """A cell whose runs come from several warm starts: a level shift beyond the margin fails."""
    suite, root = published
    altered = tmp_path / "altered"
    shutil.copytree(root, altered)
    _lower(altered, suite, "grpo", 0.05)  # the baseline: every contrast moves too
    import json

    for i, d in enumerate(sorted((altered / "runs").iterdir())):  # pretend three warm starts
        meta = json.loads((d / "run.json").read_text())
        meta["warmstart"]["key"] = f"ws{i % 3}"
        (d / "run.json").write_text(json.dumps(meta))
    check = replication.compare(suite, altered, root, [CELL])
    grpo = next(lv for lv in check.levels if lv.recipe == "grpo")
    assert grpo.warm_starts == 3 and grpo.ok is False
    assert any("grpo: level moved by +0.0500" in f for f in check.failures)
    assert {c.recipe for c in check.contrasts if not c.ok} == {"dr_grpo", "dapo", "gspo"}


def test_a_missing_rerun_is_named(published, tmp_path):
    suite, root = published
    partial = tmp_path / "partial"
    shutil.copytree(root, partial)
    gone = suite.expand({"cell": [CELL], "recipe": ["gspo"], "seed": ["2"]})[0].run_id
    shutil.rmtree(partial / "runs" / gone)
    check = replication.compare(suite, root, partial, [CELL])
    assert not check.ok and any("gspo seed 2: no rerun record" in f for f in check.failures)


def test_verdicts_refuse_recipe_or_seed_filters_and_unknown_cells():
    metas = publish.published_runs(REPORT)
    with pytest.raises(InputError, match="every recipe and seed of a cell"):
        replication.chosen_cells(metas, ["recipe=dapo"], "in reports/math-small")
    with pytest.raises(InputError, match="addition/nano/on_policy"):  # the valid choices are named
        replication.chosen_cells(metas, ["cell=nope"], "in reports/math-small")
    assert replication.chosen_cells(metas, [f"cell={CELL}"], "") == [CELL]


def test_the_coverage_kind_is_checked_beside_the_verdict(published, tmp_path, capsys):
    """Identical runs agree on every kind; a copy where dapo's pass@K (the coverage axis) fell by 0.2
    and its greedy accuracy rose by 0.2 (far beyond any published MDD) turns its kind and is named."""
    suite, root = published
    check = replication.compare(suite, root, root, [CELL])
    assert {k.recipe for k in check.kinds} == {"dr_grpo", "dapo", "gspo"} and all(k.ok for k in check.kinds)
    altered = tmp_path / "altered"
    shutil.copytree(root, altered)
    for cfg in suite.expand({"cell": [CELL], "recipe": ["dapo"]}):
        f = altered / "runs" / cfg.run_id / "evals.parquet"
        ev = pl.read_parquet(f)
        cov = [c for c in ev.columns if c.startswith("eval/pass@") or c == "eval/pass_k"]
        ev.with_columns([pl.col(c) - 0.2 for c in cov] + [pl.col("eval/acc_greedy") + 0.2]).write_parquet(f)
    check = replication.compare(suite, root, altered, [CELL])  # the rerun: the altered copy
    dapo = next(k for k in check.kinds if k.recipe == "dapo")
    assert dapo.kind_new == "collapse" and dapo.kind_pub != "collapse" and not dapo.ok
    assert all(k.ok for k in check.kinds if k.recipe != "dapo")
    assert any(f.startswith(f"{CELL} dapo: kind {dapo.kind_pub} published, collapse rerun (") and "beyond the published MDD"
               in f for f in check.failures), check.failures
    replication.render(check, __import__("sys").stdout)
    assert "kind: " in capsys.readouterr().out
