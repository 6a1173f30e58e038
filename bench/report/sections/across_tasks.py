"""Across tasks: the cross-task aggregate, rliable style (only for suites whose cells span ≥ 2 tasks)."""
from __future__ import annotations


import polars as pl

from bench.report import tables as T
from bench.report.context import Context
from bench.report.registry import section
from bench.report.render import Heading, Para, Table, ci, table


def _tables(ctx: Context) -> dict:
    across = T.across_tasks(ctx.suite, ctx.data, ctx.tables["leaderboard"])
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
