"""Cross-task aggregates of normalised scores, in the style of rliable.

Agarwal et al. 2021, "Deep RL at the Edge of the Statistical Precipice" (NeurIPS;
https://github.com/google-research/rliable, `rliable/metrics.py` and `rliable/library.py`).
Input is a Polars frame with one row per run: task, recipe, seed, score (the run's primary metric
on that task). Every random draw comes from `numpy.random.default_rng(seed)` created inside the
call, so a result depends only on its inputs and the seed (as in bench/report/stats.py).

    normalise                 adds `norm`: the score on a scale shared by all tasks. "baseline_gain"
                              (prefer it): (score − start_t) / (baseline's mean − start_t), so 1 is
                              the baseline recipe's mean skill gain over the warm start and 0 no
                              gain; "minmax": (score − min_t) / (max_t − min_t) over all runs of the
                              task, in [0, 1], but its scale moves when a recipe joins or leaves
    aggregate                 per recipe a statistic over all (task, seed) normalised scores with a
                              95% stratified bootstrap interval (seeds resampled with replacement
                              within each task, tasks never resampled: rliable's StratifiedBootstrap,
                              percentile interval). Statistics as in rliable.metrics:
                                iqm             interquartile mean of the pooled runs × tasks scores
                                                (scipy.stats.trim_mean(·, 0.25) over everything)
                                mean, median    mean / median over tasks of the per-task mean score
                                optimality_gap  γ − mean of min(score, γ), γ = 1 (lower is better)
    probability_of_improvement
                              rliable's P(X > Y): the mean over tasks of P(X_t > Y_t) + ½ P(X_t = Y_t)
                              = U_t / (n_x n_y) (Mann–Whitney), X and Y resampled independently
    paired_probability_of_improvement
                              the same over seed pairs: per task the share of seeds where X beats Y
                              on that seed (ties ½); seeds resampled jointly, as pairs
    performance_profile       per recipe and τ the fraction of runs with norm > τ (rliable's run-score
                              distribution), with a stratified bootstrap band
    task_verdicts             plain-English summary of per-task verdicts (better/worse/...) per recipe
    figure                    interval estimates and performance profiles, two panels

Runs whose score (or normalised score) is NaN or null are dropped; `aggregate` reports how many
per recipe (n_dropped). Tasks may have different numbers of seeds: pooled statistics (iqm,
performance profile) then weight a task by its runs, per-task-mean statistics (mean, median,
optimality gap) weight tasks equally; rliable assumes a full runs × tasks matrix, where both agree.

The bootstrap holds the normalisation fixed (as rliable does): the baseline's mean and the start
are constants, so the intervals leave out the uncertainty in the baseline's own mean gain.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import polars as pl

from algorithms.errors import InputError
from bench.report import stats
from bench.report.stats import LEVEL, N_BOOT, SEED

STATS = ("iqm", "mean", "median", "optimality_gap")
HOW = ("baseline_gain", "minmax")
GAMMA = 1.0  # optimality gap threshold: the baseline's mean gain under baseline_gain normalisation
STAT_LABELS = {"iqm": "IQM", "mean": "mean", "median": "median", "optimality_gap": "optimality gap"}
VERDICT_ORDER = ("better", "worse", "equivalent", "undecided")


# ---------------------------------------------------------------------------------------------
# Input handling

def _check(frame: pl.DataFrame, col: str) -> None:
    missing = [c for c in ("task", "recipe", "seed", col) if c not in frame.columns]
    if missing:
        raise ValueError(f"scores need columns task, recipe, seed, {col}; missing: {', '.join(missing)}")
    dup = frame.group_by("task", "recipe", "seed").len().filter(pl.col("len") > 1)
    if dup.height:
        r = dup.sort("task", "recipe", "seed").row(0, named=True)
        raise ValueError(f"more than one row for task {r['task']!r}, recipe {r['recipe']!r}, seed {r['seed']}; "
                         "give one score per run")


def _values(frame: pl.DataFrame, col: str) -> np.ndarray:
    return frame[col].cast(pl.Float64).fill_null(math.nan).to_numpy()


def _runs(frame: pl.DataFrame, recipe: str, col: str) -> tuple[list[str], list[np.ndarray], int]:
    """One recipe's finite values per task: tasks sorted by name, runs in seed order, and the
    number of runs dropped for a missing value. Tasks where every run is missing are left out."""
    d = frame.filter(pl.col("recipe") == recipe).sort("task", "seed")
    v = _values(d, col)
    tasks = d["task"].to_list()
    names, groups, dropped = [], [], 0
    for t in sorted(set(tasks)):
        a = v[[i for i, x in enumerate(tasks) if x == t]]
        ok = np.isfinite(a)
        dropped += int((~ok).sum())
        if ok.any():
            names.append(t)
            groups.append(a[ok])
    return names, groups, dropped


def _by_seed(frame: pl.DataFrame, recipe: str, col: str) -> dict[str, dict]:
    """{task: {seed: value}} of one recipe's finite values."""
    out: dict[str, dict] = {}
    d = frame.filter(pl.col("recipe") == recipe)
    for t, s, v in zip(d["task"].to_list(), d["seed"].to_list(), _values(d, col)):
        if math.isfinite(v):
            out.setdefault(t, {})[s] = float(v)
    return out


