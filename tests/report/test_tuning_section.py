"""The report's Tuning section (issue 23) and the Clipping section's clip-off check, on hand-made
records: trial runs shaped as `bench tune` writes them (tags cell, study, trial, params; one run per
tuning seed), and the suite's runs at its defaults and at its committed tuned settings.

The grid (final accuracy of each trial, mean over the tuning seeds 1000 and 1001, which score
value − 0.01 and value + 0.01):

    lr          1e-5   3e-5   1e-4   3e-4   1e-3
    grpo        0.50   0.59   0.60   0.585  (seed 1001 diverged: scores 0)
    dapo e=.28  0.30   0.40   0.60   0.45   0.20     fragile: only 1e-4 within 0.02
    dapo e=.2   0.50   0.595  0.59   0.50   0.30     (other eps_high: not in dapo's lr range)
    rloo        0.45   0.50   0.52   0.53   (seed 1001 pruned: incomplete)

so grpo's range is [3e-5, 3e-4] (1 decade), dapo's [1e-4, 1e-4] (0), rloo's [1e-4, 3e-4] at the
edge of its complete trials; dapo ran 10 trials and the others 5 (not matched).
"""
import math
from pathlib import Path

import polars as pl
import pytest

from bench import results
from bench import suite as suites
from bench.report import data as D
from bench.report import sections as S
from bench.report import tuning as TU
from bench.report.render import Heading, Para

BUDGET, STEPS, START = 1e9, 20, 0.4
LRS = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3]

SUITE = """
recipes = ["grpo", "dapo", "rloo"]
seeds = 2
tasks = ["addition"]
scales = ["nano"]
budget = 1e9
[eval]
every = 0.5
[report]
primary = "final"
[tune]
trials = 5
seeds = [1000, 1001]
sampler = "grid"
[tune.space.grpo]
"train.lr" = {choices = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3]}
"""

TUNED = """
[overrides.grpo]
"train.lr" = 0.0001
[overrides.dapo]
"recipe.objective.eps_high" = 0.28
"train.lr" = 0.0001
[overrides.rloo]
"train.lr" = 0.0003
"""

GRID = {
    ("grpo", None): [0.50, 0.59, 0.60, 0.585, 0.40],
    ("dapo", 0.28): [0.30, 0.40, 0.60, 0.45, 0.20],
    ("dapo", 0.2): [0.50, 0.595, 0.59, 0.50, 0.30],
    ("rloo", None): [0.45, 0.50, 0.52, 0.53, 0.60],
}
DEFAULTS = {"grpo": 0.50, "dapo": 0.55, "rloo": 0.45}  # final accuracy of the evaluation runs, mean over seeds
TUNED_MOVES = {"grpo": 0.60, "dapo": 0.58, "rloo": 0.52}  # grpo and dapo trade places
TUNED_HOLDS = {"grpo": 0.60, "dapo": 0.62, "rloo": 0.52}


def write(root, cfg, meta, final: float, status: str = "finished", steps_done: int = STEPS, norm: float = 2.0):
    """One record: 20 steps (pre-clip gradient norm `norm`, 2.0: a clip of 1.0 binds on every step) and
    evaluations at 0, 0.5 and 1 of the budget rising linearly from START to `final`."""
    steps = [{"step": i, "compute/flops": BUDGET * i / STEPS, "compute/gen_tokens": 100.0 * i, "kl/k1": 0.01,
              "kl/k3": 0.005, "policy/entropy": 0.5, "len/mean": 12.0, "policy/clip_frac_low": 0.0,
              "policy/clip_frac_high": 0.0, "grad/norm": norm} for i in range(1, steps_done + 1)]
    evals = [{"step": round(f * STEPS), "fraction": f, "compute/flops": BUDGET * f,
              "eval/acc_greedy": START + (final - START) * f, "eval/len_mean": 12.0, "eval/len_correct": 10.0,
              "eval/len_incorrect": 14.0, "eval/n": 100.0} for f in (0.0, 0.5, 1.0) if round(f * STEPS) <= steps_done]
    results.write_run(root, cfg.run_id, meta(cfg, status, steps_done), steps, evals)


