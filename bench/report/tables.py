"""The report's tables: `Data` in, one Polars frame per table out, rows in a fixed order.

Statistics are over the finished seeds of a (cell, recipe); diverged, failed and missing runs are
never averaged in (a diverged run's last accuracy is not a result at the budget) and are listed by
`problems` instead. The comparison baseline is grpo when the suite has it, else its first recipe.
"""
from __future__ import annotations

import math

import polars as pl

from algorithms.serialize import flatten
from bench.report import stats
from bench.report.data import Data, finished
from bench.suite import Suite

MW_ALPHA = 0.05


def baseline(suite: Suite) -> str:
    return "grpo" if "grpo" in suite.recipes else suite.recipes[0]


def per_run(data: Data) -> pl.DataFrame:
    """One row per finished run: final held-out greedy accuracy and the area under its curve.

    auc: trapezoid area under accuracy against the fraction of the budget (eval points 0..1),
    divided by the range: the run's mean accuracy over training, higher for earlier gains.
    """
    rows = []
    for (cell, rank, recipe, seed, rid), g in finished(data.evals).group_by(
            "cell", "rank", "recipe", "seed", "run_id", maintain_order=True):
        g = g.sort("fraction")
        rows.append({"cell": cell, "rank": rank, "recipe": recipe, "seed": seed, "run_id": rid,
                     "acc": g["acc"][-1], "auc": stats.curve_auc(g["fraction"].to_numpy(), g["acc"].to_numpy())})
    return pl.DataFrame(rows, schema={"cell": pl.String, "rank": pl.Int64, "recipe": pl.String, "seed": pl.Int64,
                                      "run_id": pl.String, "acc": pl.Float64, "auc": pl.Float64})


def leaderboard(suite: Suite, data: Data) -> pl.DataFrame:
    """Per cell and recipe: mean and IQM of final accuracy and mean AUC with 95% bootstrap intervals,
    and the probability of improvement over the baseline with its interval and Mann–Whitney p.

    mark: `*` when the two-sided Mann–Whitney p < 0.05; `+` when only the stratified bootstrap
    interval of P(improvement) excludes 0.5 (rliable's reading, liberal with few seeds); else empty.
    """
    runs = per_run(data)
    base = baseline(suite)
    counts = data.runs.group_by("cell", "recipe").agg(
        pl.len().alias("expected"), (pl.col("status") == "finished").sum().alias("n"),
        (pl.col("status") == "diverged").sum().alias("diverged"), (pl.col("status") == "failed").sum().alias("failed"),
        (pl.col("status") == "missing").sum().alias("missing"))
    rows = []
    for cell in [c.name for c in suite.cells]:
        ref = runs.filter((pl.col("cell") == cell) & (pl.col("recipe") == base))
        for recipe in suite.recipes:
            r = runs.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
            acc, auc, ref_acc = r["acc"].to_numpy(), r["auc"].to_numpy(), ref["acc"].to_numpy()
            row = {"cell": cell, "recipe": recipe, "acc_mean": stats.mean(acc)}
            row["acc_lo"], row["acc_hi"] = stats.bootstrap_ci(acc)
            row["acc_iqm"] = stats.iqm(acc)
            row["iqm_lo"], row["iqm_hi"] = stats.bootstrap_ci(acc, stats.iqm)
            row["auc_mean"] = stats.mean(auc)
            row["auc_lo"], row["auc_hi"] = stats.bootstrap_ci(auc)
            if recipe == base:
                row.update(p_improve=math.nan, p_lo=math.nan, p_hi=math.nan, mw_p=math.nan, mark="baseline")
            else:
                row["p_improve"] = stats.prob_improvement(acc, ref_acc)
                row["p_lo"], row["p_hi"] = stats.prob_improvement_ci(acc, ref_acc)
                row["mw_p"] = stats.mann_whitney_p(acc, ref_acc)
                row["mark"] = significance(row["mw_p"], row["p_lo"], row["p_hi"])
            rows.append(row)
    table = pl.DataFrame(rows, schema={"cell": pl.String, "recipe": pl.String, **{
        k: pl.Float64 for k in ("acc_mean", "acc_lo", "acc_hi", "acc_iqm", "iqm_lo", "iqm_hi", "auc_mean", "auc_lo",
                                "auc_hi", "p_improve", "p_lo", "p_hi", "mw_p")}, "mark": pl.String})
    table = table.with_columns(pl.col(pl.Float64).fill_nan(None))  # NaN would sort first; null sorts last
    return (counts.join(table, on=["cell", "recipe"], how="right")
            .select("cell", "recipe", "n", "expected", "diverged", "failed", "missing", *table.columns[2:])
            .sort(["cell", "acc_mean", "recipe"], descending=[False, True, False], nulls_last=True))


