"""The report's shared tables: `Data` in, one Polars frame per table out, rows in a fixed order.
Here are the frames several sections read (per-run metrics, the leaderboard, step summaries), the
claims' contrasts (the claims and sanity sections, and `bench reproduce --verdicts`) and the
model-scale table (kept apart for its length); a table that one section alone reads is built in
that section's module (bench/report/sections/).

Statistics are over the finished seeds of a (cell, recipe); diverged, failed and missing runs are
never averaged in (a diverged run's last accuracy is not a result at the budget) and are listed by
the problems section instead. Comparisons are with the suite's `[report] baseline` (default: grpo when the
suite has it, else its first recipe), paired by seed, on the `[report] primary` metric.
"""
from __future__ import annotations

import math

import numpy as np
import polars as pl

from algorithms import metrics as metric_registry
from bench.report import stats
from bench.report.data import Data, finished, run_config
from bench.suite import Suite

def baseline(suite: Suite) -> str:
    if suite.report.baseline is not None:
        return suite.report.baseline
    return "grpo" if "grpo" in suite.recipes else suite.recipes[0]


METRICS = ("final", "auc", "plateau")  # per-run accuracy metrics; the primary may add compute_to
PLATEAU_POINTS = 2  # plateau: at least this many evaluations, so that it is never final under another name


def compute_to(fraction, acc, level: float) -> float:
    """The fraction of the budget at which accuracy first reaches `level`, linearly interpolated
    between evaluation points; 1.0 (the whole budget, censored) when it never does within it."""
    for i in range(len(acc)):
        if acc[i] >= level:
            if i == 0 or acc[i] == acc[i - 1]:
                return min(1.0, float(fraction[i]))
            t = (level - acc[i - 1]) / (acc[i] - acc[i - 1])
            return min(1.0, float(fraction[i - 1] + t * (fraction[i] - fraction[i - 1])))
    return 1.0


def plateau(spent, acc, start: float) -> tuple[float, float]:
    """(plateau accuracy, where its window starts): the mean accuracy of the evaluations at spent
    fractions >= start, or of the last PLATEAU_POINTS evaluations when fewer lie there (log-spaced
    schedules put only the final evaluation past 0.75, and a mean of one point is `final`).
    spent, acc: one run's evaluations in order of compute."""
    spent, acc = np.asarray(spent, dtype=np.float64), np.asarray(acc, dtype=np.float64)
    if not spent.size:
        return math.nan, math.nan
    first = min(int(np.searchsorted(spent, start - 1e-12)), max(0, spent.size - PLATEAU_POINTS))
    return stats.mean(acc[first:]), float(spent[first])


def per_run(suite: Suite, data: Data) -> pl.DataFrame:
    """One row per finished run: its accuracy metrics over the held-out evaluations, against the
    compute each evaluation actually spent (`spent`, the ledger's fraction of the budget), one point
    per optimizer step.

    final: accuracy at the end of the budget. auc: the mean accuracy over the budget: the trapezoid
    area under accuracy against the spent fraction from 0 to 1 (the last evaluation, which the
    final step carries past the budget, interpolated at 1), higher for earlier gains. plateau: the
    mean accuracy of the evaluations at spent fractions >= [report] plateau_from, at least the last
    PLATEAU_POINTS of them (`plateau`); plateau_start: where that window begins. evals: the run's
    distinct evaluation steps (the warm start's at step 0 included). primary: the suite's primary
    metric (one of those, or compute_to:X).
    """
    rs = suite.report
    rows = []
    for (cell, rank, recipe, seed, rid), g in finished(data.evals).group_by(
            "cell", "rank", "recipe", "seed", "run_id", maintain_order=True):
        g = g.sort("spent")
        frac, acc = g["spent"].to_numpy(), g["acc"].to_numpy()
        level, start = plateau(frac, acc, rs.plateau_from)
        row = {"cell": cell, "rank": rank, "recipe": recipe, "seed": seed, "run_id": rid, "evals": g.height,
               "final": float(acc[-1]), "auc": stats.curve_mean_to(frac, acc, 1.0), "plateau": level,
               "plateau_start": start}
        row["primary"] = (compute_to(frac, acc, rs.threshold) if rs.threshold is not None
                          else row[rs.primary])
        rows.append(row)
    return pl.DataFrame(rows, schema={"cell": pl.String, "rank": pl.Int64, "recipe": pl.String, "seed": pl.Int64,
                                      "run_id": pl.String, "evals": pl.Int64, "final": pl.Float64,
                                      "auc": pl.Float64, "plateau": pl.Float64, "plateau_start": pl.Float64,
                                      "primary": pl.Float64})


