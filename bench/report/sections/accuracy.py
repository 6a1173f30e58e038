"""Accuracy against compute: the curves and ScaleRL's sigmoid fits."""
from __future__ import annotations

import math

import polars as pl

from bench.report import figures as F
from bench.report import stats
from bench.report import tables as T
from bench.report.context import Context
from bench.report.data import Data, finished
from bench.report.prose import cap
from bench.report.registry import section
from bench.report.render import Heading, Para, ci, num, table
from bench.suite import Suite


def sigmoid_fits(suite: Suite, data: Data) -> pl.DataFrame:
    """ScaleRL's fit per cell and recipe over the pooled evaluations of its finished seeds.

    R0 is the mean accuracy at compute 0 (the warm start); the fit uses the points with C > 0, and
    R_max is the highest of them (an asymptote whose upper bound exceeds R_max + stats.A_SLACK is
    not identified).
    """
    ev = finished(data.evals)
    rows = []
    for cell in [c.name for c in suite.cells]:
        for recipe in suite.cell_recipes(cell):
            g = ev.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
            r0 = stats.mean(g.filter(pl.col("fraction") == 0)["acc"].to_numpy())
            pos = g.filter(pl.col("flops") > 0)
            fit = stats.fit_sigmoid(pos["flops"].to_numpy(), pos["acc"].to_numpy(), r0)
            # a fit that is not identifiable is ill-conditioned: the points do not determine its values,
            # so their digits are the optimizer's path, which moves with the CPU's vector math (seen:
            # A 0.663 on an AMD EPYC, 0.662 on an Intel Xeon, at 3 digits): left out, with their
            # intervals, and the reason says why
            row = {"cell": cell, "recipe": recipe, "n_points": fit.n_points, "R0": fit.R0, "R_max": fit.R_max}
            for name, value, (lo, hi) in (("A", fit.A, fit.A_ci), ("B", fit.B, fit.B_ci), ("C_mid", fit.C_mid, fit.C_mid_ci)):
                if not fit.identifiable:
                    value = lo = hi = math.nan
                row |= {name: _round_sig(value), f"{name}_lo": _round_sig(lo), f"{name}_hi": _round_sig(hi)}
            rows.append({**row, "identifiable": fit.identifiable, "reason": fit.reason})
    return pl.DataFrame(rows, schema={"cell": pl.String, "recipe": pl.String, "n_points": pl.Int64, **{
        k: pl.Float64 for k in ("R0", "R_max", "A", "A_lo", "A_hi", "B", "B_lo", "B_hi", "C_mid", "C_mid_lo",
                                "C_mid_hi")},
        "identifiable": pl.Boolean, "reason": pl.String})


def _round_sig(x: float, digits: int = 4) -> float:
    """A least-squares fit's values to 4 significant digits: the optimizer's last digits differ
    between BLAS builds (seen: B's lower bound -0.154706 here, -0.1547 there), and the report's
    bytes must not."""
    if not math.isfinite(x) or x == 0:
        return x
    return float(f"{x:.{digits - 1}e}")


def _tables(ctx: Context) -> dict:
    return {"sigmoid_fits": sigmoid_fits(ctx.suite, ctx.data)}


