"""Across tasks: the cross-task aggregate, rliable style (only for suites whose cells span ≥ 2 tasks)."""
from __future__ import annotations

import math

import numpy as np
import polars as pl

from bench.report.context import Context
from bench.report.data import Data, finished
from bench.report.registry import section
from bench.report.render import Heading, Para, Table, ci, table
from bench.report.tables import baseline, per_run
from bench.suite import Suite


def task_groups(suite: Suite) -> list[tuple[str, list[str]]]:
    """Cells that differ only in their task, grouped by (scale, regime), for groups of >= 2 tasks:
    [(label, [cell, ...])], label "scale nano" or "scale nano, regime 32mb"."""
    groups: dict[tuple, list[str]] = {}
    for c in suite.cells:
        groups.setdefault((c.scale, c.regime.name if c.regime else ""), []).append(c.name)
    return [(f"scale {s}" + (f", regime {r}" if r else ""), cells) for (s, r), cells in groups.items()
            if len({suite.cell(c).task for c in cells}) >= 2]


def across_tasks_table(suite: Suite, data: Data, board: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, dict] | None:
    """The cross-task aggregate (bench/report/aggregate.py) of each task group (task_groups): per recipe
    the IQM and mean of its primary metric normalised per task by the baseline's gain over the warm start
    (1 = the baseline's mean gain, 0 = the warm start), with stratified bootstrap intervals, and the
    paired probability of beating the baseline; the performance profiles; and per recipe a sentence on
    whether its per-task verdicts agree. None when no group spans two tasks or the primary metric is
    compute_to (a fraction of the budget, not a gain)."""
    from bench.report import aggregate as A

    groups = task_groups(suite)
    if not groups or suite.report.threshold is not None:
        return None
    runs, ev = per_run(suite, data), finished(data.evals)
    base = baseline(suite)
    rows, profiles, sentences = [], [], {}
    for label, cells in groups:
        task_of = {c: suite.cell(c).task for c in cells}
        scores = (runs.filter(pl.col("cell").is_in(cells))
                  .select(pl.col("cell").replace_strict(task_of).alias("task"), "recipe", "seed",
                          pl.col("primary").alias("score")))
        start = (ev.filter(pl.col("cell").is_in(cells) & (pl.col("fraction") == 0))
                 .group_by(pl.col("cell").replace_strict(task_of).alias("task")).agg(pl.col("acc").mean().alias("start")))
        how = "baseline_gain"
        try:
            norm = A.normalise(scores, base, start=start, how=how)
        except ValueError:  # the baseline gained nothing on some task: a shared scale needs another anchor
            how = "minmax"
            norm = A.normalise(scores, base, how=how)
        agg = {s: A.aggregate(norm, stat=s) for s in ("iqm", "mean")}
        for recipe in suite.recipes:
            iqm, mean = (agg[s].filter(pl.col("recipe") == recipe) for s in ("iqm", "mean"))
            if not iqm.height:
                continue
            p = A.paired_probability_of_improvement(norm, recipe, base) if recipe != base else (math.nan,) * 3
            rows.append({"group": label, "normalised": how, "recipe": recipe, "tasks": iqm["n_tasks"][0],
                         "runs": iqm["n_runs"][0], "iqm": iqm["value"][0], "iqm_lo": iqm["lo"][0],
                         "iqm_hi": iqm["hi"][0], "mean": mean["value"][0], "mean_lo": mean["lo"][0],
                         "mean_hi": mean["hi"][0], "p_improve": p[0], "p_improve_lo": p[1], "p_improve_hi": p[2]})
        prof = A.performance_profile(norm, np.linspace(-0.5, 2.0, 26) if how == "baseline_gain" else np.linspace(0, 1, 21))
        profiles.append(prof.with_columns(pl.lit(label).alias("group")))
        verdicts = (board.filter(pl.col("cell").is_in(cells))
                    .select(pl.col("cell").replace_strict(task_of).alias("task"), "recipe", "verdict"))
        sentences[label] = {r: v["sentence"] for r, v in A.task_verdicts(verdicts, baseline=base).items()}
    if not rows:
        return None
    return pl.DataFrame(rows), pl.concat(profiles), sentences