def by_seed(runs: pl.DataFrame, cell: str, recipe: str, col: str) -> dict[int, float]:
    r = runs.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
    return dict(zip(r["seed"].to_list(), r[col].to_list()))


def leaderboard(suite: Suite, data: Data) -> pl.DataFrame:
    """Per cell and recipe: the primary metric with its bootstrap interval over seeds, its paired
    comparison with the baseline, the power of that comparison, and the secondary metrics.

    Paired by seed (seed s gives every recipe the same prompts and sampling seeds): p_improve is
    the share of shared seeds on which the recipe's primary metric beat the baseline's (ties ½) with
    its 95% Wilson score interval over those seeds; diff is the
    mean over shared seeds of recipe − baseline with its 95% paired t interval; p the two-sided
    paired t-test, p_holm its Holm adjustment over the cell's comparisons with the baseline;
    mdd the smallest difference that test detects with 80% power at α = 0.05 given the observed
    spread of the paired differences; seeds_for_margin the seeds that would detect a difference of
    [report] margin; verdict better / worse when p_holm < 0.05, equivalent when the 90% paired
    interval lies inside ±margin (TOST at α = 0.05), else undecided; mark `*` when p_holm < 0.05.
    """
    runs = per_run(suite, data)
    base = baseline(suite)
    rs = suite.report
    counts = data.runs.group_by("cell", "recipe").agg(
        pl.len().alias("expected"), (pl.col("status") == "finished").sum().alias("n"),
        (pl.col("status") == "diverged").sum().alias("diverged"), (pl.col("status") == "failed").sum().alias("failed"),
        (pl.col("status") == "missing").sum().alias("missing"))
    rows = []
    for cell in [c.name for c in suite.cells]:
        ref = by_seed(runs, cell, base, "primary")
        cell_rows = []
        for recipe in suite.cell_recipes(cell):
            mine = by_seed(runs, cell, recipe, "primary")
            r = runs.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
            prim = r["primary"].to_numpy()
            row = {"cell": cell, "recipe": recipe, "primary": rs.primary, "primary_mean": stats.mean(prim)}
            row["primary_lo"], row["primary_hi"] = stats.bootstrap_ci(prim)
            for m in METRICS:
                v = r[m].to_numpy()
                row[f"{m}_mean"] = stats.mean(v)
                row[f"{m}_lo"], row[f"{m}_hi"] = stats.bootstrap_ci(v)
            row["final_iqm"] = stats.iqm(r["final"].to_numpy())
            if recipe == base:
                row.update(pairs=len(mine), diff=math.nan, diff_lo=math.nan, diff_hi=math.nan, sd_diff=math.nan,
                           p=math.nan, mdd=math.nan, seeds_for_margin=math.nan, equivalent=False,
                           p_improve=math.nan, p_improve_lo=math.nan, p_improve_hi=math.nan)
            else:
                x, y = stats.paired(mine, ref)
                t = stats.paired_t(x, y)
                row.update(pairs=t.n, diff=t.diff, diff_lo=t.lo, diff_hi=t.hi, sd_diff=t.sd, p=t.p,
                           mdd=stats.paired_mdd(t.sd, t.n), seeds_for_margin=stats.seeds_needed(rs.margin, t.sd),
                           equivalent=stats.equivalent(x, y, rs.margin))
                row["p_improve"] = stats.paired_prob_improvement(x, y)
                row["p_improve_lo"], row["p_improve_hi"] = stats.paired_prob_improvement_ci(x, y)
            cell_rows.append(row)
        pvals = [row["p"] for row in cell_rows]
        for row, ph, found in zip(cell_rows, stats.holm(pvals), stats.decide(pvals)):
            row["p_holm"] = ph
            if row["recipe"] == base:
                row.update(verdict="baseline", mark="baseline")
                continue
            decided = found
            good = (row["diff"] > 0) == rs.higher_is_better
            row["verdict"] = ("better" if good else "worse") if decided else (
                "equivalent" if row["equivalent"] else "undecided")
            row["mark"] = "*" if decided else ""
        rows += cell_rows
    floats = ["primary_mean", "primary_lo", "primary_hi", "diff", "diff_lo", "diff_hi", "sd_diff", "p", "p_holm",
              "mdd", "seeds_for_margin",
              *[f"{m}{s}" for m in METRICS for s in ("_mean", "_lo", "_hi")], "final_iqm",
              "p_improve", "p_improve_lo", "p_improve_hi"]
    table = pl.DataFrame([{k: row[k] for k in ("cell", "recipe", "primary", "pairs", *floats, "verdict", "mark")}
                          for row in rows],
                         schema={"cell": pl.String, "recipe": pl.String, "primary": pl.String, "pairs": pl.Int64,
                                 **{k: pl.Float64 for k in floats}, "verdict": pl.String, "mark": pl.String})
    table = table.with_columns(pl.col(pl.Float64).fill_nan(None))  # NaN would sort first; null sorts last
    return (counts.join(table, on=["cell", "recipe"], how="right")
            .select("cell", "recipe", "n", "expected", "diverged", "failed", "missing", *table.columns[2:])
            .sort(["cell", "primary_mean", "recipe"], descending=[False, rs.higher_is_better, False],
                  nulls_last=True))