@section("accuracy", tables=_tables, writes=("sigmoid_fits",), figures=("accuracy.png",))
def accuracy(ctx: Context) -> list:
    """Accuracy against compute and ScaleRL's sigmoid fit per recipe."""
    fits = ctx.tables["sigmoid_fits"]
    out = [Heading(2, "Accuracy against compute"),
           ctx.figure("accuracy.png", F.accuracy_vs_compute(finished(ctx.data.evals), fits, ctx.cells, ctx.budgets,
                                                            ctx.colors, ctx.xlabels, ctx.suite.report.accuracy_text),
                      f"{cap(ctx.suite.report.accuracy_text)} at each evaluation of the schedule, drawn at its nominal "
                      "fraction of the budget (the compute actually spent is up to one optimizer step more): mean over "
                      "seeds, band from the lowest to the highest seed; dashed: the sigmoid fit where it is identified."),
           Heading(3, "Sigmoid fit (ScaleRL)"),
           Para("ScaleRL (arXiv 2510.13786) fits R_C = R0 + (A − R0) / (1 + (C_mid / C)^B) to accuracy R against "
                "compute C: A is the asymptote, B the efficiency, C_mid the compute at half the gain. R0 is fixed at "
                "the mean accuracy at C = 0; A, B and C_mid are fitted by least squares to the pooled evaluations "
                "of the finished seeds (C > 0, the FLOPs each evaluation actually spent), with 95% intervals from "
                "the fit's covariance. A fit is reported as not identifiable when it fails, a parameter sits on its "
                "bound, C_mid lies outside the observed compute, A's interval contains R0, A's upper bound lies more "
                f"than {stats.A_SLACK:g} above the highest accuracy observed (R_max: a ceiling the points did not "
                "reach is extrapolated, not measured), or an interval is too wide (A wider than 0.5, C_mid wider than "
                "2 decades, B spanning more than 20× or 0); its values are then left out, here and in the CSV: the "
                "points do not determine them, and their digits would be the optimizer's, which differ between CPUs."),
           Para(_eval_points_text(ctx))]
    for cell in ctx.cells:
        out.append(Heading(3, f"{cell}: sigmoid fits"))
        out.append(table(fits.filter(pl.col("cell") == cell), {
            "recipe": lambda r: r["recipe"], "points": lambda r: str(r["n_points"]), "R0": lambda r: num(r["R0"]),
            "R_max": lambda r: num(r["R_max"]),
            "A [95% CI]": lambda r: ci(r["A"], r["A_lo"], r["A_hi"]) if r["identifiable"] else "-",
            "B [95% CI]": lambda r: ci(r["B"], r["B_lo"], r["B_hi"], ".2f") if r["identifiable"] else "-",
            "C_mid [95% CI]": lambda r: ci(r["C_mid"], r["C_mid_lo"], r["C_mid_hi"], ".2e") if r["identifiable"] else "-",
            "fit": lambda r: "identified" if r["identifiable"] else f"not identified: {r['reason']}"}))
    return out


def _eval_points_text(ctx: Context) -> str:
    """The evaluations each run actually has (schedule points one step passes together merge) and how
    far the last one lands past the budget."""
    e = ctx.suite.eval
    sched = (f"eval.spacing = \"log\" from {e.first:g}, {e.points} points" if e.spacing == "log"
             else f"eval.every = {e.every:g}")
    named = len(e.fractions)
    runs = ctx.runs if ctx.runs is not None else T.per_run(ctx.suite, ctx.data)
    parts = []
    for cell in ctx.cells:
        n = runs.filter(pl.col("cell") == cell)["evals"]
        if not n.len():
            continue
        lo, hi, med = int(n.min()), int(n.max()), float(n.median())
        parts.append(f"{cell} {lo}" + (f"–{hi} (median {med:g})" if lo != hi else ""))
    text = (f"The schedule names {named} evaluation points, 0 included (the suite's {sched}), but an evaluation runs "
            "after an optimizer step, and schedule points that one step passes together share one evaluation. "
            "Distinct evaluation steps per run, the warm start's at step 0 included: " + "; ".join(parts) + ". "
            "AUC, plateau and these fits place each evaluation at the compute it actually spent (the ledger's, as a "
            "fraction of the budget), not at its schedule point")
    ev = finished(ctx.data.evals)
    if ev.height:
        over = float(ev.group_by("cell", "run_id").agg(pl.col("spent").max())["spent"].max()) - 1
        if over > 1e-9:
            text += (f"; the last evaluation follows the step that crosses the budget, up to {over:.0%} past it, and "
                     "AUC interpolates the curve at the budget")
    text += ". Three free parameters identify a curve only when points sit on both sides of its bend."
    if e.spacing == "linear":
        text += (" A curve that rises before the first evaluation leaves the bend unseen: `eval.spacing = \"log\"` "
                 "places the points densely early (e.g. 0.01, 0.02, 0.04, … 1).")
    return text