def _recipes(frame: pl.DataFrame) -> list[str]:
    return frame["recipe"].unique(maintain_order=True).to_list()


def _resample(groups: list[np.ndarray], n_boot: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Stratified bootstrap: each task's runs resampled with replacement, keeping the task's run
    count; tasks in the order given, one (n_boot, n_t) index draw per task."""
    return [g[rng.integers(0, g.size, size=(n_boot, g.size))] for g in groups]


def _interval(boots: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    q = (1 - level) / 2
    return np.quantile(boots, q, axis=0), np.quantile(boots, 1 - q, axis=0)


# ---------------------------------------------------------------------------------------------
# Normalisation

def normalise(scores: pl.DataFrame, baseline: str, start: pl.DataFrame | None = None,
              how: str = "baseline_gain", col: str = "score") -> pl.DataFrame:
    """scores with a column `norm` added: each run's score on a scale shared across tasks.

    how="baseline_gain" (prefer it): norm = (score − start_t) / (mean score of `baseline` on t −
    start_t). 1 means "the baseline's mean skill gain on this task" and 0 "no gain over the start",
    whatever else is in the suite, so aggregates are comparable between reports. start is a frame
    with columns task, start: the task's value before RL (the warm start's held-out accuracy
    before any RL step, measured the way the score is); without it start_t = 0 and norm is the
    ratio to the baseline's mean. A task on which the baseline gained nothing (or lost) cannot be
    the unit: ValueError naming it.

    how="minmax": norm = (score − min_t) / (max_t − min_t), min and max over all runs of the task
    (every recipe), so norm lies in [0, 1]. It needs no start, but its scale depends on which
    recipes and seeds are in the suite (adding a bad recipe moves everyone up) and one outlier run
    sets it; use it when baseline_gain is undefined. `baseline` and `start` are not used.

    NaN or null scores stay in the frame with a NaN norm and are left out of the means and ranges.
    """
    _check(scores, col)
    if how not in HOW:
        raise ValueError(f"how must be one of {', '.join(HOW)}, not {how!r}")
    v = _values(scores, col)
    tasks = scores["task"].to_list()
    recipes = scores["recipe"].to_list()
    offset, scale = {}, {}
    starts: dict = {}
    if how == "baseline_gain" and start is not None:
        if not {"task", "start"} <= set(start.columns):
            raise ValueError("start needs columns task, start")
        if start["task"].n_unique() != start.height:
            raise ValueError("start has more than one row for a task")
        starts = dict(zip(start["task"].to_list(), _values(start, "start")))
    for t in dict.fromkeys(tasks):
        rows = [i for i, x in enumerate(tasks) if x == t]
        a = v[rows]
        a = a[np.isfinite(a)]
        if how == "minmax":
            lo, hi = (float(a.min()), float(a.max())) if a.size else (math.nan, math.nan)
            den = hi - lo
            if not (math.isfinite(den) and den > 0):
                raise InputError(f"normalise: on task {t!r} every run has the same score ({lo:.4g}) or none has "
                                 "one, so min–max scaling divides by zero; drop the task")
            offset[t], scale[t] = lo, den
            continue
        if starts:
            if t not in starts:
                raise InputError(f"normalise: start has no row for task {t!r}; give every task its start value")
            s0 = float(starts[t])
        else:
            s0 = 0.0
        b = v[[i for i in rows if recipes[i] == baseline]]
        b = b[np.isfinite(b)]
        if not b.size:
            raise InputError(f"normalise: the baseline {baseline!r} has no finite score on task {t!r}; "
                             "use how='minmax' or drop the task")
        den = float(b.mean()) - s0
        if not (math.isfinite(s0) and math.isfinite(den) and den > 1e-12 * max(1.0, abs(s0))):
            raise InputError(f"normalise: the baseline {baseline!r} made no gain on task {t!r} (mean {b.mean():.4g}, "
                             f"start {s0:.4g}), so its gain cannot be the unit; use how='minmax' or drop the task")
        offset[t], scale[t] = s0, den
    off = np.array([offset[t] for t in tasks], dtype=np.float64)
    den = np.array([scale[t] for t in tasks], dtype=np.float64)
    return scores.with_columns(pl.Series("norm", (v - off) / den, dtype=pl.Float64))


# ---------------------------------------------------------------------------------------------
# Aggregate statistics. Each takes a list of per-task arrays of shape (..., n_t) (the point
# estimate: (n_t,); the bootstrap: (n_boot, n_t)) and returns shape (...).

def _iqm(groups: list[np.ndarray]) -> np.ndarray:
    x = np.sort(np.concatenate(groups, axis=-1), axis=-1)
    k = int(0.25 * x.shape[-1])  # scipy.stats.trim_mean(x, 0.25, axis=None), as rliable
    return x[..., k:x.shape[-1] - k].mean(axis=-1)


def _task_means(groups: list[np.ndarray]) -> np.ndarray:
    return np.stack([g.mean(axis=-1) for g in groups], axis=-1)


def _stat(stat: str, gamma: float = GAMMA) -> Callable[[list[np.ndarray]], np.ndarray]:
    if stat == "iqm":
        return _iqm
    if stat == "mean":
        return lambda gs: _task_means(gs).mean(axis=-1)
    if stat == "median":
        return lambda gs: np.median(_task_means(gs), axis=-1)
    if stat == "optimality_gap":
        return lambda gs: gamma - _task_means([np.minimum(g, gamma) for g in gs]).mean(axis=-1)
    raise ValueError(f"stat must be one of {', '.join(STATS)}, not {stat!r}")


def aggregate(norm_scores: pl.DataFrame, stat: str = "iqm", n_boot: int = N_BOOT, seed: int = SEED,
              level: float = LEVEL, col: str = "norm", gamma: float = GAMMA) -> pl.DataFrame:
    """Per recipe, `stat` over its normalised scores with a stratified bootstrap interval.

    stat (rliable.metrics):
      iqm             the interquartile mean of all (task, seed) scores pooled: floor(n/4) cut from
                      each end (scipy.stats.trim_mean(x, 0.25)); robust to a diverged seed and
                      more precise than the median. rliable's recommended point estimate.
      mean            the mean over tasks of the per-task mean (under baseline_gain the baseline's
                      own mean is exactly 1).
      median          the median over tasks of the per-task mean (with few tasks: coarse).
      optimality_gap  γ − the mean over tasks of the per-task mean of min(score, γ): how far below
                      γ (default 1: the baseline's gain) the recipe falls, gains beyond γ not
                      counting. Lower is better.

    Interval: the `level` percentile interval of the statistic over n_boot stratified resamples:
    within each task the seeds are drawn with replacement (the task keeps its run count), tasks are
    never resampled (rliable's StratifiedBootstrap, task_bootstrap=False). Each recipe's resamples
    come from its own default_rng(seed), drawn task by task in task-name order, so a recipe's row
    does not depend on which other recipes are in the frame. With 3 seeds a task has only 10
    distinct resamples: read the interval as the spread of what was seen, not a guarantee.

    Columns: recipe, stat, value, lo, hi, n_tasks (tasks with a finite score), n_runs (finite
    scores used), n_dropped (NaN/null scores left out), level. Recipes in order of appearance.
    """
    _check(norm_scores, col)
    fn = _stat(stat, gamma)
    rows = []
    for recipe in _recipes(norm_scores):
        _, groups, dropped = _runs(norm_scores, recipe, col)
        value = lo = hi = math.nan
        if groups:
            value = float(fn(groups))
            boots = fn(_resample(groups, n_boot, np.random.default_rng(seed)))
            lo, hi = (float(q) for q in _interval(boots, level))
        rows.append({"recipe": recipe, "stat": stat, "value": value, "lo": lo, "hi": hi, "n_tasks": len(groups),
                     "n_runs": int(sum(g.size for g in groups)), "n_dropped": dropped, "level": level})
    schema = {"recipe": pl.String, "stat": pl.String, "value": pl.Float64, "lo": pl.Float64, "hi": pl.Float64,
              "n_tasks": pl.Int64, "n_runs": pl.Int64, "n_dropped": pl.Int64, "level": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


# ---------------------------------------------------------------------------------------------
# Probability of improvement

def _pi(xb: np.ndarray, yb: np.ndarray) -> np.ndarray:
    """U / (n_x n_y) of x over y along the last axis, for (..., n_x) and (..., n_y)."""
    d = xb[..., :, None] - yb[..., None, :]
    return ((d > 0).sum(axis=(-2, -1)) + 0.5 * (d == 0).sum(axis=(-2, -1))) / (xb.shape[-1] * yb.shape[-1])


def probability_of_improvement(norm_scores: pl.DataFrame, x: str, y: str, n_boot: int = N_BOOT, seed: int = SEED,
                               level: float = LEVEL, col: str = "norm") -> tuple[float, float, float]:
    """rliable's probability of improvement of recipe x over recipe y, with its interval: (p, lo, hi).

    p = mean over tasks of P(X_t > Y_t) + ½ P(X_t = Y_t), each the Mann–Whitney U of x's runs over
    y's on task t divided by n_x n_y (stats.prob_improvement): the chance that a random run of x
    beats a random run of y on a random task. 0.5 is no difference; it says how often x wins, not
    by how much. The interval resamples x's and y's seeds independently within each task
    (rliable's StratifiedIndependentBootstrap); draws from default_rng(seed), task by task in
    task-name order, x's then y's indices.

    Use it when the two recipes' seeds are not matched (different seed sets or counts), or to
    compare with published rliable numbers. Our seeds are paired (seed s gives every recipe the
    same prompts and warm start); then paired_probability_of_improvement uses that pairing.
    Only tasks where both recipes have a finite score count; (nan, nan, nan) if there are none.
    Any monotone normalisation per task leaves p unchanged, so raw scores work as well.
    """
    _check(norm_scores, col)
    tx, gx, _ = _runs(norm_scores, x, col)
    ty, gy, _ = _runs(norm_scores, y, col)
    ay, common = dict(zip(ty, gy)), [t for t in tx if t in set(ty)]
    if not common:
        return math.nan, math.nan, math.nan
    ax = dict(zip(tx, gx))
    p = float(np.mean([stats.prob_improvement(ax[t], ay[t]) for t in common]))
    rng = np.random.default_rng(seed)
    boots = np.zeros(n_boot)
    for t in common:
        xb = ax[t][rng.integers(0, ax[t].size, size=(n_boot, ax[t].size))]
        yb = ay[t][rng.integers(0, ay[t].size, size=(n_boot, ay[t].size))]
        boots += _pi(xb, yb)
    lo, hi = _interval(boots / len(common), level)
    return p, float(lo), float(hi)


def paired_probability_of_improvement(norm_scores: pl.DataFrame, x: str, y: str, n_boot: int = N_BOOT,
                                      seed: int = SEED, level: float = LEVEL,
                                      col: str = "norm") -> tuple[float, float, float]:
    """Probability that x beats y on the same seed: (p, lo, hi).

    p = mean over tasks of the share of seeds s (those where both have a finite score) with
    x_s > y_s, ties counting ½. The interval resamples seed pairs with replacement within each
    task (x and y keep their pairing), default_rng(seed), task by task in task-name order.

    When to use which: seeds here are paired by construction (seed s gives both recipes the same
    prompts, warm start and sampling seeds), so a seed that is easy for one recipe tends to be easy
    for the other; comparing within a seed removes that shared variation, and the paired share
    answers "on a given seed, how often does x come out ahead?". Prefer it when every compared
    seed ran for both recipes. Use probability_of_improvement (every run of x against every run
    of y) when seeds are unmatched or missing on one side, or to compare with rliable. The two are
    different quantities: with a strong seed effect the paired one is nearer 0 or 1 than the
    unpaired one for the same shift. With n seeds a task's share moves in steps of 1/n (3 seeds:
    0, ⅓, ⅔, 1 plus ties), so few seeds give a coarse value and a wide interval.
    Only tasks with at least one shared seed count; (nan, nan, nan) if there are none.
    """
    _check(norm_scores, col)
    bx, by = _by_seed(norm_scores, x, col), _by_seed(norm_scores, y, col)
    diffs = []
    for t in sorted(bx.keys() & by.keys()):
        keys = sorted(bx[t].keys() & by[t].keys())
        if keys:
            diffs.append(np.array([bx[t][k] - by[t][k] for k in keys]))
    if not diffs:
        return math.nan, math.nan, math.nan

    def win(d: np.ndarray) -> np.ndarray:
        return ((d > 0) + 0.5 * (d == 0)).mean(axis=-1)

    p = float(np.mean([win(d) for d in diffs]))
    boots = np.mean([win(b) for b in _resample(diffs, n_boot, np.random.default_rng(seed))], axis=0)
    lo, hi = _interval(boots, level)
    return p, float(lo), float(hi)


# ---------------------------------------------------------------------------------------------
# Performance profiles

def performance_profile(norm_scores: pl.DataFrame, taus, n_boot: int = N_BOOT, seed: int = SEED,
                        level: float = LEVEL, col: str = "norm") -> pl.DataFrame:
    """Per recipe and threshold τ, the fraction of its (task, seed) runs with norm > τ.

    rliable's run-score distribution (create_performance_profile, use_score_distribution=True): the
    share of all runs pooled over tasks whose normalised score exceeds τ; non-increasing in τ, 1
    below every score, 0 at or above the largest. One curve lying above another at every τ is
    stochastic dominance. Band: the `level` percentile interval over stratified resamples (seeds
    within each task, as aggregate; default_rng(seed) per recipe). Under baseline_gain, τ = 1 reads
    "the share of runs that matched the baseline's mean gain". Columns: recipe, tau, value, lo, hi.
    """
    _check(norm_scores, col)
    taus = np.asarray(taus, dtype=np.float64).ravel()
    frames = []
    for recipe in _recipes(norm_scores):
        _, groups, _ = _runs(norm_scores, recipe, col)
        value = lo = hi = np.full(taus.size, math.nan)
        if groups:
            pooled = np.concatenate(groups)
            value = (pooled[:, None] > taus[None, :]).mean(axis=0)
            boot = np.concatenate(_resample(groups, n_boot, np.random.default_rng(seed)), axis=-1)
            prof = np.stack([(boot > tau).mean(axis=-1) for tau in taus], axis=-1)
            lo, hi = _interval(prof, level)
        frames.append(pl.DataFrame({"recipe": [recipe] * taus.size, "tau": taus, "value": value, "lo": lo, "hi": hi},
                                   schema={"recipe": pl.String, "tau": pl.Float64, "value": pl.Float64,
                                           "lo": pl.Float64, "hi": pl.Float64}))
    if not frames:
        return pl.DataFrame(schema={"recipe": pl.String, "tau": pl.Float64, "value": pl.Float64,
                                    "lo": pl.Float64, "hi": pl.Float64})
    return pl.concat(frames)


# ---------------------------------------------------------------------------------------------
# Per-task verdicts in words

def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def task_verdicts(per_task: pl.DataFrame, baseline: str | None = None) -> dict[str, dict]:
    """Whether each recipe's per-task verdicts agree, in one sentence per recipe.

    per_task: columns task, recipe, verdict ("better", "worse", "equivalent", "undecided" or any
    other word, taken as is; null counts as "undecided"), one row per (task, recipe). `baseline`,
    if given, names what the verdicts compare against in the sentences, and its own rows are
    skipped. Returns {recipe: {"tasks": {verdict: [task, ...]}, "agree": every task has the same
    verdict, "flips": some task is better and another worse, "n_tasks": n, "sentence": str}},
    recipes in order of appearance, tasks in order of appearance. Sentences:

        dapo: worse than grpo on every task (4 of 4)
        ppo: better than grpo on addition, worse on gcd, undecided on 2: the verdict flips between tasks
        drgrpo: better than grpo on addition and gcd (2 of 4), undecided on 2; worse on none

    better, worse and equivalent name their tasks; undecided gives a count.
    """
    for c in ("task", "recipe", "verdict"):
        if c not in per_task.columns:
            raise ValueError(f"per_task needs columns task, recipe, verdict; missing: {c}")
    if per_task.group_by("task", "recipe").len().filter(pl.col("len") > 1).height:
        raise ValueError("per_task has more than one verdict for a (task, recipe)")
    vs = f" than {baseline}" if baseline else ""
    phrase = {"better": f"better{vs}", "worse": f"worse{vs}",
              "equivalent": f"equivalent to {baseline}" if baseline else "equivalent"}
    out: dict[str, dict] = {}
    for recipe in _recipes(per_task):
        if baseline is not None and recipe == baseline:
            continue
        d = per_task.filter(pl.col("recipe") == recipe)
        tasks: dict[str, list[str]] = {}
        for t, v in zip(d["task"].to_list(), d["verdict"].to_list()):
            v = "undecided" if v is None else str(v).strip().lower()
            tasks.setdefault(v, []).append(t)
        order = [v for v in VERDICT_ORDER if v in tasks] + sorted(v for v in tasks if v not in VERDICT_ORDER)
        tasks = {v: tasks[v] for v in order}
        n = d.height
        agree = len(tasks) == 1
        flips = "better" in tasks and "worse" in tasks
        parts = []
        for i, v in enumerate(order):
            word = phrase.get(v, v) if i == 0 else v
            if agree:
                parts.append(f"{word} on every task ({n} of {n})")
            elif v == "undecided":
                parts.append(f"{word} on {len(tasks[v])}")
            else:
                count = f" ({len(tasks[v])} of {n})" if len(tasks[v]) > 1 else ""
                parts.append(f"{word} on {_join(tasks[v])}{count}")
        sentence = f"{recipe}: " + ", ".join(parts)
        if flips:
            sentence += ": the verdict flips between tasks"
        elif not agree and ("better" in tasks or "worse" in tasks):
            sentence += f"; {'worse' if 'better' in tasks else 'better'} on none"
        out[recipe] = {"tasks": tasks, "agree": agree, "flips": flips, "n_tasks": n, "sentence": sentence}
    return out


# ---------------------------------------------------------------------------------------------
# Figure

def figure(agg: pl.DataFrame, profile: pl.DataFrame, recipes_order: list[str], colors: dict,
           reference: float | None = 1.0):
    """Two panels: (a) each recipe's aggregate (dot) and interval (bar), one row per recipe;
    (b) performance profiles, the fraction of runs above τ, with their bootstrap bands.

    agg: one stat's rows from `aggregate`; profile: from `performance_profile`. reference: where to
    draw the baseline's dashed line (1 under baseline_gain normalisation; None for minmax); panel
    (a) leaves it out for the optimality gap, whose baseline value is not fixed. Deterministic (no
    jitter, no resampling); returns the Figure, the caller turns it into bytes (figures.png_bytes).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    names = agg["stat"].unique().to_list()
    if len(names) > 1:
        raise ValueError(f"figure shows one statistic; agg has {', '.join(sorted(names))}")
    stat = names[0] if names else "iqm"
    level = float(agg["level"][0]) if "level" in agg.columns and agg.height else LEVEL
    rows = [r for r in recipes_order if r in set(agg["recipe"].to_list())]
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)  # as figures._theme
    fig, axes = plt.subplots(1, 2, figsize=(11.5, max(3.0, 0.38 * len(rows) + 1.6)), squeeze=False,
                             gridspec_kw={"width_ratios": [1.0, 1.3]})
    ax, bx = axes[0]
    by_recipe = {r["recipe"]: r for r in agg.iter_rows(named=True)}
    for i, recipe in enumerate(rows):
        r = by_recipe[recipe]
        v = r["value"]
        if v is None or not math.isfinite(v):
            continue
        lo = r["lo"] if r["lo"] is not None and math.isfinite(r["lo"]) else v
        hi = r["hi"] if r["hi"] is not None and math.isfinite(r["hi"]) else v
        ax.errorbar(v, i, xerr=[[v - lo], [hi - v]], fmt="o", color=colors[recipe], capsize=3)
    if reference is not None and stat != "optimality_gap":
        ax.axvline(reference, color="0.4", lw=0.8, ls="--")
    ax.set_yticks(range(len(rows)), [f"{r} ({by_recipe[r]['n_tasks']} tasks, {by_recipe[r]['n_runs']} runs)"
                                     for r in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    better = " (lower is better)" if stat == "optimality_gap" else ""
    ax.set_xlabel(f"{STAT_LABELS.get(stat, stat)} of normalised score{better}")
    ax.set_title(f"(a) {STAT_LABELS.get(stat, stat)}, {level:.0%} stratified bootstrap interval", fontsize=10)
    for recipe in [r for r in recipes_order if r in set(profile["recipe"].to_list())]:
        p = profile.filter(pl.col("recipe") == recipe).sort("tau")
        tau = p["tau"].to_numpy()
        bx.plot(tau, p["value"].to_numpy(), color=colors[recipe], label=recipe)
        bx.fill_between(tau, p["lo"].to_numpy(), p["hi"].to_numpy(), color=colors[recipe], alpha=0.2, lw=0)
    if reference is not None:
        bx.axvline(reference, color="0.4", lw=0.8, ls="--")
    bx.set_ylim(-0.02, 1.02)
    bx.set_xlabel("normalised score τ")
    bx.set_ylabel("fraction of runs with score > τ")
    bx.set_title("(b) performance profiles", fontsize=10)
    if bx.get_legend_handles_labels()[0]:
        bx.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.tight_layout()
    return fig
