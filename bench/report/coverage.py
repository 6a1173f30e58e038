"""What a recipe's gain over the baseline is: skill, sharpening or collapse.

Sampled pass@1 alone rewards collapse: a recipe that concentrates its samples on what greedy decoding
already answers gains sampled accuracy while it solves nothing new and covers fewer problems in k
tries (RL's sharpening against new capability: Yue et al. 2025, "Does reinforcement learning really
incentivize reasoning capacity beyond the base model?"; the pass@1 / pass@k trade-off). So every
contrast with the baseline is read on three axes, each paired by seed and Holm-adjusted within the
cell like the leaderboard:

    pass1    the report's accuracy (sampled answers; the leaderboard's own metric)
    greedy   greedy-decoding accuracy: what the policy's mode answers
    pass_k   pass@K, the largest K every evaluation of the cell logged (the unbiased estimator over
             the evaluation's n ≥ K samples per problem; runs from before December 2026 logged only
             pass@k at k = eval.k: `pass_k`)

each reduced over a run's evaluations as the report's primary metric is (auc, final or plateau; auc
for a compute-to-threshold primary), and a kind (`gain_kind`) says what the three together mean.
"""
from __future__ import annotations

import math

import numpy as np
import polars as pl

from algorithms.metrics import PASS_AT
from bench.report import stats
from bench.report.data import Data, finished
from bench.suite import Suite

AXES = ("pass1", "greedy", "pass_k")
AXIS_TEXT = {"pass1": "sampled pass@1", "greedy": "greedy accuracy", "pass_k": "pass@K"}

KINDS = ("skill", "sharpening", "collapse", "mixed", "worse", "equivalent", "undecided")
KIND_TEXT = {
    "skill": "greedy accuracy or pass@K rises, and no axis falls: the policy solves problems it did not",
    "sharpening": "sampled pass@1 rises while greedy accuracy and pass@K do not: sampling moved toward "
                  "what greedy decoding already answered",
    "collapse": "pass@K falls while pass@1 or greedy accuracy rises: the gain was bought with coverage",
    "mixed": "one axis rises and another falls, other than collapse's pattern",
    "worse": "an axis falls and none rises",
    "equivalent": "every axis is equivalent to the baseline within the report's margin",
    "undecided": "no axis differs detectably, and not every one is shown equivalent",
}


def gain_kind(pass1: str, greedy: str, pass_k: str) -> str:
    """The kind of a contrast from each axis's finding: "up", "down" (Holm p < α, the direction of
    the mean difference), "equivalent" (TOST within the margin) or "flat" (neither).

    Precedence: a coverage loss beside a pass@1 or greedy gain is collapse (the gain cannot be
    called skill while the policy solves fewer problems in K tries); any other gain beside a loss is
    mixed; then skill (greedy or pass@K up), sharpening (pass@1 up alone), worse (something down),
    equivalent (all three), undecided.
    """
    found = (pass1, greedy, pass_k)
    for f in found:
        if f not in ("up", "down", "equivalent", "flat"):
            raise ValueError(f"an axis finding is one of up, down, equivalent, flat; got {f!r}")
    if pass_k == "down" and "up" in (pass1, greedy):
        return "collapse"
    if "up" in found and "down" in found:
        return "mixed"
    if "up" in (greedy, pass_k):
        return "skill"
    if pass1 == "up":
        return "sharpening"
    if "down" in found:
        return "worse"
    if all(f == "equivalent" for f in found):
        return "equivalent"
    return "undecided"


def logged(evals: pl.DataFrame, col: str) -> bool:
    """Whether every row of evals has a value of col (neither null nor NaN), and there are rows."""
    return col in evals.columns and evals.height > 0 and evals[col].null_count() == 0 \
        and not evals[col].is_nan().any()


def curve_columns(evals: pl.DataFrame) -> list[str]:
    """The coverage curve's columns (pass@1, pass@2, ...) that every row of evals logged, in increasing K."""
    return [c for c in (full.removeprefix("eval/") for full in PASS_AT) if logged(evals, c)]


def coverage_column(evals: pl.DataFrame) -> tuple[str | None, int | None]:
    """The pass@K column every evaluation row logged with the largest K, and K; else `pass_k` (K
    unknown from the table: the evaluation's k) where every row has it; else (None, None)."""
    cols = curve_columns(evals)
    if cols:
        return cols[-1], int(cols[-1].removeprefix("pass@"))
    return ("pass_k", None) if logged(evals, "pass_k") else (None, None)