def group_metrics(group: str) -> dict[str, str]:
    """{column label: metric name} of a report group, in column order (algorithms/metrics.py declares them)."""
    return {m.label: m.name for m in metric_registry.in_group(group)}


def over_steps(values: np.ndarray, metric: str) -> float:
    """A run set's step values of `metric` reduced as it declares (`over_steps`: mean, max or min), NaN-aware."""
    how = metric_registry.get(metric).over_steps
    if how == "mean":
        return stats.mean(values)
    a = np.asarray(values, dtype=np.float64)
    a = a[~np.isnan(a)]
    return (float(a.max()) if how == "max" else float(a.min())) if a.size else math.nan


# the report groups (algorithms/metrics.py `group`) of the clipping section's tables
CLIP_GROUP, OFF_POLICY_GROUP, GROUP_WEIGHTS_GROUP = "clipping", "off_policy", "group_weights"


def clipping(suite: Suite, data: Data) -> pl.DataFrame:
    """Per cell and recipe: optimizer updates per batch and mean clip fractions over finished runs' steps.

    note: `zero by construction` with one update per batch on fresh rollouts (lag 0: ρ ≡ 1, ALGORITHMS.md
    convention 8); with a rollout lag the sampler is older than the update and ρ ≠ 1 even then.
    grad_norm: median over steps of the pre-clip gradient norm (grad/norm: a step's mean over its
    updates); clip_binds: the share of steps where it exceeds train.grad_clip (the norm clip acts).
    A number that does not exist (no clip, no recorded step) is null, not NaN: polars sorts NaN above
    every number, so `clip_binds > 0.5` would count a clip-off cell as binding."""
    st = finished(data.steps)
    # a metric no recorded run has a column for (declared after these runs) gets no column either
    clip_metrics = {k: m for k, m in group_metrics(CLIP_GROUP).items() if m in st.columns}
    rows = []
    for cell in [c.name for c in suite.cells]:
        for recipe in suite.cell_recipes(cell):
            cfg = run_config(suite, data, cell, recipe)
            r, lag = cfg.recipe, cfg.rollout.lag
            g = st.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
            row = {"cell": cell, "recipe": recipe, "objective": r.objective.tag,
                   "updates_per_batch": r.needs.updates_per_batch}
            for k, m in clip_metrics.items():
                row[k] = over_steps(g[m].to_numpy(), m) if g.height else math.nan
            norms = g["grad/norm"].drop_nulls().drop_nans() if g.height and "grad/norm" in g.columns \
                else pl.Series([], dtype=pl.Float64)
            clip = cfg.train.grad_clip
            row["grad_clip"] = float(clip) if clip else math.nan
            row["grad_norm"] = float(norms.median()) if norms.len() else math.nan
            row["clip_binds"] = float((norms > clip).mean()) if clip and norms.len() else math.nan
            n = r.needs.updates_per_batch
            row["note"] = ("zero by construction: one update per batch" if n == 1 and lag == 0
                           else f"{n} update{'s' if n > 1 else ''} per batch" + (f", rollout lag {lag}" if lag else ""))
            rows.append(row)
    return pl.DataFrame(rows, schema={"cell": pl.String, "recipe": pl.String, "objective": pl.String,
                                      "updates_per_batch": pl.Int64, **{k: pl.Float64 for k in clip_metrics},
                                      "grad_clip": pl.Float64, "grad_norm": pl.Float64, "clip_binds": pl.Float64,
                                      "note": pl.String}).with_columns(pl.col(pl.Float64).fill_nan(None))


def step_summary(suite: Suite, data: Data, columns: dict[str, str]) -> pl.DataFrame | None:
    """Per cell and recipe: each metric of {column: metric} over finished runs' binned steps, reduced as
    it declares (`over_steps`: the mean, or the max for policy/ratio_max); None when the runs did not
    log them all (recorded before the engine did)."""
    st = finished(data.steps)
    if not all(m in st.columns for m in columns.values()) or st.select(
            pl.any_horizontal(pl.col(m).is_not_null() for m in columns.values()).any()).item() is not True:
        return None
    rows = []
    for cell in [c.name for c in suite.cells]:
        for recipe in suite.cell_recipes(cell):
            g = st.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
            row = {"cell": cell, "recipe": recipe}
            for k, m in columns.items():
                row[k] = over_steps(g[m].drop_nulls().to_numpy() if g.height else np.array([]), m)
            rows.append(row)
    return pl.DataFrame(rows, schema={"cell": pl.String, "recipe": pl.String, **{k: pl.Float64 for k in columns}})


