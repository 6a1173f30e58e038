"""Length bias: answer lengths, their slopes and gaps, and the aggregation's gradient weight by length."""
from __future__ import annotations

import numpy as np
import polars as pl

from bench.report import figures as F
from bench.report import stats
from bench.report.context import Context
from bench.report.data import Data, finished, max_new_tokens, run_config
from bench.report.registry import section
from bench.report.render import Heading, Para, ci, num, table
from bench.suite import Suite


def length_bias(suite: Suite, data: Data) -> pl.DataFrame:
    """Per cell, recipe and answer kind (correct / incorrect): the slope of held-out mean length
    against the fraction of the budget spent (tokens per whole budget, least squares over a run's
    eval points), and the incorrect − correct gap averaged over those points; means over finished
    seeds with 95% bootstrap intervals."""
    ev = finished(data.evals)
    per = []
    for (cell, recipe, seed), g in ev.group_by("cell", "recipe", "seed", maintain_order=True):
        x = g["spent"].to_numpy()
        c, w = g["len_correct"].to_numpy(), g["len_incorrect"].to_numpy()
        per.append({"cell": cell, "recipe": recipe, "seed": seed, "slope_correct": stats.linear_slope(x, c),
                    "slope_incorrect": stats.linear_slope(x, w), "gap": stats.mean(w - c)})
    per_df = pl.DataFrame(per, schema={"cell": pl.String, "recipe": pl.String, "seed": pl.Int64,
                                       "slope_correct": pl.Float64, "slope_incorrect": pl.Float64, "gap": pl.Float64})
    rows = []
    for cell in [c.name for c in suite.cells]:
        for recipe in suite.cell_recipes(cell):
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


def grad_weights(suite: Suite, max_new_tokens: int, ref_len: int, lengths: list[int],
                 data: Data | None = None) -> pl.DataFrame:
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
        agg = run_config(suite, data, suite.cells[0].name, recipe).recipe.aggregation
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


def _tables(ctx: Context) -> dict:
    """The length-bias table and the aggregation weights of one completion of length 1..L_max beside
    others of the cell's mean training length (ctx.grad_ref)."""
    s, d = ctx.suite, ctx.data
    lmax = max_new_tokens(s, d, ctx.cells[0])
    lens = finished(d.steps).filter(pl.col("cell") == ctx.cells[0])["len/mean"].drop_nans().drop_nulls()
    ref_len = int(min(lmax, max(1, round(float(np.mean(lens.to_numpy())))))) if lens.len() else max(1, lmax // 3)
    ctx.grad_ref = (ref_len, lmax)
    return {"length_bias": length_bias(s, d), "grad_weights": grad_weights(s, lmax, ref_len, list(range(1, lmax + 1)), d)}


@section("length", tables=_tables, writes=("length_bias", "grad_weights"), figures=("length_*.png", "grad_weights.png"))
def length(ctx: Context) -> list:
    """Lengths of correct and incorrect answers, their slopes and gap, and the gradient weight by length."""
    bias, w = ctx.tables["length_bias"], ctx.tables["grad_weights"]
    ev = finished(ctx.data.evals)
    out = [Heading(2, "Length bias"),
           Para("Mean length (tokens) of correct and of incorrect held-out answers at each evaluation point, per "
                "recipe: mean over seeds, band from the lowest to the highest seed.")]
    for cell in ctx.cells:
        name = f"length_{cell.replace('/', '_')}.png"
        out.append(ctx.figure(name, F.length_vs_compute(ev, cell, list(ctx.suite.recipes), ctx.budgets[cell],
                                                         ctx.xlabels[cell]),
                              f"{cell}: length of correct and incorrect answers against compute."))
    out.append(Para("Slope: least-squares slope of a run's mean length (correct or incorrect answers) against the "
                    "fraction of the budget spent, in tokens per whole budget (positive: answers grow). Gap: mean over "
                    "the run's evaluation points of incorrect − correct length. Means over finished seeds with 95% "
                    "bootstrap intervals."))
    for cell in ctx.cells:
        out.append(Heading(3, f"{cell}: slopes and gap"))
        out.append(table(bias.filter(pl.col("cell") == cell), {
            "recipe": lambda r: r["recipe"], "n": lambda r: str(r["n"]),
            "slope, correct": lambda r: ci(r["slope_correct"], r["slope_correct_lo"], r["slope_correct_hi"], ".2f"),
            "slope, incorrect": lambda r: ci(r["slope_incorrect"], r["slope_incorrect_lo"], r["slope_incorrect_hi"], ".2f"),
            "gap (incorrect − correct)": lambda r: ci(r["gap"], r["gap_lo"], r["gap_hi"], ".2f")}))
    out.append(ctx.figure("length_bias.png", F.length_bias(bias, ctx.cells, ctx.colors),
                          "Length slopes and the incorrect − correct gap per recipe, 95% bootstrap intervals."))
    ref_len, lmax = ctx.grad_ref
    out.append(Heading(3, "Aggregation: gradient weight by length"))
    out.append(Para(
        f"The loss is Σ_i w_i Σ_t ℓ_(i,t) (algorithms/aggregation.py), so every token of completion i gets gradient "
        f"weight w_i. Computed analytically for one completion of length L in a rollout batch of "
        f"{ctx.suite.train.prompts_per_step} prompts × {ctx.suite.train.group_size} completions whose other "
        f"completions have {ref_len} tokens (the mean training length in {ctx.cells[0]}), L_max = {lmax}; shown "
        "relative to token_mean's weight at L = that length. seq_mean_token_mean gives every completion the same "
        "total weight, so each token of a long completion counts less (long wrong answers are penalised less per "
        "token, the length bias Dr. GRPO names); token_mean and the sum modes weigh every token alike. The advantage's "
        "own scale (e.g. group std normalisation) is not included."))
    out.append(ctx.figure("grad_weights.png", F.grad_weights(w, ref_len, lmax),
                          "Per-token and whole-completion gradient weight against completion length, by aggregation."))
    show = sorted({1, ref_len // 2 or 1, ref_len, min(2 * ref_len, lmax), lmax})
    modes = w.filter(pl.col("length").is_in(show))
    out.append(table(
        modes.group_by("aggregation", maintain_order=True).agg(pl.col("recipe").unique(maintain_order=True),
                                                               pl.col("weight")),
        {"aggregation": lambda r: r["aggregation"], "recipes": lambda r: ", ".join(r["recipe"]),
         **{f"L={L}": _weight_at(i) for i, L in enumerate(show)}}))
    return out


def _weight_at(i: int):
    """The aggregation table's cell for the i-th length shown."""
    return lambda r: num(r["weight"][i], ".3g")