def noisy(value: float, recipe: str, seed: int) -> float:
    """Seeds scatter around a recipe's mean differently for each recipe (paired differences vary)."""
    k = {"grpo": 1.0, "dapo": 1.5, "rloo": 2.0}[recipe]
    return value + (0.01 if seed % 2 else -0.01) * k


def write_trials(root, s, meta):
    cell = s.cells[0]
    for recipe in s.recipes:
        knobs = [k for (r, k) in GRID if r == recipe]
        trial = 0
        for eps in knobs:
            for lr, value in zip(LRS, GRID[(recipe, eps)]):
                params = {"train.lr": lr} | ({"recipe.objective.eps_high": eps} if eps is not None else {})
                for seed, off in ((1000, -0.01), (1001, 0.01)):
                    cfg = s.run_config(cell, recipe, seed).with_values(params)
                    cfg = cfg.replace(tags={"cell": cell.name, "study": f"{s.name}/{cell.name}/{recipe}", "trial": trial,
                                            "params": params}, threads=1)
                    if recipe == "grpo" and lr == 1e-3 and seed == 1001:
                        write(root, cfg, meta, 0.2, "diverged", 12)
                    elif recipe == "rloo" and lr == 1e-3 and seed == 1001:
                        write(root, cfg, meta, 0.5, "pruned", 10)
                    else:
                        write(root, cfg, meta, value + off)
                trial += 1


def write_suite_runs(root, s, meta, finals: dict):
    for cfg in s.expand():
        write(root, cfg, meta, noisy(finals[cfg.recipe.name], cfg.recipe.name, cfg.seed))


@pytest.fixture(scope="module")
def tuned_dir(tmp_path_factory):
    """A suite file with its committed tuned settings beside it (suites/tuned/NAME.toml)."""
    d = tmp_path_factory.mktemp("tuning")
    (d / "tuned").mkdir()
    (d / "tune-test.toml").write_text(SUITE)
    (d / "tuned" / "tune-test.toml").write_text(TUNED)
    return d


@pytest.fixture(scope="module")
def results_dir(tuned_dir, fake_runs):
    """results_dir(name, tuned finals, defaults=True): a results directory (written once per name)
    holding the trials, the runs at tuned settings and, unless defaults is false, those at defaults."""
    def make(name: str, tuned_finals: dict, defaults: bool = True):
        root = tuned_dir / name
        if not root.exists():
            s, plain = suites.load(tuned_dir / "tune-test.toml"), suites.load(tuned_dir / "tune-test.toml", tuned=False)
            write_trials(root, s, fake_runs.meta)
            write_suite_runs(root, s, fake_runs.meta, tuned_finals)
            if defaults:
                write_suite_runs(root, plain, fake_runs.meta, DEFAULTS)
        return root
    return make


def context(s, root):
    ctx = S.Context(s, root, D.load(s, root))
    S.build_tables(ctx)
    return ctx


def texts(blocks) -> list[str]:
    return [b.text for b in blocks if isinstance(b, Para)]


@pytest.fixture(scope="module")
def moved(tuned_dir, results_dir):
    """(context, Tuning blocks) of the results whose ranking changes at tuned settings."""
    s = suites.load(tuned_dir / "tune-test.toml")
    assert s.tuned_from is not None
    ctx = context(s, results_dir("moved", TUNED_MOVES))
    return ctx, S.blocks("tuning", ctx)


