"""Cross-task aggregates (bench/report/aggregate.py) against values computed by hand."""
import math

import numpy as np
import polars as pl
import pytest
from scipy.stats import mannwhitneyu, trim_mean

from bench.report import aggregate as agg


def frame(data: dict, col: str = "norm") -> pl.DataFrame:
    """{recipe: {task: [value per seed 0, 1, ...]}} -> task, recipe, seed, col."""
    rows = [{"task": t, "recipe": r, "seed": s, col: float(v)}
            for r, tasks in data.items() for t, vals in tasks.items() for s, v in enumerate(vals)]
    return pl.DataFrame(rows)


A = {"t1": [0.2, 0.9, 0.4, 0.1], "t2": [1.5, 0.7, 1.1, 3.0], "t3": [0.0, 0.3, 0.6, 0.5]}
POOLED = [v for vals in A.values() for v in vals]


def row(out: pl.DataFrame, recipe: str = "a") -> dict:
    return out.filter(pl.col("recipe") == recipe).row(0, named=True)


# ------------------------------------------------------------------------------------------- #
# Point estimates

def test_iqm_is_trim_mean_of_the_pooled_runs():
    r = row(agg.aggregate(frame({"a": A}), "iqm", n_boot=200))
    assert r["value"] == pytest.approx(trim_mean(POOLED, 0.25))
    # by hand: 12 values, 3 cut from each end: 0.3 0.4 0.5 0.6 0.7 0.9 remain
    assert r["value"] == pytest.approx((0.3 + 0.4 + 0.5 + 0.6 + 0.7 + 0.9) / 6)
    assert (r["stat"], r["n_tasks"], r["n_runs"], r["n_dropped"]) == ("iqm", 3, 12, 0)


def test_mean_and_median_are_over_per_task_means():
    means = [0.4, 1.575, 0.35]  # t1, t2, t3
    out = frame({"a": A})
    assert row(agg.aggregate(out, "mean", n_boot=200))["value"] == pytest.approx(sum(means) / 3)
    assert row(agg.aggregate(out, "median", n_boot=200))["value"] == pytest.approx(0.4)
    # with unequal seed counts the mean weights tasks equally, not runs
    ragged = frame({"a": {"t1": [0.0, 0.0, 0.0, 0.0], "t2": [1.0]}})
    assert row(agg.aggregate(ragged, "mean", n_boot=50))["value"] == pytest.approx(0.5)


def test_optimality_gap_clips_at_gamma():
    # min(x, 1): t1 0.2 0.9 0.4 0.1 (mean 0.4); t2 1 0.7 1 1 (0.925); t3 0.35
    r = row(agg.aggregate(frame({"a": A}), "optimality_gap", n_boot=200))
    assert r["value"] == pytest.approx(1 - (0.4 + 0.925 + 0.35) / 3)
    assert r["lo"] <= r["value"] <= r["hi"]
    everything_above = frame({"a": {"t1": [1.2, 3.0], "t2": [1.0, 5.0]}})
    assert row(agg.aggregate(everything_above, "optimality_gap", n_boot=50))["value"] == 0.0
    # γ = 2: min(x, 2) gives t1 1.2, 2 (mean 1.6) and t2 1, 2 (1.5): gap 2 − 1.55
    gap2 = row(agg.aggregate(everything_above, "optimality_gap", n_boot=50, gamma=2.0))["value"]
    assert gap2 == pytest.approx(0.45)


def test_unknown_stat_is_refused():
    with pytest.raises(ValueError, match="stat must be one of"):
        agg.aggregate(frame({"a": A}), "max")


def test_nan_scores_are_dropped_and_counted():
    data = {"a": {"t1": [0.2, float("nan"), 0.4], "t2": [float("nan"), float("nan")]}, "b": {"t1": [1.0, 2.0]}}
    out = agg.aggregate(frame(data), "mean", n_boot=100)
    a = row(out, "a")
    assert a["value"] == pytest.approx(0.3)
    assert (a["n_tasks"], a["n_runs"], a["n_dropped"]) == (1, 2, 3)
    assert out["recipe"].to_list() == ["a", "b"]
    none = agg.aggregate(frame({"a": {"t1": [float("nan")]}}), "iqm", n_boot=10)
    assert math.isnan(row(none)["value"]) and row(none)["n_runs"] == 0


def test_duplicate_runs_are_refused():
    d = pl.DataFrame({"task": ["t", "t"], "recipe": ["a", "a"], "seed": [0, 0], "norm": [1.0, 2.0]})
    with pytest.raises(ValueError, match="more than one row"):
        agg.aggregate(d)