def curve_frame(data: Data, value_cols: list[str], frame: str = "steps") -> pl.DataFrame:
    """Finished runs' curves in long form (cell, recipe, seed, x, metric, value) for the figures."""
    df = finished(getattr(data, frame))
    x = "frac" if frame == "steps" else "fraction"
    return (df.select("cell", "recipe", "rank", "seed", pl.col(x).alias("x"), "flops", *value_cols)
            .unpivot(index=["cell", "recipe", "rank", "seed", "x", "flops"], variable_name="metric")
            .with_columns(pl.col("value").fill_nan(None)))


CLAIM_VERDICTS = ("reproduced", "contradicted", "undecided", "not engaged")


def auc_to(flops, acc, x: float) -> float:
    """Mean held-out accuracy over the first x FLOPs: the trapezoid area under accuracy against
    compute from 0 to x (interpolated at x) divided by x; nan when the run's evaluations stop before x.
    Unlike auc (over each run's own budget) it compares runs whose budgets differ at equal compute."""
    return stats.curve_mean_to(flops, acc, x)


def _claim_values(runs: pl.DataFrame, steps: pl.DataFrame, evals: pl.DataFrame, metric: str, recipe: str,
                  cell: str) -> dict:
    """seed -> the arm's value of a claim's metric: a per-run accuracy metric (runs), the mean
    accuracy over the first X FLOPs (auc_to:X, from evals: finished runs' evaluations), the mean
    of a steps column over the run's budget bins (steps: finished runs' binned steps, compute-weighted),
    or its least-squares slope against the fraction of the budget spent, over those bins (slope:, the
    change per whole budget: what a claim about growth tests)."""
    if metric in METRICS:
        return by_seed(runs, cell, recipe, metric)
    if metric.startswith("auc_to:"):
        x = float(metric.removeprefix("auc_to:"))
        g = evals.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
        out = {seed: auc_to(r["flops"].to_numpy(), r["acc"].to_numpy(), x)
               for (seed,), r in g.group_by("seed", maintain_order=True)}
        return {k: v for k, v in out.items() if math.isfinite(v)}
    kind, _, cols = metric.partition(":")
    if any(c not in steps.columns for c in cols.split("+")):
        return {}
    g = steps.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
    g = g.with_columns(pl.sum_horizontal(cols.split("+")).alias("__value")) if "+" in cols else \
        g.with_columns(pl.col(cols).alias("__value"))
    by = g.group_by("seed", maintain_order=True)
    if kind == "slope":  # least squares over the run's budget bins: the change per whole budget
        return {seed: stats.linear_slope(r["frac"].to_numpy(), r["__value"].to_numpy()) for (seed,), r in by}
    if kind == "fall":  # relative fall from the first budget bin to the last (0.3: fell by 30%)
        return {seed: _fall(r.sort("frac")["__value"].to_numpy()) for (seed,), r in by}
    return {seed: stats.mean(r["__value"].to_numpy()) for (seed,), r in by}


def _fall(v) -> float:
    """(first − last) / |first| of a run's binned column (nan when either end is missing or first is 0)."""
    ok = [float(x) for x in v if x is not None and math.isfinite(x)]
    return (ok[0] - ok[-1]) / abs(ok[0]) if len(ok) >= 2 and ok[0] != 0 else math.nan


def engagement(runs: pl.DataFrame, steps: pl.DataFrame, evals: pl.DataFrame, claim) -> tuple[float, bool] | None:
    """(the gate's value, engaged) of a claim with an engagement gate, else None: |the mean over seeds|
    of `engage` on arm a or b, or |mean a − mean b| for engage_arm "diff"; engaged when it reaches
    engage_min. A gate whose column no run recorded reads nan: not engaged (nothing shows the part acted)."""
    if claim.engage is None:
        return None
    arms = ("a", "b") if claim.engage_arm == "diff" else (claim.engage_arm,)  # only the arm(s) the gate reads
    means = [stats.mean(list(_claim_values(runs, steps, evals, claim.engage, *claim.arm(w)).values()) or [math.nan])
             for w in arms]
    value = abs(means[0] - means[1]) if len(means) == 2 else abs(means[0])
    return value, bool(math.isfinite(value) and value >= claim.engage_min)


