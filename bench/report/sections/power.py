"""Power: what the suite can decide, with warm-start variance where a cell has several warm starts."""
from __future__ import annotations

import math

import numpy as np
import polars as pl

from bench.report import stats
from bench.report.context import Context
from bench.report.data import Data
from bench.report.prose import seeds_cell
from bench.report.registry import section
from bench.report.render import Heading, Para, num, table
from bench.report.tables import METRICS, baseline, by_seed, per_run
from bench.suite import Suite


def power_table(suite: Suite, data: Data) -> pl.DataFrame:
    """Per cell and metric (the primary first, then final, auc, plateau): what the comparisons with
    the baseline could detect. sd_pooled is the root mean of the paired-difference variances over
    the cell's comparisons; mdd the difference the paired t-test detects with 80% power at
    α = 0.05 from the cell's seeds with that spread; seeds_for_margin the seeds that would detect
    [report] margin; decided counts comparisons with Holm-adjusted p < 0.05 or equivalent within
    ±margin, of `comparisons`."""
    runs = per_run(suite, data)
    base = baseline(suite)
    rs = suite.report
    rows = []
    metrics = ["primary"] + [m for m in METRICS if m != rs.primary]
    for cell in [c.name for c in suite.cells]:
        ref_by = {m: by_seed(runs, cell, base, m) for m in metrics}
        for m in metrics:
            sds, ns, ps, eqs = [], [], [], []
            for recipe in suite.cell_recipes(cell):
                if recipe == base:
                    continue
                x, y = stats.paired(by_seed(runs, cell, recipe, m), ref_by[m])
                t = stats.paired_t(x, y)
                ps.append(t.p)
                eqs.append(stats.equivalent(x, y, rs.margin))
                if t.n >= 2 and math.isfinite(t.sd):
                    sds.append(t.sd)
                    ns.append(t.n)
            sd = math.sqrt(sum(v * v for v in sds) / len(sds)) if sds else math.nan
            n = min(ns) if ns else 0
            found = stats.decide(ps)
            rows.append({"cell": cell, "metric": rs.primary if m == "primary" else m, "primary": m == "primary",
                         "seeds": n, "comparisons": len(ps), "sd_pooled": sd, "mdd": stats.paired_mdd(sd, n),
                         "seeds_for_margin": stats.seeds_needed(rs.margin, sd),
                         "different": sum(found), "equivalent": sum(e and not f for e, f in zip(eqs, found)),
                         "undecided": sum(not e and not f for e, f in zip(eqs, found))})
    return pl.DataFrame(rows, schema={"cell": pl.String, "metric": pl.String, "primary": pl.Boolean,
                                      "seeds": pl.Int64, "comparisons": pl.Int64, "sd_pooled": pl.Float64,
                                      "mdd": pl.Float64, "seeds_for_margin": pl.Float64, "different": pl.Int64,
                                      "equivalent": pl.Int64, "undecided": pl.Int64})


def between_share(values: list[float], groups: list[int]) -> float:
    """The share of the variance of `values` between `groups` (one-way random-effects ANOVA, unbalanced:
    σ²_between = max(0, (MSB − MSW) / n0)); NaN with fewer than 2 groups or no replication within them."""
    by: dict[int, list[float]] = {}
    for v, g in zip(values, groups):
        if math.isfinite(v):
            by.setdefault(g, []).append(v)
    sizes = [len(v) for v in by.values()]
    k, n = len(by), sum(sizes)
    if k < 2 or n - k < 1:
        return math.nan
    grand = sum(sum(v) for v in by.values()) / n
    msb = sum(len(v) * (np.mean(v) - grand) ** 2 for v in by.values()) / (k - 1)
    msw = sum(((np.asarray(v) - np.mean(v)) ** 2).sum() for v in by.values()) / (n - k)
    n0 = (n - sum(s * s for s in sizes) / n) / (k - 1)
    between = max(0.0, (msb - msw) / n0)
    return float(between / (between + msw)) if between + msw > 0 else math.nan


def warmstart_variance(suite: Suite, data: Data) -> pl.DataFrame | None:
    """Per cell with several warm starts (a regime's `warmstarts`) and recipe: the share of the variance
    of its primary metric between warm starts (share_level), the same for its paired difference from
    the baseline (share_diff: what the verdicts rest on), that difference's mean on each warm start,
    and whether every warm start gives it the sign of the pooled mean. None when no cell has two."""
    runs = per_run(suite, data)
    ws = {rid: cfg.warmstart.seed for rid, cfg in data.cfgs.items()}
    base = baseline(suite)
    rows = []
    for cell in (c.name for c in suite.cells):
        r = runs.filter(pl.col("cell") == cell).with_columns(
            pl.col("run_id").replace_strict(ws, default=None, return_dtype=pl.Int64).alias("ws"))
        if r["ws"].n_unique() < 2:
            continue
        base_by = by_seed(r, cell, base, "primary")
        seed_ws = dict(zip(r["seed"].to_list(), r["ws"].to_list()))
        for recipe in suite.cell_recipes(cell):
            rr = r.filter(pl.col("recipe") == recipe)
            row = {"cell": cell, "recipe": recipe, "warmstarts": rr["ws"].n_unique(), "seeds": rr.height,
                   "share_level": between_share(rr["primary"].to_list(), rr["ws"].to_list()),
                   "share_diff": math.nan, "diff_by_warmstart": "", "same_sign": None}
            if recipe != base:
                mine = by_seed(rr, cell, recipe, "primary")
                seeds = sorted(s for s in mine if s in base_by)
                diffs = [mine[s] - base_by[s] for s in seeds]
                groups = [seed_ws[s] for s in seeds]
                row["share_diff"] = between_share(diffs, groups)
                means = {w: stats.mean([d for d, g in zip(diffs, groups) if g == w]) for w in sorted(set(groups))}
                pooled = stats.mean(diffs)
                row["diff_by_warmstart"] = " ".join(f"{w}:{m:+.4f}" for w, m in means.items())
                row["same_sign"] = bool(all(np.sign(m) == np.sign(pooled) for m in means.values()))
            rows.append(row)
    if not rows:
        return None
    return pl.DataFrame(rows, schema={"cell": pl.String, "recipe": pl.String, "warmstarts": pl.Int64,
                                      "seeds": pl.Int64, "share_level": pl.Float64, "share_diff": pl.Float64,
                                      "diff_by_warmstart": pl.String, "same_sign": pl.Boolean})


def _tables(ctx: Context) -> dict:
    return {"power": power_table(ctx.suite, ctx.data), "warmstart_variance": warmstart_variance(ctx.suite, ctx.data)}


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