def _reduce(spent: np.ndarray, values: np.ndarray, primary: str, plateau_from: float) -> float:
    from bench.report.tables import plateau

    if primary == "final":
        return float(values[-1])
    if primary == "plateau":
        return plateau(spent, values, plateau_from)[0]
    return stats.curve_mean_to(spent, values, 1.0)


def per_run_axes(suite: Suite, evals: pl.DataFrame, k_col: str | None) -> pl.DataFrame:
    """One row per finished run of `evals`: cell, recipe, seed and each axis reduced over its
    evaluations as the report's primary metric (auc for a compute-to-threshold primary)."""
    rs = suite.report
    primary = rs.primary if rs.threshold is None and rs.primary in ("final", "auc", "plateau") else "auc"
    cols = {"pass1": "acc", "greedy": "acc_greedy", "pass_k": k_col}
    rows = []
    for (cell, recipe, seed), g in finished(evals).group_by("cell", "recipe", "seed", maintain_order=True):
        g = g.sort("spent")
        spent = g["spent"].to_numpy()
        row = {"cell": cell, "recipe": recipe, "seed": seed}
        for axis, col in cols.items():
            row[axis] = (_reduce(spent, g[col].cast(pl.Float64).to_numpy(), primary, rs.plateau_from)
                         if col is not None and col in g.columns else math.nan)
        rows.append(row)
    return pl.DataFrame(rows, schema={"cell": pl.String, "recipe": pl.String, "seed": pl.Int64,
                                      **{a: pl.Float64 for a in AXES}})


def _finding(diff: float, p_holm: float, equivalent: bool) -> str:
    if math.isfinite(p_holm) and p_holm < stats.ALPHA:
        return "up" if diff > 0 else "down"
    return "equivalent" if equivalent else "flat"


def _warm_starts(data: Data, evals: pl.DataFrame) -> dict[int, int]:
    """{seed: its warm start's seed (warmstart.seed of its config)} over the runs of one cell's evals
    (every recipe of a seed starts from the same warm start)."""
    return {seed: data.cfgs[rid].warmstart.seed
            for seed, rid in evals.select("seed", "run_id").unique(maintain_order=True).iter_rows()
            if rid in data.cfgs}


def _paired_by_warmstart(mine: dict, ref: dict, ws: dict) -> tuple[np.ndarray, np.ndarray, list]:
    """`stats.paired(mine, ref)` with each pair's warm start beside it."""
    x, y = stats.paired(mine, ref)
    keys = sorted(k for k in mine.keys() & ref.keys() if math.isfinite(mine[k]) and math.isfinite(ref[k]))
    return x, y, [ws.get(k) for k in keys]


def _cell_sides(suite: Suite, data: Data, cell: str):
    """One cell's (k_col, k, {recipe: {axis: {seed: value}}}, {seed: warm start})."""
    e = finished(data.evals).filter(pl.col("cell") == cell)
    k_col, k = coverage_column(e)
    if k_col == "pass_k":  # pass@k at the evaluation's k samples per problem, where the runs agree on k
        ks = {data.metas[rid]["config"].get("eval", {}).get("k") for rid in e["run_id"].unique().to_list()
              if rid in data.metas}
        k = ks.pop() if len(ks) == 1 and None not in ks else None
    runs = per_run_axes(suite, e, k_col)
    side = {r: {axis: dict(zip(g["seed"].to_list(), g[axis].to_list())) for axis in AXES}
            for (r,), g in runs.group_by("recipe", maintain_order=True)}
    return k_col, k, side, _warm_starts(data, e)


def _axis_row(prefix: str, t: stats.Paired, equivalent: bool) -> dict:
    return {f"{prefix}_diff": t.diff, f"{prefix}_lo": t.lo, f"{prefix}_hi": t.hi,
            f"{prefix}_mdd": stats.paired_mdd(t.sd, t.n), f"{prefix}_equivalent": equivalent, f"{prefix}_n": t.n}


def _decide(rows: list[dict], tests: list[stats.Paired], axis: str) -> None:
    """Holm over rows (one family) on one axis: `{axis}_p_holm` and the finding `{axis}_dir`."""
    for row, ph in zip(rows, stats.holm([t.p for t in tests])):
        row[f"{axis}_p_holm"] = ph
        row[f"{axis}_dir"] = _finding(row[f"{axis}_diff"], ph, row.pop(f"{axis}_equivalent"))