def significance(mw_p: float, p_lo: float, p_hi: float) -> str:
    if math.isfinite(mw_p) and mw_p < MW_ALPHA:
        return "*"
    if math.isfinite(p_lo) and (p_lo > 0.5 or p_hi < 0.5):
        return "+"
    return ""


def sigmoid_fits(suite: Suite, data: Data) -> pl.DataFrame:
    """ScaleRL's fit per cell and recipe over the pooled evaluations of its finished seeds.

    R0 is the mean accuracy at compute 0 (the warm start); the fit uses the points with C > 0.
    """
    ev = finished(data.evals)
    rows = []
    for cell in [c.name for c in suite.cells]:
        for recipe in suite.recipes:
            g = ev.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
            r0 = stats.mean(g.filter(pl.col("fraction") == 0)["acc"].to_numpy())
            pos = g.filter(pl.col("flops") > 0)
            fit = stats.fit_sigmoid(pos["flops"].to_numpy(), pos["acc"].to_numpy(), r0)
            rows.append({"cell": cell, "recipe": recipe, "n_points": fit.n_points, "R0": fit.R0,
                         "A": fit.A, "A_lo": fit.A_ci[0], "A_hi": fit.A_ci[1],
                         "B": fit.B, "B_lo": fit.B_ci[0], "B_hi": fit.B_ci[1],
                         "C_mid": fit.C_mid, "C_mid_lo": fit.C_mid_ci[0], "C_mid_hi": fit.C_mid_ci[1],
                         "identifiable": fit.identifiable, "reason": fit.reason})
    return pl.DataFrame(rows, schema={"cell": pl.String, "recipe": pl.String, "n_points": pl.Int64, **{
        k: pl.Float64 for k in ("R0", "A", "A_lo", "A_hi", "B", "B_lo", "B_hi", "C_mid", "C_mid_lo", "C_mid_hi")},
        "identifiable": pl.Boolean, "reason": pl.String})


def length_bias(suite: Suite, data: Data) -> pl.DataFrame:
    """Per cell, recipe and answer kind (correct / incorrect): the slope of held-out mean length
    against the fraction of the budget (tokens per whole budget, least squares over a run's eval
    points), and the incorrect − correct gap averaged over those points; means over finished seeds
    with 95% bootstrap intervals."""
    ev = finished(data.evals)
    per = []
    for (cell, recipe, seed), g in ev.group_by("cell", "recipe", "seed", maintain_order=True):
        x = g["fraction"].to_numpy()
        c, w = g["len_correct"].to_numpy(), g["len_incorrect"].to_numpy()
        per.append({"cell": cell, "recipe": recipe, "seed": seed, "slope_correct": stats.linear_slope(x, c),
                    "slope_incorrect": stats.linear_slope(x, w), "gap": stats.mean(w - c)})
    per_df = pl.DataFrame(per, schema={"cell": pl.String, "recipe": pl.String, "seed": pl.Int64,
                                       "slope_correct": pl.Float64, "slope_incorrect": pl.Float64, "gap": pl.Float64})
    rows = []
    for cell in [c.name for c in suite.cells]:
        for recipe in suite.recipes:
            g = per_df.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
            row = {"cell": cell, "recipe": recipe, "n": g.height}
            for col in ("slope_correct", "slope_incorrect", "gap"):
                v = g[col].to_numpy()
                row[col] = stats.mean(v)
                row[f"{col}_lo"], row[f"{col}_hi"] = stats.bootstrap_ci(v)
            rows.append(row)
    cols = [f"{c}{s}" for c in ("slope_correct", "slope_incorrect", "gap") for s in ("", "_lo", "_hi")]
    return pl.DataFrame(rows, schema={"cell": pl.String, "recipe": pl.String, "n": pl.Int64,
                                      **{c: pl.Float64 for c in cols}})