def _contrast(runs: pl.DataFrame, steps: pl.DataFrame, evals: pl.DataFrame, metric: str, a: tuple[str, str],
              b: tuple[str, str]):
    """Arms a and b (recipe, cell) on a claim metric, paired by seed: (x, y, stats.paired_t(x, y))."""
    x, y = stats.paired(_claim_values(runs, steps, evals, metric, *a), _claim_values(runs, steps, evals, metric, *b))
    return x, y, stats.paired_t(x, y)


STEP_COST_TOL = 0.05  # arms whose FLOPs per step differ by more: their claim is also read at matched steps


def flops_per_step(runs: pl.DataFrame, recipe: str, cell: str) -> float:
    """An arm's mean FLOPs per optimizer step over its finished runs (data.runs: flops_spent / steps_done)."""
    r = runs.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe) & (pl.col("status") == "finished")
                    & (pl.col("steps_done") > 0))
    return stats.mean((r["flops_spent"] / r["steps_done"]).to_numpy()) if r.height else math.nan


def at_matched_steps(evals: pl.DataFrame, a: tuple[str, str], b: tuple[str, str]):
    """(S, paired contrast) of two arms' mean accuracy over their first S optimizer steps, S the fewest
    steps any of their runs reached at its last evaluation: the comparison at equal updates beside the
    benchmark's at equal FLOPs, for arms whose step costs differ. None when S is 0 or no pair remains."""
    arms = [evals.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe)) for recipe, cell in (a, b)]
    if not all(g.height for g in arms):
        return None
    end = min(int(r["step"].max()) for g in arms for _, r in g.group_by("seed"))
    if end <= 0:
        return None
    x, y = stats.paired(*({seed: stats.curve_mean_to(r["step"].to_numpy(), r["acc"].to_numpy(), float(end))
                           for (seed,), r in g.group_by("seed", maintain_order=True)} for g in arms))
    return (end, stats.paired_t(x, y)) if len(x) else None


def claim_verdict(expect: str, diff: float, p_holm: float, equivalent: bool, n: int, engaged: bool | None = None) -> str:
    """reproduced / contradicted / undecided / not engaged (see `claims`): one rule for every claim.

    A claim whose part did not act (engaged False) is not engaged, whatever its numbers. A claimed
    difference (greater / less) is decided by significance and direction alone: reproduced when Holm's
    p < 0.05 in the claimed direction, contradicted when in the other, else undecided; being smaller
    than the margin is a qualifier on either (`claim_qualifier`), not a verdict of its own. An
    equivalence claim is about the margin: reproduced when TOST puts the interval inside ±margin,
    contradicted when the difference is significant and not shown inside it, else undecided."""
    if engaged is False:
        return "not engaged"
    if n < 2:
        return "undecided"
    sig = math.isfinite(p_holm) and p_holm < stats.ALPHA
    if expect == "equivalent":
        return "reproduced" if equivalent else "contradicted" if sig else "undecided"
    if sig:
        return "reproduced" if (diff > 0) == (expect == "greater") else "contradicted"
    return "undecided"


def claim_qualifier(expect: str, p_holm: float, equivalent: bool) -> str:
    """What qualifies a claim's verdict: a difference shown smaller than the margin ("inside ±margin"),
    on a significant effect or not; "" otherwise (and for an equivalence claim, whose margin is its
    subject, unless its difference is also significant)."""
    if not equivalent:
        return ""
    sig = math.isfinite(p_holm) and p_holm < stats.ALPHA
    if expect == "equivalent":
        return "significant, inside ±margin" if sig else ""
    return "significant, inside ±margin" if sig else "inside ±margin"


def claim_finding(diff: float, p_holm: float, equivalent: bool, n: int) -> str:
    """What a contrast a − b shows, by the leaderboard's rule: greater / less when Holm p < 0.05,
    else equivalent when TOST puts it inside ±margin, else undecided (under 2 pairs: undecided)."""
    if n < 2:
        return "undecided"
    if math.isfinite(p_holm) and p_holm < stats.ALPHA:
        return "greater" if diff > 0 else "less"
    return "equivalent" if equivalent else "undecided"


def _board_finding(suite: Suite, board: pl.DataFrame, metric: str, a: tuple[str, str], b: tuple[str, str]) -> str | None:
    """The leaderboard's verdict on the contrast a − b (arms (recipe, cell)) in claim_finding's words,
    when the leaderboard has it: one cell, one arm the baseline, the metric the primary. Else None."""
    base, rs = baseline(suite), suite.report
    if a[1] != b[1] or metric != rs.primary or rs.threshold is not None or base not in (a[0], b[0]) or a[0] == b[0]:
        return None
    other = a[0] if b[0] == base else b[0]
    row = board.filter((pl.col("cell") == a[1]) & (pl.col("recipe") == other))
    if not row.height:
        return None
    v = row["verdict"][0]
    if v in ("better", "worse"):
        up = (v == "better") == rs.higher_is_better  # the recipe's metric is above the baseline's
        return "greater" if up == (other == a[0]) else "less"
    return v


