"""Expansion: counts, tags, matched budgets, filters, overrides, shipped suites."""

from pathlib import Path

import pytest

import algorithms
from bench import suite as suites
from bench.config import RunConfig
from bench.harness.runner import execution_order, make_plan

TEXT = """\
recipes = ["grpo", "dapo", "rloo"]
seeds = 2
tasks = ["addition", "chain_sum"]
scales = ["nano", "micro"]

[budget]
"addition/nano" = 1e9
"addition/micro" = 4e9
"chain_sum/nano" = "20steps"
"chain_sum/micro" = 3e9

[task_params.addition]
difficulty = "easy"

[train]
lr = 1          # an int where a float is expected: hashed as 1.0

[eval]
every = 0.25

[overrides.dapo]
"recipe.objective.eps_high" = 0.3

[overrides.rloo.train]
lr = 5e-4
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    p = tmp_path_factory.mktemp("suites") / "grid.toml"
    p.write_text(TEXT)
    return suites.load(p)


def test_counts_tags_and_matched_cells(suite):
    cfgs = suite.expand()
    assert len(cfgs) == 4 * 3 * 2 == len({c.run_id for c in cfgs})
    assert {c.tags["suite"] for c in cfgs} == {"grid"}
    by_cell = {}
    for c in cfgs:
        assert c.tags["cell"] == f"{c.task}/{c.scale}"
        by_cell.setdefault(c.tags["cell"], []).append(c)
    assert sorted(by_cell) == ["addition/micro", "addition/nano", "chain_sum/micro", "chain_sum/nano"]
    for runs in by_cell.values():  # matched: one budget, one eval schedule, one warm start per cell
        assert len({(r.budget, r.eval, r.warmstart, tuple(sorted(r.task_params.items()))) for r in runs}) == 1
        assert len(runs) == 6
    assert by_cell["chain_sum/nano"][0].budget.kind == "steps" and by_cell["chain_sum/nano"][0].budget.value == 20
    assert by_cell["addition/nano"][0].task_params == {"difficulty": "easy"}
    assert by_cell["chain_sum/nano"][0].task_params == {}
    assert {c.seed for c in cfgs} == {0, 1}


def test_overrides_apply_to_their_recipe_only(suite):
    cfgs = suite.expand()
    for c in cfgs:
        name = c.recipe.name
        assert c.recipe == algorithms.get(name) or name == "dapo"
        assert c.train.lr == (5e-4 if name == "rloo" else 1.0)
    dapo = next(c for c in cfgs if c.recipe.name == "dapo")
    assert dapo.recipe.objective.eps_high == 0.3
    assert isinstance(next(c for c in cfgs if c.recipe.name == "grpo").train.lr, float)


def test_run_ids_survive_the_worker_round_trip(suite):
    for c in suite.expand() + suites.load("math-small").expand(suites.load("math-small").parse_only(["seed=0"])):
        back = RunConfig.from_dict(c.to_dict())
        assert back.run_id == c.run_id and back.tags == c.tags
        # execution settings are not hashed: workers may get any threads/device
        assert c.replace(threads=3, device="cuda").run_id == c.run_id


def test_only_filters(suite):
    only = suite.parse_only(["recipe=grpo,dapo", "seed=0", "scale=nano"])
    cfgs = suite.expand(only)
    assert len(cfgs) == 2 * 1 * 2
    assert {c.recipe.name for c in cfgs} == {"grpo", "dapo"} and {c.seed for c in cfgs} == {0}
    assert len(suite.expand(suite.parse_only(["cell=chain_sum/micro"]))) == 6
    with pytest.raises(ValueError, match="did you mean 'grpo'"):
        suite.parse_only(["recipe=grpoo"])
    with pytest.raises(ValueError, match="KEY=V1,V2"):
        suite.parse_only(["colour=red"])


def test_execution_order_interleaves_cells_and_finishes_seed_zero_first(suite):
    order = execution_order(suite, suite.expand())
    assert [c.tags["cell"] for c in order[:4]] == [c.name for c in suite.cells]
    seeds = [c.seed for c in order]
    assert seeds == sorted(seeds)


def test_plan_divides_cores(suite, monkeypatch):
    monkeypatch.setattr("bench.harness.runner.cpu_count", lambda: 16)
    p = make_plan(suite, n_pending=24)
    assert (p.workers, p.threads) == (16, 1)
    p = make_plan(suite, n_pending=24, workers=4)
    assert (p.workers, p.threads) == (4, 4)
    p = make_plan(suite, n_pending=3)
    assert p.workers == 3 and p.workers * p.threads <= 16
    p = make_plan(suite, n_pending=24, threads=4)
    assert (p.workers, p.threads) == (4, 4)


TWELVE = algorithms.names("family_2025")


@pytest.mark.parametrize("name, n_runs, n_cells", [("smoke", None, 1), ("math-small", 48, 2), ("grad-clip", 56, 2),
                                                   ("addition-format", 180, 2), ("reasoning", 276, 5), ("math-medium", 216, 6),
                                                   ("math-scales", 36, 3), ("claims", 190, 7)])
def test_shipped_suites_load(name, n_runs, n_cells):
    s = suites.load(name)
    cfgs = s.expand()
    assert len(s.cells) == n_cells and len(cfgs) == sum(len(s.cell_recipes(c)) * len(s.cell_seeds(c)) for c in s.cells)
    if n_runs:
        assert len(cfgs) == n_runs
    if name in ("addition-format", "reasoning", "math-medium"):  # the twelve (the 2026 family has its own suite)
        assert sorted(s.recipes) == sorted(TWELVE) and set(TWELVE) <= set(algorithms.names())
        assert len(s.seeds) == {"addition-format": 10, "reasoning": 5}.get(name, 3)
    if name == "math-small":  # the default: reasoning's addition and gcd cells for four recipes (at default
        # settings the same runs, but gcd's seed 6)
        reasoning = {c.run_id for c in suites.load("reasoning").expand()}
        defaults = suites.load(name, tuned=False).expand()
        shared = {c.run_id for c in defaults if c.seed < 6}
        assert set(s.recipes) < set(TWELVE) and shared <= reasoning and len(shared) == 4 * (5 + 6)
        assert {c.seed for c in defaults if c.tags["regime"] == "warmstarts3"} == set(range(7))
        assert s.report.accuracy == "eval/acc_formatted" and s.warmstart.calibrated
    if name == "grad-clip":  # math-small v2's gcd cell (the same runs, at its tuned lrs, written into the suite)
        # and that cell with the gradient-norm clip off, run for run; both are the published report's runs
        import polars as pl

        published = pl.read_csv(Path(__file__).resolve().parents[2] / "reports" / "grad-clip" / "runs.csv")
        clipped = {c.run_id for c in cfgs if c.tags["regime"] == "warmstarts3"}
        assert clipped == set(published.filter(pl.col("cell") == "gcd/nano/warmstarts3")["run_id"]) and len(clipped) == 4 * 7
        assert {c.run_id for c in cfgs} == set(published["run_id"])
        twins = {(c.recipe.name, c.seed, c.train.lr, c.warmstart.seed) for c in cfgs if c.tags["regime"] == "noclip"}
        assert twins == {(c.recipe.name, c.seed, c.train.lr, c.warmstart.seed) for c in cfgs
                         if c.tags["regime"] == "warmstarts3"}
        assert {c.train.grad_clip for c in cfgs if c.tags["regime"] == "noclip"} == {0}
    assert name in suites.names()