def grad_weights(suite: Suite, max_new_tokens: int, ref_len: int, lengths: list[int]) -> pl.DataFrame:
    """Analytic per-token gradient weight of one completion of length L, for each recipe's aggregation.

    The batch is the suite's rollout batch (prompts_per_step × group_size rows); every other row
    has length ref_len. The loss is Σ_i w_i Σ_t ℓ_{i,t}, so a token of row i gets weight w_i
    (algorithms.aggregation); it is reported relative to token_mean at L = ref_len (1/N), so 1
    means "as much as an average token under token_mean". The advantage's own scale is left out.
    """
    import torch

    P, G = suite.train.prompts_per_step, suite.train.group_size
    B = P * G
    group = torch.arange(P).repeat_interleave(G)
    rows = []
    for recipe in suite.recipes:
        agg = suite.run_config(suite.cells[0], recipe, suite.seeds[0]).recipe.aggregation
        for L in lengths:
            T = max(L, ref_len)
            mask = torch.zeros(B, T, dtype=torch.float64)
            mask[:, :ref_len] = 1.0
            mask[0] = 0.0
            mask[0, :L] = 1.0
            w = agg.weights(mask, group, max_new_tokens)
            rows.append({"recipe": recipe, "aggregation": agg.mode, "length": L,
                         "weight": float(w[0]) * B * ref_len, "seq_weight": float(w[0]) * B * ref_len * L})
    return pl.DataFrame(rows, schema={"recipe": pl.String, "aggregation": pl.String, "length": pl.Int64,
                                      "weight": pl.Float64, "seq_weight": pl.Float64})


CLIP_METRICS = {"clip_low": "policy/clip_frac_low", "clip_high": "policy/clip_frac_high",
                "clip_seq": "policy/clip_frac_seq", "weight_capped": "policy/weight_capped_frac"}


def clipping(suite: Suite, data: Data) -> pl.DataFrame:
    """Per cell and recipe: optimizer updates per batch and mean clip fractions over finished runs' steps.

    note: `zero by construction` with one update per batch (ρ ≡ 1, ALGORITHMS.md convention 8)."""
    st = finished(data.steps)
    rows = []
    for cell in [c.name for c in suite.cells]:
        for recipe in suite.recipes:
            r = suite.run_config(next(c for c in suite.cells if c.name == cell), recipe, suite.seeds[0]).recipe
            g = st.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
            row = {"cell": cell, "recipe": recipe, "objective": r.objective.tag,
                   "updates_per_batch": r.needs.updates_per_batch}
            for k, m in CLIP_METRICS.items():
                row[k] = stats.mean(g[m].to_numpy()) if g.height else math.nan
            row["note"] = ("zero by construction: one update per batch" if r.needs.updates_per_batch == 1
                           else f"{r.needs.updates_per_batch} updates per batch")
            rows.append(row)
    return pl.DataFrame(rows, schema={"cell": pl.String, "recipe": pl.String, "objective": pl.String,
                                      "updates_per_batch": pl.Int64, **{k: pl.Float64 for k in CLIP_METRICS},
                                      "note": pl.String})


def recipe_diffs(suite: Suite) -> pl.DataFrame:
    """Each recipe's parts (suite overrides applied) as field-by-field differences from the baseline's.

    Training settings overridden per recipe (train.*) are included with a `train.` prefix."""
    base = baseline(suite)
    cell = suite.cells[0]
    ref = suite.run_config(cell, base, suite.seeds[0])
    ref_train = flatten(ref.to_dict()["train"])
    rows = []
    for recipe in suite.recipes:
        cfg = suite.run_config(cell, recipe, suite.seeds[0])
        if recipe != base:
            for k, (mine, theirs) in cfg.recipe.diff(ref.recipe).items():
                rows.append({"recipe": recipe, "field": k, "baseline": _show(theirs), "value": _show(mine)})
        train = flatten(cfg.to_dict()["train"])
        for k in sorted(train.keys() | ref_train.keys()):
            if train.get(k) != ref_train.get(k):
                rows.append({"recipe": recipe, "field": f"train.{k}", "baseline": _show(ref_train.get(k)),
                             "value": _show(train.get(k))})
    return pl.DataFrame(rows, schema={"recipe": pl.String, "field": pl.String, "baseline": pl.String,
                                      "value": pl.String})


def _show(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return format(v, "g")
    return str(v)


def problems(data: Data) -> pl.DataFrame:
    """Expected runs without a finished record: diverged, failed and missing, never dropped silently."""
    return (data.runs.filter(pl.col("status") != "finished")
            .select("cell", "recipe", "seed", "run_id", "status", "steps_done", "spent", "reason"))


def runs_table(data: Data) -> pl.DataFrame:
    """Every expected run with its status (the manifest's run ids)."""
    return data.runs.select("cell", "recipe", "seed", "run_id", "status", "steps_done", "spent", "reason")


def curve_frame(data: Data, value_cols: list[str], frame: str = "steps") -> pl.DataFrame:
    """Finished runs' curves in long form (cell, recipe, seed, x, metric, value) for the figures."""
    df = finished(getattr(data, frame))
    x = "frac" if frame == "steps" else "fraction"
    return (df.select("cell", "recipe", "rank", "seed", pl.col(x).alias("x"), "flops", *value_cols)
            .unpivot(index=["cell", "recipe", "rank", "seed", "x", "flops"], variable_name="metric")
            .with_columns(pl.col("value").fill_nan(None)))

