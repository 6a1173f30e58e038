"""Leaderboard: every recipe against the baseline, paired by seed, with the equivalence margin
against the spread between recipes.
"""
from __future__ import annotations

import math

import polars as pl

from bench.report import figures as F
from bench.report import tables as T
from bench.report.context import Context
from bench.report.data import finished
from bench.report.prose import seeds_cell, span
from bench.report.registry import section
from bench.report.render import Heading, Para, ci, num, table
from bench.report.sections.coverage import coverage_columns, k_text, over_warm_starts, several_warm_starts


def _tables(ctx: Context) -> dict:
    return {"leaderboard": T.leaderboard(ctx.suite, ctx.data)}


@section("leaderboard", tables=_tables, writes=("leaderboard",), needs=("coverage",), figures=("leaderboard.png",))
def leaderboard(ctx: Context) -> list:
    """Every recipe against the baseline per cell, paired by seed, then the margin and the secondary metrics."""
    board = ctx.tables["leaderboard"]
    rs = ctx.suite.report
    sign = "" if rs.higher_is_better else " (lower is better)"
    out = [Heading(2, "Leaderboard"),
           Para(f"Sorted by the primary metric, {rs.primary}{sign}: mean over finished seeds with a 95% percentile "
                f"bootstrap interval. Δ is the paired difference from {ctx.base}: the mean over shared seeds of "
                f"recipe − {ctx.base} with its 95% paired t interval (seed s gives every recipe the same prompts, "
                "warm start and sampling seeds, so seed-to-seed variation cancels in the difference). p is the "
                "two-sided paired t-test, p_Holm its Holm adjustment over the cell's comparisons with the baseline. "
                "MDD is the difference that test would detect with 80% power at α = 0.05 given the observed spread "
                f"of the paired differences; \"seeds for {rs.margin:g}\" the seeds that would detect a difference of "
                f"{rs.margin:g}. Verdict: better or worse when p_Holm < 0.05 (marked `*`); equivalent when the 90% "
                f"paired interval lies inside ±{rs.margin:g} (two one-sided tests at α = 0.05); else undecided. "
                "Where the runs logged the evaluations to read them from, Δ greedy and Δ pass@K are the same paired "
                "contrast on greedy accuracy and on pass@K (`*`: Holm's p < 0.05 on that axis), and gain says what the "
                "difference is (skill, sharpening, collapse ...; see \"Skill, sharpening or collapse\"): the verdict "
                "reads the primary metric alone, so read it with its gain. "
                "Every table of this report that judges a recipe against the baseline (model scale, across tasks, "
                "warm-start variance, power) takes this verdict; Holm's family is the cell's comparisons, so the same "
                "contrast in a suite whose cell holds other recipes can get another p_Holm and, near 0.05, another "
                "verdict (the Claims section, where there is one, names any claim whose finding differs)."),
           *([Para(over_warm_starts(ctx).strip() + f" There Δ greedy, Δ {k_text(ctx)} and gain are those figures, "
                   f"while Δ, p and the verdict on {rs.primary} are still over seeds.")] if several_warm_starts(ctx) else []),
           Para("Why paired t: an exact sign-flip or signed-rank test cannot go below p = 0.25 with 3 seeds, so it "
                "could never decide at laptop seed counts; the t-test's false-positive rate on binomial accuracies "
                "is checked by simulation in the tests (≤ 5% at 3 and at 10 seeds). The `+` mark of earlier reports "
                "(a bootstrap interval of P(improvement) excluding 0.5) fired in about one null comparison in six at "
                "3 seeds and is gone.")]
    for cell in ctx.cells:
        out.append(Heading(3, cell))
        out.append(table(board.filter(pl.col("cell") == cell), {
            "recipe": lambda r: r["recipe"], "n": lambda r: f"{r['n']}/{r['expected']}",
            f"{rs.primary} [95% CI]": lambda r: ci(r["primary_mean"], r["primary_lo"], r["primary_hi"]),
            f"Δ vs {ctx.base} [95% CI]": lambda r: ci(r["diff"], r["diff_lo"], r["diff_hi"], "+.3f"),
            "p": lambda r: num(r["p"], ".3f"), "p_Holm": lambda r: num(r["p_holm"], ".3f"),
            "MDD": lambda r: num(r["mdd"], ".3f"), f"seeds for {rs.margin:g}": lambda r: seeds_cell(r["seeds_for_margin"]),
            "verdict": lambda r: r["verdict"] + (" *" if r["mark"] == "*" else ""),
            **coverage_columns(ctx, cell),
            "not finished": lambda r: _not_finished(r)}))
    out += margin_section(ctx)
    out.append(Para("Secondary metrics (not marked): final accuracy (mean and IQM, which with fewer than 4 seeds trims "
                    "nothing and equals the mean), AUC and plateau accuracy, each with a 95% bootstrap interval over "
                    f"seeds. {_plateau_text(ctx)} P(>{ctx.base}): the share of seeds (those both finished) on which the "
                    f"recipe's {rs.primary} beat {ctx.base}'s on the same seed (ties ½), with its 95% Wilson score "
                    "interval over those seeds (each seed one win, tie or loss); descriptive only."))
    for cell in ctx.cells:
        out.append(Heading(3, f"{cell}: secondary metrics"))
        out.append(table(board.filter(pl.col("cell") == cell), {
            "recipe": lambda r: r["recipe"],
            "final [95% CI]": lambda r: ci(r["final_mean"], r["final_lo"], r["final_hi"]),
            "final IQM": lambda r: num(r["final_iqm"]),
            "AUC [95% CI]": lambda r: ci(r["auc_mean"], r["auc_lo"], r["auc_hi"]),
            "plateau [95% CI]": lambda r: ci(r["plateau_mean"], r["plateau_lo"], r["plateau_hi"]),
            f"P(>{ctx.base}) [95% CI]": lambda r: ci(r["p_improve"], r["p_improve_lo"], r["p_improve_hi"], ".2f")}))
    if "coverage" not in ctx.tables:  # no evaluation to read the three axes from: the primary alone
        out.append(ctx.figure("leaderboard.png", F.leaderboard(board, ctx.cells, ctx.colors, ctx.base, rs.primary, rs.margin),
                              f"Paired difference from {ctx.base} on {rs.primary}: mean over seeds (dot) with its 95% "
                              f"paired t interval; shaded ±{rs.margin:g} (the equivalence margin), dotted ±the cell's "
                              "median MDD; `*` where Holm-adjusted p < 0.05."))
    return out