def test_tuning_csv_has_one_row_per_trial_run_and_a_column_per_parameter(moved):
    ctx, blocks = moved
    t = ctx.tables["tuning"]
    assert t.columns == ["cell", "recipe", "trial", "seed", "recipe.objective.eps_high", "train.lr", "status", "final",
                         "acc", "run_id"]
    assert t.group_by("recipe", maintain_order=True).len().rows() == [("grpo", 10), ("dapo", 20), ("rloo", 10)]
    assert t["seed"].unique().sort().to_list() == [1000, 1001]
    g = t.filter(pl.col("recipe") == "grpo")
    assert g["recipe.objective.eps_high"].null_count() == 10 and g["train.lr"].unique().sort().to_list() == LRS
    d = t.filter((pl.col("recipe") == "dapo") & (pl.col("trial") == 6) & (pl.col("seed") == 1001)).row(0, named=True)
    assert (d["train.lr"], d["recipe.objective.eps_high"], d["status"]) == (3e-5, 0.2, "finished")
    assert d["final"] == pytest.approx(0.605) and d["acc"] == pytest.approx(0.605)
    div = t.filter(pl.col("status") == "diverged").row(0, named=True)
    assert (div["recipe"], div["train.lr"], div["seed"], div["final"], div["acc"]) == ("grpo", 1e-3, 1001, 0.0, None)
    pruned = t.filter(pl.col("status") == "pruned").row(0, named=True)
    assert (pruned["recipe"], pruned["final"], pruned["acc"]) == ("rloo", None, None)
    protocol = texts(blocks)[0]
    assert "grpo 10, dapo 20, rloo 10 rows" in protocol
    assert "Tuning seeds: none of them is among the evaluation seeds (0, 1)" in protocol


def test_chosen_settings_and_cost_say_tuning_was_not_matched(moved):
    ctx, blocks = moved
    cost = ctx.tables["tuning_cost"]
    assert cost.select("recipe", "trials", "complete", "runs", "pruned", "diverged").rows() == [
        ("grpo", 5, 5, 10, 0, 1), ("dapo", 10, 10, 20, 0, 0), ("rloo", 5, 4, 10, 1, 0)]
    assert cost["chosen_from"].to_list() == ["tuned settings"] * 3
    assert cost["chosen_trial"].to_list() == [2, 2, 3]
    assert cost["chosen_value"].to_list() == pytest.approx([0.60, 0.60, 0.53])
    assert cost["chosen"][1] == '{"recipe.objective.eps_high": 0.28, "train.lr": 0.0001}'
    assert cost["flops"].to_list() == pytest.approx([BUDGET * (9 + 12 / 20), BUDGET * 20, BUDGET * (9 + 10 / 20)])
    text = next(t for t in texts(blocks) if t.startswith("Tuning cost"))
    assert text.startswith("Tuning cost: 20 trials in all (40 runs), ")
    assert "**Not matched**: addition/nano: trials differ (grpo 5, dapo 10, rloo 5)." in text


def test_matched_when_every_recipe_had_the_same_trials_and_budget():
    cost = pl.DataFrame({"cell": ["a/b", "a/b", "c/d"], "recipe": ["grpo", "dapo", "grpo"], "trials": [5, 5, 3],
                         "runs": [10, 10, 3], "budget": ["1e+09flops"] * 2 + ["2e+09flops"]})
    assert TU.matched(cost) == []
    assert TU.matched(cost.with_columns(pl.Series("runs", [10, 5, 3]))) == [
        "a/b: runs per trial differ (grpo 2, dapo 1)"]


def test_lr_robustness_width_on_a_known_grid(moved):
    ctx, blocks = moved
    rob = ctx.tables["lr_robustness"]
    assert rob.select("recipe", "chosen_lr", "lr_lo", "lr_hi", "lrs_within", "lrs_tested", "edge", "fragile").rows() == [
        ("grpo", 1e-4, 3e-5, 3e-4, 3, 5, "", False),
        ("dapo", 1e-4, 1e-4, 1e-4, 1, 5, "", True),
        ("rloo", 3e-4, 1e-4, 3e-4, 2, 4, "high", False)]
    assert rob["decades"].to_list() == pytest.approx([1.0, 0.0, math.log10(3)])
    assert rob["margin"].to_list() == [0.02] * 3
    assert rob["others"][1] == '{"recipe.objective.eps_high": 0.28}'
    text = next(t for t in texts(blocks) if t.startswith("lr robustness"))
    assert "(margin 0.02, the suite's `[report] margin`)" in text
    assert "Fragile (of the learning rates tested, only the chosen one is within 0.02): dapo." in text
    assert "The range of rloo reaches the end of the learning rates tested, so it may be wider." in text