def verdicts(suite: Suite, data: Data) -> pl.DataFrame:
    """Per cell and recipe other than the baseline: each axis's paired difference with the baseline
    (`{axis}_diff` with its 95% paired t interval `_lo`/`_hi`, Holm's p over the cell's recipes
    `_p_holm`, the minimum detectable difference `_mdd`, the finding `_dir`: up, down, equivalent
    or flat), the kind (`gain_kind`), pairs (seeds with all three axes on both sides), k (pass@K's
    K: for `pass_k` the runs' eval.k, null where they differ), coverage (the column pass@K was read
    from), level and warmstarts.

    level "seed": the cell's runs start from one warm start, and the figures are over seeds (df =
    pairs − 1), exactly as before warm starts were told apart. level "warm start": the cell's runs
    start from several (a regime's `warmstarts`), and every figure is a two-stage (cluster) estimate
    (`stats.cluster_paired_t`): d_w, the mean paired difference over warm start w's seeds; the
    difference, the mean of the d_w (each warm start weighted equally, whatever its seed count); its
    interval and p from t over the W means (df = W − 1), Holm over the cell's recipes as before; the
    MDD `stats.paired_mdd` at n = W and the SD of the d_w; the equivalence test (TOST) over the d_w.
    warmstarts: W, the warm starts with a pair on every axis (1 at level "seed").

    Why: seeds that share a warm start are not independent draws of the comparison a user's own
    warm start would give. Pooling them as independent reads a gap that one warm start moves (on gcd
    one erases every recipe's gap) as if seeds averaged it out, and the seed-level interval is too
    narrow for the question the report answers (does the recipe beat the baseline from a warm start
    like these?). The cluster t holds whatever the correlation within a warm start. With W = 3 its
    t(2) interval is wide (the 0.975 quantile is 4.30, against 2.57 for 6 seeds at t(5)): that is
    what three warm starts can say, and `per_warmstart` shows each one apart."""
    from bench.report.tables import baseline

    base = baseline(suite)
    margin = suite.report.margin
    rows = []
    for cell in (c.name for c in suite.cells):
        k_col, k, side, ws = _cell_sides(suite, data, cell)
        several = len(set(ws.values())) >= 2
        ref = side.get(base)
        recipes = [r for r in suite.cell_recipes(cell) if r != base]
        if ref is None or not recipes:
            continue
        cell_rows = [{"cell": cell, "recipe": r, "k": k, "coverage": k_col,
                      "level": "warm start" if several else "seed"} for r in recipes]
        for axis in AXES:
            tests = []
            for row in cell_rows:
                mine = side.get(row["recipe"], {}).get(axis, {})
                if several:
                    x, y, g = _paired_by_warmstart(mine, ref[axis], ws)
                    t = stats.cluster_paired_t(x, y, g)
                    d = np.array(list(stats.cluster_means(x, y, g).values()))
                    row.update(_axis_row(axis, t, stats.equivalent(d, np.zeros_like(d), margin)))
                    row.update({f"{axis}_n": int(x.size), f"{axis}_w": t.n})
                else:
                    x, y = stats.paired(mine, ref[axis])
                    t = stats.paired_t(x, y)
                    row.update(_axis_row(axis, t, stats.equivalent(x, y, margin)))
                    row[f"{axis}_w"] = 1 if t.n else 0
                tests.append(t)
            _decide(cell_rows, tests, axis)
        for row in cell_rows:
            row["pairs"] = min(row.pop(f"{axis}_n") for axis in AXES)
            row["warmstarts"] = min(row.pop(f"{axis}_w") for axis in AXES)
            row["kind"] = gain_kind(*(row[f"{axis}_dir"] for axis in AXES))
        rows += cell_rows
    floats = [f"{axis}_{s}" for axis in AXES for s in ("diff", "lo", "hi", "p_holm", "mdd")]
    schema = {"cell": pl.String, "recipe": pl.String, "pairs": pl.Int64, "k": pl.Int64, "coverage": pl.String,
              **{c: pl.Float64 for c in floats}, **{f"{axis}_dir": pl.String for axis in AXES}, "kind": pl.String,
              "level": pl.String, "warmstarts": pl.Int64}
    return (pl.DataFrame([{c: row[c] for c in schema} for row in rows], schema=schema)
            .with_columns(pl.col(pl.Float64).fill_nan(None)))