def arm_differences(suite: Suite, a: tuple[str, str], b: tuple[str, str], data: Data | None = None) -> list[str]:
    """What differs between two arms' configs (recipe@cell), as they ran (`data.run_config`: a
    recorded run's run.json, else the suite's config): the recipe parts (`Recipe.parts_differing`: objective, kl, updates, ...),
    then `train` when a training setting differs and `budget` when the cells' budgets do. A one-part
    ablation gives one."""
    ca, cb = (run_config(suite, data, cell, recipe) for recipe, cell in (a, b))
    out = ca.recipe.parts_differing(cb.recipe)
    if ca.train != cb.train:
        out.append("train")
    if ca.budget != cb.budget:
        out.append("budget")
    for key in ("task", "scale", "task_params", "warmstart", "rollout", "eval", "rewards"):
        if getattr(ca, key) != getattr(cb, key):
            out.append(key)
    return out


def claims(suite: Suite, data: Data, board: pl.DataFrame | None = None, kind: str = "claim") -> pl.DataFrame | None:
    """One row per claim of the suite: the paired contrast a − b by seed, its 95% t interval, p and
    Holm's p over the suite's claims (one family), and the verdict. kind "sanity": the suite's sanity
    checks instead (contrasts that hold by construction), each with its own p, a family of their
    own, and `passed` (their verdict is reproduced). parts_differing: how many parts of the arms'
    configs differ (`arm_differences`, listed in `differs`); a one-part ablation has 1. mechanism_*
    and outcome_*: the same arms' paired contrast on the claim's mechanism (its metric when that is a
    steps:/slope: metric, else its declared `mechanism`, else null) and on the outcome (its metric when
    that is an accuracy metric, else the report's primary), each with its unadjusted p.

    Step cost: flops_per_step_ratio is arm a's FLOPs per optimizer step over arm b's. Where it differs
    from 1 by more than STEP_COST_TOL on an accuracy claim, the contrast is also read at matched steps
    (`at_matched_steps`: mean accuracy over the first matched_steps updates; steps_diff, _lo, _hi, _p),
    beside the verdict's, which stays at matched FLOPs (the benchmark's premise).

    The engagement gate (a claim's `engage`, `engage_min`, `engage_arm`; `engagement`): engaged when
    the part acted enough to matter; engage_value is what the gate read. A claim whose gate reads below
    its threshold is `not engaged`: no verdict on the paper, and not in Holm's family (p_holm null),
    which is the engaged (or ungated) claims'. engaged is null for a claim that declares no gate.

    The verdict (`claim_verdict`, one rule): expect greater/less: reproduced when Holm p < 0.05 in the
    claimed direction; contradicted when Holm p < 0.05 in the other direction; else undecided, with
    a difference shown smaller than the margin (TOST) a qualifier on any of them (`qualifier`), not a
    verdict. expect equivalent: reproduced when TOST puts the 90% interval inside ±margin;
    contradicted when Holm p < 0.05 and not inside; else undecided. The margin is the claim's own,
    else the report's for accuracy metrics (none for steps: metrics).

    finding: what the contrast shows in the leaderboard's words and by its rule (claim_finding);
    leaderboard: the leaderboard's own verdict on the same contrast where it has one (a recipe
    against the baseline in one cell on the primary metric; `board`, computed when not given), else
    null. The test is the same paired t and TOST; the two can differ only through Holm's family
    (the suite's claims here, the cell's comparisons with the baseline there) or a claim's own margin."""
    chosen = [c for c in suite.claims if c.kind == kind]
    if not chosen:
        return None
    board = leaderboard(suite, data) if board is None else board
    runs, steps, evals = per_run(suite, data), finished(data.steps), finished(data.evals)
    outcome = suite.report.primary if suite.report.primary in METRICS else "auc"
    rows, ps = [], []
    for c in chosen:
        (ra, ca), (rb, cb) = c.arm("a"), c.arm("b")
        x, y, t = _contrast(runs, steps, evals, c.metric, (ra, ca), (rb, cb))
        accuracy = c.on_accuracy
        # the claim's mechanism (its own metric when that is a step metric) and the outcome, each a paired
        # contrast of the same arms with its unadjusted p (the verdict reads the claim's metric only)
        extra = {}
        for key, metric in (("mechanism", c.mechanism if accuracy else c.metric),
                            ("outcome", c.metric if accuracy else outcome)):
            r = _contrast(runs, steps, evals, metric, (ra, ca), (rb, cb))[2] if metric else None
            extra.update({key: metric, f"{key}_diff": r.diff if r else None, f"{key}_lo": r.lo if r else None,
                          f"{key}_hi": r.hi if r else None, f"{key}_p": r.p if r else None})
        margin = c.margin if c.margin is not None else (suite.report.margin if accuracy else math.nan)
        eq = bool(math.isfinite(margin) and stats.equivalent(x, y, margin))
        cost = flops_per_step(data.runs, rb, cb)
        ratio = flops_per_step(data.runs, ra, ca) / cost if cost else math.nan
        matched = at_matched_steps(evals, (ra, ca), (rb, cb)) if (
            accuracy and math.isfinite(ratio) and abs(ratio - 1) > STEP_COST_TOL) else None
        extra.update({"flops_per_step_ratio": ratio, "matched_steps": matched[0] if matched else None,
                      **{f"steps_{k}": getattr(matched[1], v) if matched else None
                         for k, v in (("diff", "diff"), ("lo", "lo"), ("hi", "hi"), ("p", "p"))}})
        gate = engagement(runs, steps, evals, c)
        ps.append(t.p if gate is None or gate[1] else math.nan)  # Holm's family: the claims whose part acted
        extra.update({"engage": c.engage, "engage_arm": c.engage_arm if gate else None,
                      "engage_value": gate[0] if gate else None, "engage_min": c.engage_min,
                      "engaged": gate[1] if gate else None})
        rows.append({"claim": c.name, "paper": c.paper, "statement": c.claim, "metric": c.metric,
                     "a": f"{ra}@{ca}", "b": f"{rb}@{cb}", "expect": c.expect, "n": t.n,
                     "mean_a": stats.mean(x), "mean_b": stats.mean(y), "diff": t.diff, "diff_lo": t.lo,
                     "diff_hi": t.hi, "p": t.p, "margin": margin, "equivalent": eq,
                     "leaderboard": _board_finding(suite, board, c.metric, (ra, ca), (rb, cb)),
                     "differs": ", ".join(diff := arm_differences(suite, (ra, ca), (rb, cb), data)),
                     "parts_differing": len(diff), **extra})
    for row, p_holm in zip(rows, stats.holm(ps)):
        row["p_holm"] = p_holm
        row["verdict"] = claim_verdict(row["expect"], row["diff"], p_holm, row["equivalent"], row["n"], row["engaged"])
        row["qualifier"] = "" if row["engaged"] is False else claim_qualifier(row["expect"], p_holm, row["equivalent"])
        row["finding"] = claim_finding(row["diff"], p_holm, row["equivalent"], row["n"])  # outside the family: no test
    cols = ["claim", "paper", "statement", "metric", "a", "b", "expect", "n", "mean_a", "mean_b", "diff", "diff_lo",
            "diff_hi", "p", "p_holm", "margin", "equivalent", "engaged", "engage", "engage_arm", "engage_value",
            "engage_min", "verdict", "qualifier", "finding", "leaderboard", "parts_differing",
            "differs", *(f"{k}{s}" for k in ("mechanism", "outcome") for s in ("", "_diff", "_lo", "_hi", "_p")),
            "flops_per_step_ratio", "matched_steps", "steps_diff", "steps_lo", "steps_hi", "steps_p"]
    if kind == "sanity":
        for r in rows:
            r["passed"] = r["verdict"] == "reproduced"
        cols += ["passed"]
    strings = {"claim", "paper", "statement", "metric", "a", "b", "expect", "verdict", "finding", "leaderboard", "differs",
               "mechanism", "outcome", "engage", "engage_arm", "qualifier"}
    return pl.DataFrame([{k: r[k] for k in cols} for r in rows], schema={
        k: pl.String if k in strings else pl.Int64 if k in ("n", "parts_differing", "matched_steps")
        else pl.Boolean if k in ("equivalent", "passed", "engaged") else pl.Float64 for k in cols})


