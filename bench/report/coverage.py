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


def verdicts(suite: Suite, data: Data) -> pl.DataFrame:
    """Per cell and recipe other than the baseline: each axis's paired difference with the baseline
    (`{axis}_diff` with its 95% paired t interval `_lo`/`_hi`, Holm's p over the cell's recipes
    `_p_holm`, the minimum detectable difference `_mdd`, the finding `_dir`: up, down, equivalent
    or flat), the kind (`gain_kind`), pairs (seeds with all three axes on both sides), k (pass@K's
    K: for `pass_k` the runs' eval.k, null where they differ) and coverage (the column pass@K was read from)."""
    from bench.report.tables import baseline

    base = baseline(suite)
    margin = suite.report.margin
    ev = finished(data.evals)
    rows = []
    for cell in (c.name for c in suite.cells):
        e = ev.filter(pl.col("cell") == cell)
        k_col, k = coverage_column(e)
        if k_col == "pass_k":  # pass@k at the evaluation's k samples per problem, where the runs agree on k
            ks = {data.metas[rid]["config"].get("eval", {}).get("k") for rid in e["run_id"].unique().to_list()
                  if rid in data.metas}
            k = ks.pop() if len(ks) == 1 and None not in ks else None
        runs = per_run_axes(suite, e, k_col)
        side = {r: {axis: dict(zip(g["seed"].to_list(), g[axis].to_list())) for axis in AXES}
                for (r,), g in runs.group_by("recipe", maintain_order=True)}
        ref = side.get(base)
        recipes = [r for r in suite.cell_recipes(cell) if r != base]
        if ref is None or not recipes:
            continue
        cell_rows = [{"cell": cell, "recipe": r, "k": k, "coverage": k_col} for r in recipes]
        for axis in AXES:
            tests = []
            for row in cell_rows:
                mine = side.get(row["recipe"], {}).get(axis, {})
                x, y = stats.paired(mine, ref[axis])
                t = stats.paired_t(x, y)
                tests.append(t)
                row.update({f"{axis}_diff": t.diff, f"{axis}_lo": t.lo, f"{axis}_hi": t.hi,
                            f"{axis}_mdd": stats.paired_mdd(t.sd, t.n),
                            f"{axis}_equivalent": stats.equivalent(x, y, margin), f"{axis}_n": t.n})
            for row, ph in zip(cell_rows, stats.holm([t.p for t in tests])):
                row[f"{axis}_p_holm"] = ph
                row[f"{axis}_dir"] = _finding(row[f"{axis}_diff"], ph, row.pop(f"{axis}_equivalent"))
        for row in cell_rows:
            row["pairs"] = min(row.pop(f"{axis}_n") for axis in AXES)
            row["kind"] = gain_kind(*(row[f"{axis}_dir"] for axis in AXES))
        rows += cell_rows
    floats = [f"{axis}_{s}" for axis in AXES for s in ("diff", "lo", "hi", "p_holm", "mdd")]
    schema = {"cell": pl.String, "recipe": pl.String, "pairs": pl.Int64, "k": pl.Int64, "coverage": pl.String,
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