def _plateau_text(ctx: Context) -> str:
    """How plateau was taken, with the window the runs actually used."""
    rs, runs = ctx.suite.report, ctx.runs
    starts = runs["plateau_start"].drop_nulls().drop_nans() if runs is not None and runs.height else None
    text = (f"Plateau: the mean accuracy of the evaluations at ≥ {rs.plateau_from:g} of the budget spent, and at "
            f"least the last {T.PLATEAU_POINTS} evaluations (where only the final evaluation lies past {rs.plateau_from:g}, "
            "as with log-spaced schedules, a one-point plateau would be final accuracy again)")
    if starts is None or not starts.len():
        return text + "."
    lo, hi = float(starts.min()), float(starts.max())
    where = f"{lo:.2f}" if round(lo, 2) == round(hi, 2) else f"{lo:.2f}–{hi:.2f}"
    return text + f"; in these runs the window starts at {where} of the budget."


def margin_spread(ctx: Context, cell: str) -> dict:
    """The equivalence margin against the observed spread of a cell's recipes (primary means):
    all: (min, max) over every recipe; field: over the baseline and the recipes not found different
    from it (equivalent or undecided), the ones the margin has to tell apart; n_field: their number;
    within: the other recipes whose mean lies within ±margin of the baseline's; tested: some comparison
    has 2 paired seeds (with fewer, nothing can be called equivalent or different); warn: the field has
    ≥ 3 recipes and the ±margin window (2 × margin wide) is at least its spread, so that with enough
    seeds every one of them would be called equivalent whatever their order (only when tested)."""
    rs = ctx.suite.report
    b = ctx.tables["leaderboard"].filter((pl.col("cell") == cell) & pl.col("primary_mean").is_not_null())
    means = dict(zip(b["recipe"].to_list(), b["primary_mean"].to_list()))
    verdict = dict(zip(b["recipe"].to_list(), b["verdict"].to_list()))
    field = [means[r] for r in means if verdict[r] in ("baseline", "equivalent", "undecided")]
    ref = means.get(ctx.base)
    within = [r for r in means if r != ctx.base and ref is not None and abs(means[r] - ref) < rs.margin]
    tested = any(v is not None and v >= 2 for r, v in zip(b["recipe"], b["pairs"]) if r != ctx.base)
    return {"n": len(means), "all": (min(means.values()), max(means.values())) if means else (math.nan, math.nan),
            "n_field": len(field), "field": (min(field), max(field)) if field else (math.nan, math.nan),
            "within": within, "base": ref, "tested": tested,
            "warn": tested and len(field) >= 3 and 2 * rs.margin >= max(field) - min(field)}


