"""Length bias: answer lengths, their slopes and gaps, and the aggregation's gradient weight by length."""
from __future__ import annotations


import numpy as np
import polars as pl

from bench.report import figures as F
from bench.report import tables as T
from bench.report.context import Context
from bench.report.data import finished, max_new_tokens
from bench.report.registry import section
from bench.report.render import Heading, Para, ci, num, table


def _tables(ctx: Context) -> dict:
    """The length-bias table and the aggregation weights of one completion of length 1..L_max beside
    others of the cell's mean training length (ctx.grad_ref)."""
    s, d = ctx.suite, ctx.data
    lmax = max_new_tokens(s, d, ctx.cells[0])
    lens = finished(d.steps).filter(pl.col("cell") == ctx.cells[0])["len/mean"].drop_nans().drop_nulls()
    ref_len = int(min(lmax, max(1, round(float(np.mean(lens.to_numpy())))))) if lens.len() else max(1, lmax // 3)
    ctx.grad_ref = (ref_len, lmax)
    return {"length_bias": T.length_bias(s, d), "grad_weights": T.grad_weights(s, lmax, ref_len, list(range(1, lmax + 1)), d)}


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
