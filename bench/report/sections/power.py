"""Power: what the suite can decide, with warm-start variance where a cell has several warm starts."""
from __future__ import annotations

import math

import polars as pl

from bench.report import stats
from bench.report import tables as T
from bench.report.context import Context
from bench.report.prose import seeds_cell
from bench.report.registry import section
from bench.report.render import Heading, Para, num, table


def _tables(ctx: Context) -> dict:
    return {"power": T.power(ctx.suite, ctx.data), "warmstart_variance": T.warmstart_variance(ctx.suite, ctx.data)}


@section("power", tables=_tables, writes=("power", "warmstart_variance"), needs=("leaderboard",))
def power(ctx: Context) -> list:
    """What the suite can decide: per cell and metric, the MDD, the seeds for the margin and the verdict counts."""
    pw = ctx.tables["power"]
    rs = ctx.suite.report
    out = [Heading(2, "Power: what this suite can decide"),
           Para("Per cell and metric, over the comparisons with the baseline: the pooled standard deviation of the "
                "paired per-seed differences, the minimum detectable difference (MDD) of the paired t-test at 80% "
                "power and α = 0.05 with the cell's seeds (noncentral t with n − 1 degrees of freedom; Holm's "
                "correction makes the first comparison of a cell stricter still), the seeds that would detect "
                f"{rs.margin:g}, and how many comparisons found a difference (Holm p < 0.05), were shown equivalent "
                f"within ±{rs.margin:g}, or are undecided. A metric with a smaller MDD separates recipes at less cost.")]
    out.append(table(pw, {
        "cell": lambda r: r["cell"], "metric": lambda r: r["metric"] + (" (primary)" if r["primary"] else ""),
        "seeds": lambda r: str(r["seeds"]), "paired SD": lambda r: num(r["sd_pooled"], ".4f"),
        "MDD": lambda r: num(r["mdd"], ".3f"), f"seeds for {rs.margin:g}": lambda r: seeds_cell(r["seeds_for_margin"]),
        "different": lambda r: str(r["different"]), "equivalent": lambda r: str(r["equivalent"]),
        "undecided": lambda r: f"{r['undecided']} of {r['comparisons']}"}))
    if "warmstart_variance" in ctx.tables:
        out += _warmstart_variance(ctx)
    return out


def _warmstart_variance(ctx: Context) -> list:
    t = ctx.tables["warmstart_variance"]
    out = [Heading(3, "Warm-start variance"),
           Para("Cells whose seeds start from several independently trained warm starts (seed s from warm start "
                "s mod N; every recipe of a seed from the same one, so comparisons stay paired). share of level: the "
                "share of the variance of a recipe's primary metric that lies between warm starts (one-way "
                f"random-effects ANOVA); share of difference: the same for its paired difference from {ctx.base}, "
                "which is what the verdicts rest on; then that difference on each warm start, and whether every "
                "warm start gives it the sign of the pooled mean.")]
    out.append(table(t, {
        "cell": lambda r: r["cell"], "recipe": lambda r: r["recipe"], "warm starts": lambda r: str(r["warmstarts"]),
        "seeds": lambda r: str(r["seeds"]), "share of level": lambda r: num(r["share_level"], ".2f"),
        "share of difference": lambda r: num(r["share_diff"], ".2f"),
        f"difference from {ctx.base} by warm start": lambda r: r["diff_by_warmstart"] or "-",
        "same sign on each": lambda r: "-" if r["same_sign"] is None else ("yes" if r["same_sign"] else "no")}))
    board = ctx.tables["leaderboard"]
    for cell in t["cell"].unique(maintain_order=True).to_list():
        c = t.filter((pl.col("cell") == cell) & pl.col("same_sign").is_not_null())
        decided = board.filter((pl.col("cell") == cell) & pl.col("verdict").is_in(["better", "worse"]))["recipe"]
        flips = [r for r in c.filter(~pl.col("same_sign"))["recipe"].to_list() if r in decided.to_list()]
        share = stats.mean(c["share_diff"].to_numpy())
        out.append(Para(f"{cell}: warm starts hold {num(share, '.0%') if math.isfinite(share) else '-'} of the variance "
                        "of the paired differences (mean over recipes); "
                        + (f"decided verdicts that change sign on some warm start: {', '.join(flips)}."
                           if flips else "every decided verdict has the same sign on every warm start.")))
    return out