def test_the_sensitivity_figure_is_drawn_with_its_caption(moved):
    ctx, blocks = moved
    fig = next(b for b in blocks if getattr(b, "name", None) == "tuning_sensitivity.png")
    assert ctx.figs["tuning_sensitivity.png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert "averaged over the tuning seeds (1000, 1001); bars from the lowest to the highest of the 2 seeds" in fig.caption
    assert "final held-out greedy accuracy (`eval/acc_greedy`)" in fig.caption
    assert fig.caption.endswith("1 incomplete trial (pruned or failed runs) left out.")


def test_defaults_beside_tuned_say_which_recipes_move(moved):
    ctx, blocks = moved
    cmp = ctx.tables["tuned_vs_default"]
    assert cmp.select("recipe", "tuned", "n_default", "n_tuned", "rank_default", "rank_tuned").rows() == [
        ("grpo", True, 2, 2, 2, 1), ("dapo", True, 2, 2, 1, 2), ("rloo", True, 2, 2, 3, 3)]
    assert cmp["primary_mean_default"].to_list() == pytest.approx([0.50, 0.55, 0.45])
    assert cmp["delta"].to_list() == pytest.approx([0.10, 0.03, 0.07])
    assert cmp["diff_tuned"].to_list()[1] == pytest.approx(-0.02)
    assert any(t.startswith("addition/nano: the ranking by final changes from defaults to tuned settings: grpo moves "
                            "from 2 to 1, dapo moves from 1 to 2 (defaults: dapo, grpo, rloo; tuned: grpo, dapo, "
                            "rloo).") for t in texts(blocks))


def test_defaults_beside_tuned_say_when_the_ranking_is_unchanged(tuned_dir, results_dir):
    s = suites.load(tuned_dir / "tune-test.toml")
    ctx = context(s, results_dir("holds", TUNED_HOLDS))
    said = [t for t in texts(S.blocks("tuning", ctx)) if t.startswith("addition/nano: the ranking")]
    assert len(said) == 1
    assert said[0].startswith("addition/nano: the ranking by final is unchanged from defaults to tuned settings: "
                              "dapo, grpo, rloo.")
    assert ctx.tables["tuned_vs_default"]["rank_tuned"].to_list() == [2, 1, 3]


def test_missing_default_runs_are_said_plainly(tuned_dir, results_dir):
    s = suites.load(tuned_dir / "tune-test.toml")
    ctx = context(s, results_dir("no-defaults", TUNED_MOVES, defaults=False))
    said = texts(S.blocks("tuning", ctx))
    assert said[-1].startswith("The 6 runs of the suite at its defaults are missing from this results directory, so the "
                               "leaderboards at defaults and at tuned settings cannot be compared here")
    assert "tuned_vs_default" not in ctx.tables and "tuning" in ctx.tables


def test_results_tuned_file_pairs_the_defaults_with_the_tuned_runs(tuned_dir, results_dir):
    """Without a committed tuned file, `bench tune`'s ROOT/tuned/NAME.toml gives the tuned side."""
    root = results_dir("moved", TUNED_MOVES)
    plain = suites.load(tuned_dir / "tune-test.toml", tuned=False)
    (root / "tuned").mkdir(exist_ok=True)
    (root / "tuned" / "tune-test.toml").write_text(TUNED)
    ctx = context(plain, root)
    S.blocks("tuning", ctx)
    assert ctx.tables["tuned_vs_default"].select("recipe", "rank_default", "rank_tuned").rows() == [
        ("grpo", 2, 1), ("dapo", 1, 2), ("rloo", 3, 3)]


def test_a_suite_without_trials_keeps_its_paragraph(tiny):
    s, root, _ = tiny
    ctx = context(s, root)
    assert S.blocks("tuning", ctx) == [Heading(2, "Tuning"), Para(
        "No `bench tune` trials are recorded for this suite: every recipe ran at the suite's own settings (its "
        "defaults and `[overrides]`). A comparison at tuned settings needs `bench tune tiny --all` (the same trials "
        "and per-trial budget for every recipe), then `bench suite tiny --tuned`.")]
    assert not {"tuning", "tuning_cost", "lr_robustness", "tuned_vs_default"} & set(ctx.tables)


def test_a_search_over_ranges_measures_no_width_and_draws_unjoined_points(tiny):
    """TPE over continuous knobs: no two trials share the other knobs' values, so the chosen trial's
    lr is the only one tested there (not fragile: nothing was measured); the figure does not join
    points of a dozen different settings."""
    s = tiny[0]
    rows = [{"study": "x/addition/nano/grpo", "cell": "addition/nano", "recipe": "grpo", "trial": i,
             "params": f'{{"recipe.objective.eps_high": {0.2 + i / 100}, "train.lr": {1e-5 * (i + 1)}}}',
             "complete": True, "value": 0.5 + i / 100, "acc": 0.5, "lr": 1e-5 * (i + 1), "lo": 0.5, "hi": 0.7}
            for i in range(12)]
    pt = pl.DataFrame(rows)
    picked = TU.chosen_trials(pt, {"x/addition/nano/grpo": None})
    assert picked["x/addition/nano/grpo"]["trial"] == 11 and picked["x/addition/nano/grpo"]["from"] == "best trial"
    rob = TU.lr_robustness(pt, picked, 0.02, s)
    assert rob.select("lrs_tested", "lrs_within", "decades", "edge", "fragile").rows() == [(1, 1, 0.0, "", False)]
    from bench.report import figures as F

    points = pt.with_columns(pl.lit("grpo").alias("panel"), pl.col("params").alias("group"),
                             (pl.col("trial") == 11).alias("chosen"))
    fig = F.tuning_sensitivity(points, ["grpo"], F.palette(["grpo"]), "final")
    ax = fig.axes[0]
    assert ax.lines[0].get_linestyle() == "None" and len(ax.lines[0].get_xdata()) == 12  # one series, unjoined
    assert ax.lines[-1].get_marker() == "*" and list(ax.lines[-1].get_xdata()) == pytest.approx([1.2e-4])  # the chosen trial
    assert ax.get_legend() is None
    assert F.png_bytes(fig)[:4] == b"\x89PNG"


def test_rank_compare_names_moves_and_swaps():
    rc = TU.rank_compare({"a": 0.5, "b": 0.6, "c": 0.4, "d": 0.1}, {"a": 0.7, "b": 0.6, "c": 0.4, "e": 0.9}, True,
                         ["a", "b", "c", "d", "e"])
    assert rc["common"] == ["a", "b", "c"] and rc["a"] == ["b", "a", "c"] and rc["b"] == ["a", "b", "c"]
    assert rc["moves"] == [("a", 2, 1), ("b", 1, 2)] and rc["swaps"] == [("a", "b")]
    assert rc["only_a"] == ["d"] and rc["only_b"] == ["e"]
    assert TU.rank_compare({"a": 0.1, "b": 0.2}, {"a": 0.3, "b": 0.2}, False, ["a", "b"])["swaps"] == [("a", "b")]


# ------------------------------------------------------------------------------------ clipping off
CLIP_SUITE = """
recipes = ["grpo", "dapo", "rloo"]
seeds = 2
tasks = ["addition"]
scales = ["nano"]
budget = 1e9
[eval]
every = 0.5
[report]
primary = "final"
{regimes}
"""


def clip_suite(d, name: str, regimes: str):
    path = d / f"{name}.toml"
    path.write_text(CLIP_SUITE.format(regimes=regimes))
    return suites.load(path)


def test_clipped_twin_is_the_same_regime_but_for_the_clip(tmp_path):
    s = clip_suite(tmp_path, "exact", "[regimes.stale]\nlag = 1\n[regimes.clip]\n[regimes.noclip]\ngrad_clip = 0\n"
                                      "recipes = [\"grpo\", \"dapo\"]")
    off = TU.clip_off_cells(s)
    assert [c.name for c in off] == ["addition/nano/noclip"]
    twin, exact = TU.clipped_twin(s, off[0])
    assert (twin.name, exact) == ("addition/nano/clip", True)


def test_clipped_twin_falls_back_to_the_cell_sharing_most_recipes(tmp_path):
    s = clip_suite(tmp_path, "fallback", "[regimes.big]\nepochs = 2\nrecipes = [\"grpo\", \"rloo\"]\n[regimes.stale]\n"
                                         "lag = 1\n[regimes.noclip]\ngrad_clip = 0\nrecipes = [\"grpo\", \"dapo\"]")
    twin, exact = TU.clipped_twin(s, TU.clip_off_cells(s)[0])
    assert (twin.name, exact) == ("addition/nano/stale", False)
    none = clip_suite(tmp_path, "alone", "[regimes.noclip]\ngrad_clip = 0")
    assert TU.clipped_twin(none, none.cells[0]) == (None, False)


CLIP_FINALS = {"clip": {"grpo": 0.5, "dapo": 0.6, "rloo": 0.4}, "holds": {"grpo": 0.45, "dapo": 0.55, "rloo": 0.35},
               "swaps": {"grpo": 0.55, "dapo": 0.5, "rloo": 0.35}}


@pytest.mark.parametrize("case", ["holds", "swaps"])
def test_clipping_off_checks_the_ranking_against_the_clipped_twin(tmp_path, fake_runs, case):
    s = clip_suite(tmp_path, "clipoff", "[regimes.clip]\n[regimes.noclip]\ngrad_clip = 0")
    root = tmp_path / "results"
    for cfg in s.expand():
        regime = cfg.tags["regime"]
        finals = CLIP_FINALS["clip" if regime == "clip" else case]
        write(root, cfg, fake_runs.meta, noisy(finals[cfg.recipe.name], cfg.recipe.name, cfg.seed))
    said = texts(S.blocks("clipping", context(s, root)))
    assert any(t.endswith("optimiser in effect; whether the ranking holds with clipping off is checked below.")
               for t in said)
    check = next(t for t in said if t.startswith("Clipping off"))
    head = ("Clipping off: addition/nano/noclip runs with train.grad_clip = 0; its clipped twin is addition/nano/clip "
            "(train.grad_clip = 1; the same regime but for the clip).")
    if case == "holds":
        assert check == head + " The ranking by final of the 3 recipes both ran holds with clipping off: dapo, grpo, rloo."
    else:
        assert check.startswith(head + " The ranking by final does not hold with clipping off: with the clip dapo, "
                                "grpo, rloo; without grpo, dapo, rloo (grpo and dapo swap).")

    # the same runs read by a suite without the clip-off cell: the old sentence, no check
    plain = clip_suite(tmp_path, "cliponly", "[regimes.clip]")
    said = texts(S.blocks("clipping", context(plain, root)))
    assert any(t.endswith("optimiser in effect; whether a ranking holds with clipping off is not tested here.")
               for t in said)
    assert not any(t.startswith("Clipping off") for t in said)


def test_a_cell_with_the_clip_off_is_not_counted_as_binding(tmp_path, fake_runs):
    """A clip-off cell has no binding share (NaN, which polars sorts above every number): where the
    clip binds on no step of the clipped cell, the Clipping section says so, not 'most steps'."""
    s = clip_suite(tmp_path, "clipoff", "[regimes.clip]\n[regimes.noclip]\ngrad_clip = 0")
    root = tmp_path / "results"
    for cfg in s.expand():
        write(root, cfg, fake_runs.meta, noisy(CLIP_FINALS["clip"][cfg.recipe.name], cfg.recipe.name, cfg.seed), norm=0.5)
    said = texts(S.blocks("clipping", context(s, root)))
    assert any(t.endswith("It binds on at most half the steps of every recipe.") for t in said), said
    assert not any("binds on most steps" in t for t in said)


def test_lr_robustness_names_each_recipes_cell_when_several_cells_were_tuned():
    """math-small tunes addition and gcd on their own: a recipe at a grid's edge in both cells is named
    once per cell, with the cell (it read 'grpo, dr_grpo, dapo, gspo, grpo, dapo' before)."""
    root = Path(__file__).resolve().parents[2] / "reports" / "math-small" / "data"
    s = suites.load("math-small")
    text = next(t for t in texts(S.blocks("tuning", context(s, root))) if t.startswith("lr robustness"))
    edge = text[text.index("The range of "):]
    assert "grpo (addition/nano/on_policy)" in edge and "grpo (gcd/nano/warmstarts3)" in edge
    assert "dr_grpo (gcd/nano/warmstarts3)" not in edge  # its range [1e-4, 2e-4] is inside the grid