def _tables(ctx: Context) -> dict:
    across = across_tasks_table(ctx.suite, ctx.data, ctx.tables["leaderboard"])
    if across is None:
        return {}
    table_, profiles, ctx.across_sentences = across
    return {"across_tasks": table_, "performance_profiles": profiles}


@section("across_tasks", tables=_tables, writes=("across_tasks", "performance_profiles"), needs=("leaderboard",),
         figures=("across_tasks*.png",))
def across_tasks(ctx: Context) -> list:
    """Cross-task aggregate, rliable style (only for suites whose cells span >= 2 tasks)."""
    if "across_tasks" not in ctx.tables:
        return []
    from bench.report import aggregate as A

    t, prof = ctx.tables["across_tasks"], ctx.tables["performance_profiles"]
    out = [Heading(2, "Across tasks"),
           Para("Each run's primary metric is normalised per task: (score − the warm start's) / (the mean of "
                f"{ctx.base}'s − the warm start's), so 1 is {ctx.base}'s mean gain on that task and 0 no gain over "
                "the warm start (where the baseline gained nothing on some task, min–max over that task's runs "
                "instead; the table says which). IQM: the mean of the middle half of all (task, seed) scores; mean: "
                "the mean over tasks of the per-task means; 95% stratified bootstrap intervals (seeds resampled "
                f"within each task). P(> {ctx.base}): the share of paired seeds on which the recipe beats "
                f"{ctx.base}, averaged over tasks (rliable's probability of improvement, paired), with its bootstrap "
                "interval. Performance profile: the share of runs whose normalised score exceeds τ (Agarwal et al. "
                "2021, arXiv 2108.13264).")]
    for group in t["group"].unique(maintain_order=True).to_list():
        g = t.filter(pl.col("group") == group)
        agg = g.select("recipe", pl.col("iqm").alias("value"), pl.col("iqm_lo").alias("lo"), pl.col("iqm_hi").alias("hi"),
                       pl.col("tasks").alias("n_tasks"), pl.col("runs").alias("n_runs")).with_columns(pl.lit("iqm").alias("stat"))
        p = prof.filter(pl.col("group") == group).drop("group")
        order = [r for r in ctx.suite.recipes if r in set(g["recipe"])]
        ref = 1.0 if g["normalised"][0] == "baseline_gain" else None
        name = "across_tasks.png" if len(t["group"].unique()) == 1 else f"across_tasks_{_slug(group)}.png"
        out.append(ctx.figure(name, A.figure(agg, p, order, ctx.colors, reference=ref),
                              f"{group}: IQM of the normalised primary metric per recipe with its 95% stratified "
                              "bootstrap interval (left) and performance profiles with bootstrap bands (right)."))
        out.append(table(g, {
            "recipe": lambda r: r["recipe"], "tasks": lambda r: str(r["tasks"]), "runs": lambda r: str(r["runs"]),
            "IQM [95% CI]": lambda r: ci(r["iqm"], r["iqm_lo"], r["iqm_hi"]),
            "mean [95% CI]": lambda r: ci(r["mean"], r["mean_lo"], r["mean_hi"]),
            f"P(> {ctx.base}) [95% CI]": lambda r: ci(r["p_improve"], r["p_improve_lo"], r["p_improve_hi"], ".2f"),
            "normalised": lambda r: r["normalised"]}))
        sentences = ctx.across_sentences.get(group, {})
        if sentences:
            same = [r for r, s in sentences.items() if "every task" in s]
            flips = [r for r, s in sentences.items() if "flips" in s]
            out.append(Para(f"{group}: the verdict against {ctx.base} holds on every task for "
                            f"{', '.join(same) or 'no recipe'}; it flips between tasks for {', '.join(flips) or 'no recipe'}."))
            out.append(Table(("recipe", "per-task verdicts"), tuple((r, sentences[r]) for r in sentences)))
    return out


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text).strip("_")