def per_warmstart(suite: Suite, data: Data) -> pl.DataFrame:
    """For each cell with several warm starts: one row per (cell, recipe other than the baseline, warm
    start): warmstart (its seed), pairs (that warm start's seeds with all three axes on both sides),
    each axis's paired difference over those seeds `{axis}_diff` with its 95% t interval `_lo`/`_hi`
    (df = its pairs − 1; null under 2 pairs), Holm's p `_p_holm`, the finding `_dir` and the kind.

    The finding is the verdict a report of this warm start's seeds alone would give: Holm over the
    cell's recipes on each axis, within the warm start (the cell's family, as `verdicts` adjusts
    it), and TOST at the report's margin over the same seeds. Descriptive: with two or three seeds
    per warm start (t with 1 or 2 df) few axes are decided, and the warm starts are not a family of
    their own (no adjustment across them); the cell's verdict is `verdicts`' over warm starts."""
    from bench.report.tables import baseline

    base = baseline(suite)
    margin = suite.report.margin
    rows = []
    for cell in (c.name for c in suite.cells):
        _, _, side, ws = _cell_sides(suite, data, cell)
        ref = side.get(base)
        recipes = [r for r in suite.cell_recipes(cell) if r != base]
        if len(set(ws.values())) < 2 or ref is None or not recipes:
            continue
        cell_rows = []
        for w in sorted(set(ws.values())):
            seeds = {s for s, v in ws.items() if v == w}
            ws_rows = [{"cell": cell, "recipe": r, "warmstart": w} for r in recipes]
            for axis in AXES:
                tests = []
                for row in ws_rows:
                    mine = {s: v for s, v in side.get(row["recipe"], {}).get(axis, {}).items() if s in seeds}
                    x, y = stats.paired(mine, ref[axis])
                    t = stats.paired_t(x, y)
                    tests.append(t)
                    row.update(_axis_row(axis, t, stats.equivalent(x, y, margin)))
                _decide(ws_rows, tests, axis)
            for row in ws_rows:
                row["pairs"] = min(row.pop(f"{axis}_n") for axis in AXES)
                row["kind"] = gain_kind(*(row[f"{axis}_dir"] for axis in AXES))
            cell_rows += ws_rows
        rows += sorted(cell_rows, key=lambda r: recipes.index(r["recipe"]))  # stable: warm starts in order
    floats = [f"{axis}_{s}" for axis in AXES for s in ("diff", "lo", "hi", "p_holm")]
    schema = {"cell": pl.String, "recipe": pl.String, "warmstart": pl.Int64, "pairs": pl.Int64,
              **{c: pl.Float64 for c in floats}, **{f"{axis}_dir": pl.String for axis in AXES}, "kind": pl.String}
    return (pl.DataFrame([{c: row[c] for c in schema} for row in rows], schema=schema)
            .with_columns(pl.col(pl.Float64).fill_nan(None)))


def kl_at_evals(data: Data) -> pl.DataFrame:
    """The finished evaluations with `kl`: the policy's KL k1 to the reference at each evaluation, and
    `kl_source` saying where it comes from: "eval" where the run logged eval/kl_k1 (measured on the
    evaluation's own samples), else "steps": read from the training batches of the budget's bin
    (1/N_BINS) that holds the evaluation's spent fraction (the steps just before it), 0 at step 0, where
    the policy is the warm start and the warm start is the reference; null where neither is logged."""
    from bench.report.data import N_BINS

    ev = finished(data.evals)
    steps = finished(data.steps)
    logged = pl.col("eval_kl").fill_nan(None) if "eval_kl" in ev.columns else pl.lit(None, dtype=pl.Float64)
    if "kl/k1" in steps.columns:
        bins = steps.select("run_id", "frac", pl.col("kl/k1").alias("_kl"))
        at = ((pl.col("spent") * N_BINS).ceil().clip(1, N_BINS) / N_BINS).alias("frac")
        ev = (ev.with_columns(at).join(bins, on=["run_id", "frac"], how="left", maintain_order="left")
              .with_columns(pl.when(pl.col("step") == 0).then(0.0).otherwise(pl.col("_kl")).alias("_kl"))
              .drop("frac"))
    else:
        ev = ev.with_columns(pl.lit(None, dtype=pl.Float64).alias("_kl"))
    return (ev.with_columns(pl.coalesce(logged, pl.col("_kl")).alias("kl"),
                            pl.when(logged.is_not_null()).then(pl.lit("eval"))
                            .when(pl.col("_kl").is_not_null()).then(pl.lit("steps")).alias("kl_source"))
            .drop("_kl"))