SCALE_COLUMNS = {"task": pl.String, "regime": pl.String, "scale": pl.String, "cell": pl.String, "params": pl.Int64,
                 "recipe": pl.String, "n": pl.Int64, "primary": pl.String, "primary_mean": pl.Float64,
                 "primary_lo": pl.Float64, "primary_hi": pl.Float64, "rank": pl.Int64, "diff": pl.Float64,
                 "diff_lo": pl.Float64, "diff_hi": pl.Float64, "p_holm": pl.Float64, "verdict": pl.String,
                 "change": pl.Float64, "change_lo": pl.Float64, "change_hi": pl.Float64, "change_p": pl.Float64,
                 "change_p_holm": pl.Float64, "change_verdict": pl.String}


def scale_groups(suite: Suite) -> dict[tuple[str, str], list]:
    """(task, regime name or "") -> its cells in the suite's scale order, for the groups with ≥ 2 scales."""
    groups: dict[tuple[str, str], list] = {}
    for c in suite.cells:
        groups.setdefault((c.task, c.regime.name if c.regime else ""), []).append(c)
    return {k: v for k, v in groups.items() if len({c.scale for c in v}) >= 2}


def scales(suite: Suite, data: Data, board: pl.DataFrame | None = None) -> pl.DataFrame | None:
    """Per (task, regime) with ≥ 2 model scales, recipe and scale: how the comparison with the
    baseline moves with model size; None when no task/regime of the suite spans two scales.

    From the leaderboard (`board`, computed when not given): n, the primary metric's mean and
    bootstrap interval, Δ vs the baseline (paired t interval), p_holm and verdict at that scale.
    rank: 1 = best mean among the cell's recipes (ties share the better rank). params: the model's
    parameters recorded in the scale's run.json (null before any run). Scales are in the suite's
    order; for each scale after the first, change is the difference of the recipe's mean paired
    difference at this scale from that at the first, with its 95% Welch interval and p over the
    per-seed paired differences of the two scales (different models: not paired across scales);
    change_p_holm adjusts over the group's changes (recipes × later scales), and change_verdict is
    improves / worsens (against the baseline, at Holm p < 0.05) or undecided.
    """
    groups = scale_groups(suite)
    if not groups:
        return None
    board = leaderboard(suite, data) if board is None else board
    runs, base, rs = per_run(suite, data), baseline(suite), suite.report
    by = {(r["cell"], r["recipe"]): r for r in board.iter_rows(named=True)}
    params = _params(data)
    out = []
    for (task, regime), cells in groups.items():
        rows = []
        for cell in cells:
            ranked = sorted((by[(cell.name, r)]["primary_mean"], r) for r in suite.cell_recipes(cell)
                            if by[(cell.name, r)]["primary_mean"] is not None)
            means = [m for m, _ in ranked]
            for recipe in suite.cell_recipes(cell):
                b = by[(cell.name, recipe)]
                m = b["primary_mean"]
                rank = None if m is None else 1 + sum(v > m if rs.higher_is_better else v < m for v in means)
                rows.append({"task": task, "regime": regime, "scale": cell.scale, "cell": cell.name,
                             "params": params.get(cell.name), "recipe": recipe, "n": b["n"], "primary": rs.primary,
                             **{k: b[k] for k in ("primary_mean", "primary_lo", "primary_hi", "diff", "diff_lo",
                                                  "diff_hi", "p_holm", "verdict")},
                             "rank": rank, "change": None, "change_lo": None, "change_hi": None, "change_p": None,
                             "change_p_holm": None, "change_verdict": None})
        first = cells[0].name
        tested = []
        for row in rows:
            if row["recipe"] == base or row["cell"] == first:
                continue
            d0 = _paired_diffs(runs, first, row["recipe"], base)
            d1 = _paired_diffs(runs, row["cell"], row["recipe"], base)
            row["change"], row["change_lo"], row["change_hi"], row["change_p"] = stats.welch_t(d0, d1)
            tested.append(row)
        for row, p_holm in zip(tested, stats.holm([r["change_p"] for r in tested])):
            row["change_p_holm"] = p_holm
            decided = math.isfinite(p_holm) and p_holm < stats.ALPHA
            row["change_verdict"] = ("improves" if (row["change"] > 0) == rs.higher_is_better else "worsens") \
                if decided else "undecided"
        order = {r: i for i, r in enumerate(suite.recipes)}
        out += sorted(rows, key=lambda r: (order[r["recipe"]], [c.name for c in cells].index(r["cell"])))
    frame = pl.DataFrame([{k: r[k] for k in SCALE_COLUMNS} for r in out], schema=SCALE_COLUMNS)
    return frame.with_columns(pl.col(pl.Float64).fill_nan(None))


def _paired_diffs(runs: pl.DataFrame, cell: str, recipe: str, base: str) -> np.ndarray:
    """Per-seed recipe − baseline on the primary metric in one cell (the seeds both finished)."""
    x, y = stats.paired(by_seed(runs, cell, recipe, "primary"), by_seed(runs, cell, base, "primary"))
    return x - y


def _params(data: Data) -> dict[str, int]:
    """cell -> the model's parameter count recorded by its runs (run.json "model"), the first run id's."""
    out: dict[str, int] = {}
    for rid, cell in sorted(zip(data.runs["run_id"], data.runs["cell"])):
        model = data.metas.get(rid, {}).get("model") or {}
        if cell not in out and model.get("params"):
            out[cell] = int(model["params"])
    return out