# ------------------------------------------------------------------------------------------- #
# Normalisation

SCORES = pl.DataFrame({
    "task": ["add"] * 4 + ["gcd"] * 4,
    "recipe": ["grpo", "grpo", "dapo", "dapo"] * 2,
    "seed": [0, 1, 0, 1] * 2,
    "score": [0.5, 0.7, 0.8, 0.4, 0.3, 0.5, 0.2, float("nan")],
})
START = pl.DataFrame({"task": ["add", "gcd"], "start": [0.2, 0.1]})


def test_baseline_gain_makes_the_baseline_mean_one_and_the_start_zero():
    n = agg.normalise(SCORES, "grpo", START)
    assert n.columns == SCORES.columns + ["norm"]
    base = n.filter(pl.col("recipe") == "grpo").group_by("task").agg(pl.col("norm").mean()).sort("task")
    assert base["norm"].to_list() == pytest.approx([1.0, 1.0])
    # add: start 0.2, grpo mean 0.6 (gain 0.4): dapo 0.8 -> 1.5, 0.4 -> 0.5; gcd: gain 0.3, 0.2 -> 1/3
    dapo = n.filter(pl.col("recipe") == "dapo")["norm"].to_list()
    assert dapo[:3] == pytest.approx([1.5, 0.5, 1 / 3])
    assert math.isnan(dapo[3])  # NaN score stays, NaN norm
    at_start = agg.normalise(pl.DataFrame({"task": ["add", "add"], "recipe": ["grpo", "x"], "seed": [0, 0],
                                           "score": [0.6, 0.2]}), "grpo", START.head(1))
    assert at_start["norm"].to_list() == pytest.approx([1.0, 0.0])
    ratio = agg.normalise(SCORES, "grpo")  # no start: the ratio to the baseline's mean
    assert ratio["norm"][2] == pytest.approx(0.8 / 0.6)


def test_baseline_without_gain_is_an_error_naming_the_task():
    flat = SCORES.with_columns(pl.when((pl.col("task") == "gcd") & (pl.col("recipe") == "grpo"))
                               .then(0.1).otherwise(pl.col("score")).alias("score"))
    with pytest.raises(ValueError, match=r"no gain on task 'gcd'.*minmax.*drop the task"):
        agg.normalise(flat, "grpo", START)
    worse = START.with_columns(pl.Series("start", [0.2, 0.9]))  # the baseline lost ground on gcd
    with pytest.raises(ValueError, match="'gcd'"):
        agg.normalise(SCORES, "grpo", worse)
    with pytest.raises(ValueError, match="no row for task 'gcd'"):
        agg.normalise(SCORES, "grpo", START.head(1))
    with pytest.raises(ValueError, match="'missing' has no finite score on task 'add'"):
        agg.normalise(SCORES, "missing", START)


def test_minmax_spans_zero_to_one_per_task():
    n = agg.normalise(SCORES, "grpo", how="minmax")
    for t in ("add", "gcd"):
        v = n.filter(pl.col("task") == t)["norm"].drop_nans()
        assert v.min() == 0.0 and v.max() == 1.0
    assert n["norm"][0] == pytest.approx((0.5 - 0.4) / 0.4)
    const = pl.DataFrame({"task": ["k", "k"], "recipe": ["a", "b"], "seed": [0, 0], "score": [0.5, 0.5]})
    with pytest.raises(ValueError, match="'k'.*drop the task"):
        agg.normalise(const, "a", how="minmax")


# ------------------------------------------------------------------------------------------- #
# Stratified bootstrap

def test_stratified_bootstrap_keeps_each_task_and_its_run_count():
    # t1 never varies, t2 does: a constant task contributes a constant per-task mean, so the mean's
    # interval is (1 + t2's resampled mean) / 2; with t2 alone equal too the interval collapses.
    d = frame({"a": {"t1": [1.0, 1.0, 1.0], "t2": [0.0, 1.0, 2.0]}, "b": {"t1": [0.5] * 3, "t2": [0.7] * 5}})
    out = agg.aggregate(d, "mean", n_boot=500)
    a, b = row(out, "a"), row(out, "b")
    assert a["lo"] < a["value"] == 1.0 < a["hi"]
    assert a["lo"] >= 0.5 and a["hi"] <= 1.5  # t2's resampled mean stays within [0, 2]
    assert (b["value"], b["lo"], b["hi"]) == pytest.approx((0.6, 0.6, 0.6))
    # a task is never left out of a resample: with tasks at 0 and 10 every resampled IQM mixes both
    two = frame({"a": {"t1": [0.0, 0.0], "t2": [10.0, 10.0]}})
    r = row(agg.aggregate(two, "iqm", n_boot=300))
    assert (r["value"], r["lo"], r["hi"]) == (5.0, 5.0, 5.0)