def margin_section(ctx: Context) -> list:
    """The equivalence margin shown against the spread between recipes, per cell, with a warning
    where the margin is too wide to separate the field (issue 24)."""
    rs = ctx.suite.report
    ev = finished(ctx.data.evals)
    out = [Heading(3, "Equivalence margin"),
           Para(f"The margin, ±{rs.margin:g} in {rs.primary} (`[report] margin` in the suite file, whose comment gives "
                "the reason for the value), is the smallest difference the comparisons treat as real. It is shown "
                "against the spread of the recipes' means: when the ±margin window (twice the margin wide) is at "
                "least the spread of the recipes a cell does not find different from the baseline, every one of them "
                "would be called equivalent with enough seeds whatever their order, and the report warns.")]
    for cell in ctx.cells:
        m = margin_spread(ctx, cell)
        if not m["n"]:
            continue
        text = f"{cell}: margin ±{rs.margin:g}"
        start = ev.filter((pl.col("cell") == cell) & (pl.col("fraction") == 0))["acc"].mean()
        if rs.threshold is None and m["base"] is not None and start is not None and m["base"] - start > 0:
            share = rs.margin / (m["base"] - start)
            text += (f", {share:.0%}" if share < 1 else f", {share:.1f}×") + (
                f" of {ctx.base}'s gain in {rs.primary} over the warm start ({num(start)} at the warm start, "
                f"{num(m['base'])} for {ctx.base})")
        text += f". The {m['n']} recipes' means span {span(m['all'])}; "
        if not m["tested"]:
            text += f"no comparison with {ctx.base} has 2 paired seeds, so none can be decided; "
        elif m["n_field"] > 1:
            text += (f"the {m['n_field']} not found different from {ctx.base} ({ctx.base} among them) span "
                     f"{span(m['field'])}; ")
        elif m["n"] > 1:
            text += f"every other recipe is found different from {ctx.base}; "
        text += (f"{len(m['within'])} of the other {m['n'] - 1} lie{'s' if m['n'] == 2 else ''} within ±{rs.margin:g} "
                 f"of {ctx.base}'s mean.")
        if m["warn"]:
            text += (f" **Warning**: the ±{rs.margin:g} window is {2 * rs.margin:g} wide, at least the spread of the "
                     f"recipes not found different ({num(m['field'][1] - m['field'][0])}): for them `equivalent` says "
                     "little more than that the field is narrow; read it as \"no difference of the margin's size\", not "
                     "as evidence that the recipes are alike.")
        out.append(Para(text))
    return out


def _not_finished(r: dict) -> str:
    parts = [f"{r[k]} {k}" for k in ("diverged", "failed", "missing") if r[k]]
    return ", ".join(parts) or "-"