@pytest.mark.parametrize("stat", agg.STATS)
def test_interval_contains_the_point_estimate_and_is_deterministic(stat):
    d = frame({"a": A, "b": {t: [v * 0.8 + 0.1 for v in vals] for t, vals in A.items()}})
    first = agg.aggregate(d, stat, n_boot=400, seed=3)
    np.random.default_rng(123).random(10)  # unrelated draws do not leak in
    assert agg.aggregate(d, stat, n_boot=400, seed=3).equals(first)
    for r in first.iter_rows(named=True):
        assert r["lo"] <= r["value"] <= r["hi"]
    # a recipe's row does not depend on the others in the frame
    alone = agg.aggregate(d.filter(pl.col("recipe") == "b"), stat, n_boot=400, seed=3)
    assert alone.row(0) == first.filter(pl.col("recipe") == "b").row(0)


def brute_force_interval(data: dict, stat: str, n_boot: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """The stratified bootstrap written out: one generator, tasks in name order, each task's seeds
    drawn (n_boot, n_t); then for each resample the statistic in plain Python."""
    rng = np.random.default_rng(seed)
    tasks = sorted(data)
    draws = {t: rng.integers(0, len(data[t]), size=(n_boot, len(data[t]))) for t in tasks}
    boots = []
    for b in range(n_boot):
        sample = {t: [data[t][i] for i in draws[t][b]] for t in tasks}
        task_means = [sum(v) / len(v) for v in sample.values()]
        if stat == "iqm":
            pooled = sorted(v for vals in sample.values() for v in vals)
            k = len(pooled) // 4
            kept = pooled[k:len(pooled) - k]
            boots.append(sum(kept) / len(kept))
        elif stat == "mean":
            boots.append(sum(task_means) / len(task_means))
        elif stat == "median":
            s = sorted(task_means)
            m = len(s) // 2
            boots.append(s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2)
        else:
            clipped = [sum(min(v, 1.0) for v in vals) / len(vals) for vals in sample.values()]
            boots.append(1.0 - sum(clipped) / len(clipped))
    q = (1 - level) / 2
    return float(np.quantile(boots, q)), float(np.quantile(boots, 1 - q))


@pytest.mark.parametrize("stat", agg.STATS)
def test_stratified_bootstrap_matches_a_brute_force_loop(stat):
    data = {"t2": [1.5, 0.7, 1.1], "t1": [0.2, 0.9, 0.4, 0.1, 0.6], "t3": [0.0, 0.3]}  # ragged, unsorted names
    r = row(agg.aggregate(frame({"a": data}), stat, n_boot=300, seed=7))
    lo, hi = brute_force_interval(data, stat, n_boot=300, seed=7)
    assert (r["lo"], r["hi"]) == pytest.approx((lo, hi), abs=1e-12)


def test_input_row_order_does_not_matter():
    d = frame({"a": A, "b": {"t1": [1.0, 2.0], "t2": [0.1, 0.5, 0.4]}})
    shuffled = d.sample(fraction=1.0, shuffle=True, seed=1)
    order = ["a", "b"]
    for stat in agg.STATS:
        x = agg.aggregate(d, stat, n_boot=100).sort("recipe")
        y = agg.aggregate(shuffled, stat, n_boot=100).sort("recipe")
        assert x.select("recipe", "value", "lo", "hi").equals(y.select("recipe", "value", "lo", "hi"))
    assert (agg.probability_of_improvement(d, *order, n_boot=100)
            == agg.probability_of_improvement(shuffled, *order, n_boot=100))


# ------------------------------------------------------------------------------------------- #
# Probability of improvement

def test_probability_of_improvement_extremes():
    lo_runs = {"t1": [0.1, 0.2, 0.3], "t2": [1.0, 1.1]}
    hi_runs = {"t1": [0.5, 0.6, 0.7], "t2": [2.0, 2.5, 3.0]}
    d = frame({"x": hi_runs, "y": lo_runs})
    assert agg.probability_of_improvement(d, "x", "y", n_boot=200) == (1.0, 1.0, 1.0)
    assert agg.probability_of_improvement(d, "y", "x", n_boot=200) == (0.0, 0.0, 0.0)
    same = frame({"x": lo_runs, "y": lo_runs})
    p, lo, hi = agg.probability_of_improvement(same, "x", "y", n_boot=200)
    assert p == 0.5 and lo <= 0.5 <= hi
    assert agg.paired_probability_of_improvement(same, "x", "y", n_boot=200) == (0.5, 0.5, 0.5)
    assert agg.paired_probability_of_improvement(d, "x", "y", n_boot=200) == (1.0, 1.0, 1.0)


def test_probability_of_improvement_is_the_mean_of_per_task_mann_whitney():
    x = {"t1": [0.61, 0.64, 0.7, 0.64], "t2": [0.3, 0.2, 0.5]}
    y = {"t1": [0.58, 0.64, 0.66], "t2": [0.4, 0.1, 0.35]}
    d = frame({"x": x, "y": y})
    expect = np.mean([mannwhitneyu(x[t], y[t]).statistic / (len(x[t]) * len(y[t])) for t in ("t1", "t2")])
    p, lo, hi = agg.probability_of_improvement(d, "x", "y", n_boot=500, seed=2)
    assert p == pytest.approx(expect)
    assert lo <= p <= hi
    # by hand, the resampling: x then y indices per task, tasks in name order, from one generator
    rng = np.random.default_rng(2)
    boots = np.zeros(500)
    for t in ("t1", "t2"):
        xi = rng.integers(0, len(x[t]), size=(500, len(x[t])))
        yi = rng.integers(0, len(y[t]), size=(500, len(y[t])))
        for b in range(500):
            xs, ys = np.asarray(x[t])[xi[b]], np.asarray(y[t])[yi[b]]
            boots[b] += sum((a > c) + 0.5 * (a == c) for a in xs for c in ys) / (xs.size * ys.size) / 2
    assert (lo, hi) == pytest.approx((np.quantile(boots, 0.025), np.quantile(boots, 0.975)))
    assert all(math.isnan(v) for v in agg.probability_of_improvement(d, "x", "missing"))


def test_paired_probability_counts_seeds():
    # t1: seed 0 x wins, seed 1 loses, seed 2 ties -> 1.5/3; t2: 2 wins of 2 -> 1. Mean 0.75.
    d = frame({"x": {"t1": [0.5, 0.2, 0.4], "t2": [1.0, 2.0]}, "y": {"t1": [0.3, 0.6, 0.4], "t2": [0.9, 1.9]}})
    p, lo, hi = agg.paired_probability_of_improvement(d, "x", "y", n_boot=300)
    assert p == pytest.approx(0.75)
    assert lo <= p <= hi
    # unpaired, every x against every y. t1: 0.5 beats 0.3 and 0.4, 0.4 beats 0.3 and ties 0.4,
    # 0.2 beats none: 3.5 of 9. t2: 1.0 > 0.9, 2.0 > 0.9, 2.0 > 1.9, 1.0 < 1.9: 3 of 4
    unpaired = agg.probability_of_improvement(d, "x", "y", n_boot=10)[0]
    assert unpaired == pytest.approx((3.5 / 9 + 0.75) / 2)
    # a seed missing on one side is left out of the pairs
    gap = d.filter(~((pl.col("recipe") == "y") & (pl.col("task") == "t1") & (pl.col("seed") == 1)))
    assert agg.paired_probability_of_improvement(gap, "x", "y", n_boot=10)[0] == pytest.approx((0.75 + 1) / 2)
    # the bootstrap resamples seed pairs within a task: by hand
    rng = np.random.default_rng(0)
    d1, d2 = np.array([0.2, -0.4, 0.0]), np.array([0.1, 0.1])
    i1, i2 = rng.integers(0, 3, size=(300, 3)), rng.integers(0, 2, size=(300, 2))
    win = lambda z: ((z > 0) + 0.5 * (z == 0)).mean(axis=-1)  # noqa: E731
    boots = (win(d1[i1]) + win(d2[i2])) / 2
    assert (lo, hi) == pytest.approx((np.quantile(boots, 0.025), np.quantile(boots, 0.975)))


# ------------------------------------------------------------------------------------------- #
# Performance profiles

def test_performance_profile_is_a_non_increasing_survival_curve():
    d = frame({"a": A, "b": {"t1": [0.5, 0.5], "t2": [2.0, 0.0]}})
    taus = np.linspace(-0.5, 3.5, 41)
    prof = agg.performance_profile(d, taus, n_boot=300)
    assert prof.columns == ["recipe", "tau", "value", "lo", "hi"]
    for recipe in ("a", "b"):
        p = prof.filter(pl.col("recipe") == recipe).sort("tau")
        v = p["value"].to_numpy()
        assert np.all(np.diff(v) <= 0)
        assert v[0] == 1.0 and v[-1] == 0.0  # τ below every score, above every score
        assert np.all(p["lo"].to_numpy() <= v + 1e-12) and np.all(v <= p["hi"].to_numpy() + 1e-12)
    # by hand: 6 of a's 12 runs are above 0.5 (0.9, 1.5, 0.7, 1.1, 3.0, 0.6)
    one = agg.performance_profile(d, [0.5], n_boot=50).filter(pl.col("recipe") == "a")
    assert one["value"][0] == pytest.approx(6 / 12)
    # b: every resample keeps t1's two 0.5s, so at τ = 0.4 at least half the runs are above
    b = agg.performance_profile(d, [0.4], n_boot=300).filter(pl.col("recipe") == "b")
    assert b["value"][0] == 0.75 and b["lo"][0] >= 0.5 and b["hi"][0] == 1.0
    assert agg.performance_profile(d, taus, n_boot=300).equals(prof)


# ------------------------------------------------------------------------------------------- #
# Verdicts in words

VERDICTS = pl.DataFrame({
    "task": ["addition", "gcd", "sort", "mult"] * 3,
    "recipe": ["dapo"] * 4 + ["ppo"] * 4 + ["drgrpo"] * 4,
    "verdict": ["worse"] * 4 + ["better", "worse", "undecided", "undecided"]
               + ["better", "undecided", "better", "undecided"],
})


def test_task_verdicts_sentences():
    v = agg.task_verdicts(VERDICTS, baseline="grpo")
    assert list(v) == ["dapo", "ppo", "drgrpo"]
    assert v["dapo"]["sentence"] == "dapo: worse than grpo on every task (4 of 4)"
    assert v["dapo"]["agree"] and not v["dapo"]["flips"]
    assert v["ppo"]["sentence"] == ("ppo: better than grpo on addition, worse on gcd, undecided on 2: "
                                    "the verdict flips between tasks")
    assert v["ppo"]["flips"] and not v["ppo"]["agree"]
    assert v["ppo"]["tasks"] == {"better": ["addition"], "worse": ["gcd"], "undecided": ["sort", "mult"]}
    assert v["drgrpo"]["sentence"] == "drgrpo: better than grpo on addition and sort (2 of 4), undecided on 2; worse on none"
    plain = agg.task_verdicts(VERDICTS.filter(pl.col("recipe") == "ppo"))
    assert plain["ppo"]["sentence"].startswith("ppo: better on addition, worse on gcd")


def test_task_verdicts_other_cases():
    d = pl.DataFrame({"task": ["a", "b", "c", "a", "a"], "recipe": ["x", "x", "x", "grpo", "y"],
                      "verdict": ["Equivalent", None, "equivalent", "baseline", "undecided"]})
    v = agg.task_verdicts(d, baseline="grpo")
    assert "grpo" not in v
    assert v["x"]["sentence"] == "x: equivalent to grpo on a and c (2 of 3), undecided on 1"
    assert v["y"]["sentence"] == "y: undecided on every task (1 of 1)"
    with pytest.raises(ValueError, match="more than one verdict"):
        agg.task_verdicts(pl.concat([d, d.head(1)]))


# ------------------------------------------------------------------------------------------- #
# Figure

def test_figure_has_two_panels_and_renders_deterministically():
    from bench.report import figures

    d = frame({"grpo": A, "dapo": {t: [v + 0.3 for v in vals] for t, vals in A.items()}})
    a = agg.aggregate(d, "iqm", n_boot=200)
    prof = agg.performance_profile(d, np.linspace(0, 3, 31), n_boot=200)
    colors = figures.palette(["grpo", "dapo"])
    fig = agg.figure(a, prof, ["grpo", "dapo", "ppo"], colors)
    assert len(fig.axes) == 2
    first = figures.png_bytes(fig)
    assert first.startswith(b"\x89PNG")
    assert figures.png_bytes(agg.figure(a, prof, ["grpo", "dapo"], colors)) == first
    gap = agg.aggregate(d, "optimality_gap", n_boot=50)
    assert figures.png_bytes(agg.figure(gap, prof, ["grpo", "dapo"], colors, reference=None)).startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="one statistic"):
        agg.figure(pl.concat([a, gap]), prof, ["grpo"], colors)
