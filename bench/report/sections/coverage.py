"""Skill, sharpening or collapse: each contrast read on sampled pass@1, greedy accuracy and pass@K, the
pass@k curves and the accuracy–KL frontier; the helpers the summary and the leaderboard share.
"""
from __future__ import annotations

import polars as pl

from bench.report import coverage as C
from bench.report import figures as F
from bench.report import stats
from bench.report.context import Context
from bench.report.data import N_BINS, finished
from bench.report.prose import cap, names
from bench.report.registry import section
from bench.report.render import Figure, Heading, Para, ci, num, table


def k_text(ctx: Context, cell: str | None = None) -> str:
    """pass@K's name in the text: pass@K with the cell's K, or pass@k at the evaluation's k."""
    cov = ctx.tables["coverage"]
    ks = sorted(set((cov if cell is None else cov.filter(pl.col("cell") == cell))["k"].drop_nulls().to_list()))
    return f"pass@{ks[0]}" if len(ks) == 1 else "pass@K"


def _coverage_row(ctx: Context, cell: str, recipe: str) -> dict | None:
    if "coverage" not in ctx.tables:
        return None
    c = ctx.tables["coverage"].filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe))
    return c.row(0, named=True) if c.height else None


def with_kind(ctx: Context, cell: str, recipe: str) -> str:
    r = _coverage_row(ctx, cell, recipe)
    return f"{recipe} ({r['kind']})" if r is not None else recipe


def coverage_columns(ctx: Context, cell: str) -> dict:
    """The leaderboard's columns for greedy accuracy, pass@K and the kind of the gain."""
    if "coverage" not in ctx.tables:
        return {}

    def axis(key: str):
        def cellv(r):
            c = _coverage_row(ctx, cell, r["recipe"])
            return "-" if c is None else _axis_ci(c, key)
        return cellv

    def kind(r):
        c = _coverage_row(ctx, cell, r["recipe"])
        return c["kind"] if c is not None else "-"

    return {"Δ greedy [95% CI]": axis("greedy"), f"Δ {k_text(ctx, cell)} [95% CI]": axis("pass_k"), "gain": kind}


def coverage_figure(ctx: Context) -> Figure:
    rs = ctx.suite.report
    return ctx.figure("leaderboard.png", F.coverage_verdicts(ctx.tables["coverage"], ctx.tables["leaderboard"], ctx.cells,
                                                             ctx.colors, ctx.base, rs.margin),
                      f"Each recipe against {ctx.base} on three axes, paired by seed: sampled pass@1 ({rs.accuracy_text}), "
                      f"greedy accuracy and {k_text(ctx)} (the chance that one of K samples is correct: coverage), each reduced over "
                      f"the evaluations as the primary metric is ({reduction(ctx)}): mean difference (dot) with its 95% "
                      f"paired t interval, `*` where Holm's p over the cell's recipes < 0.05, shaded ±{rs.margin:g}. "
                      "Beside each recipe the kind of its gain: skill (greedy accuracy or pass@K rises, nothing falls), "
                      "sharpening (only sampled pass@1 rises), collapse (pass@K falls while pass@1 or greedy rises), "
                      "mixed, worse, equivalent or undecided." + over_warm_starts(ctx))


def several_warm_starts(ctx: Context) -> list[str]:
    """The cells whose coverage verdicts are read over warm starts (coverage.csv's level)."""
    cov = ctx.tables.get("coverage")
    if cov is None or "level" not in cov.columns:
        return []
    return cov.filter(pl.col("level") == "warm start")["cell"].unique(maintain_order=True).to_list()


def over_warm_starts(ctx: Context) -> str:
    """A sentence for the texts that say "paired by seed", where some cell is read over warm starts."""
    cells = several_warm_starts(ctx)
    if not cells:
        return ""
    return (f" In {names(cells)} (several warm starts) the three axes are read over warm starts: the mean of "
            "each warm start's mean paired difference, with a t interval over those means (see \"Skill, "
            "sharpening or collapse\").")


def reduction(ctx: Context) -> str:
    rs = ctx.suite.report
    return rs.primary if rs.threshold is None and rs.primary in ("final", "auc", "plateau") else "auc"


def kinds_text(ctx: Context, cell: str) -> str:
    """One cell's contrasts on the three axes, each with the kind of its gain."""
    cov = ctx.tables["coverage"].filter(pl.col("cell") == cell)
    k = k_text(ctx, cell)

    def d(r, key):
        return (f"{num(r[f'{key}_diff'], '+.3f')}" + (" *" if r[f"{key}_p_holm"] is not None
                                                    and r[f"{key}_p_holm"] < stats.ALPHA else ""))
    parts = [f"{r['recipe']} {r['kind']} (pass@1 {d(r, 'pass1')}, greedy {d(r, 'greedy')}, {k} {d(r, 'pass_k')})"
             for r in cov.iter_rows(named=True)]
    over = (f", over its {cov['warmstarts'].max()} warm starts (a t over their means; by warm start in \"Skill, "
            "sharpening or collapse\")" if cell in several_warm_starts(ctx) else "")
    return (f"{cell}, what each difference from {ctx.base} is, on sampled pass@1, greedy accuracy and {k} "
            f"({reduction(ctx)}; `*`: Holm's p < 0.05 on that axis){over}: " + "; ".join(parts) + ".")


def _tables(ctx: Context) -> dict:
    s, d = ctx.suite, ctx.data
    cov = C.verdicts(s, d)
    if not cov.height:
        return {}
    several = (cov["level"] == "warm start").any()
    # level and warmstarts only where some cell has several warm starts: a report of one warm start
    # per cell reads as it did before they were told apart (its published CSV stays byte for byte)
    return {"coverage": cov if several else cov.drop("level", "warmstarts"),
            "coverage_by_warmstart": C.per_warmstart(s, d) if several else None}


@section("coverage", tables=_tables, writes=("coverage", "coverage_by_warmstart"), needs=("leaderboard",),
         figures=("pass_at_k.png", "frontier.png"))
def coverage(ctx: Context) -> list:
    """Skill, sharpening or collapse: the three axes' definitions, the pass@k curves and the
    accuracy–KL frontier (only when the runs logged evaluations the axes can be read from)."""
    if "coverage" not in ctx.tables:
        return []
    rs = ctx.suite.report
    out = [Heading(2, "Skill, sharpening or collapse"),
           Para("A higher sampled pass@1 can mean three things: the policy solves problems it could not (skill), it "
                "samples more often what its greedy answer already was (sharpening), or it concentrates on fewer "
                "answers and solves fewer problems in K tries (collapse: the RL literature's pass@1 / pass@k trade-off, "
                "Yue et al. 2025). So each contrast of the leaderboard is also read on greedy accuracy and on pass@K, "
                f"the largest K every evaluation of the cell logged ({k_text(ctx)}; the unbiased estimator over the "
                "evaluation's n ≥ K samples per problem, or pass@k at k = eval.k for runs recorded before the coverage "
                f"curve), each reduced over the evaluations as the primary metric is ({reduction(ctx)}), paired by "
                "seed with Holm's adjustment over the cell's recipes on each axis, and the equivalence test at "
                f"±{rs.margin:g}. An axis is up or down where Holm's p < 0.05; a kind follows from the three: collapse "
                "(pass@K down while pass@1 or greedy is up) before mixed (any other rise beside a fall), "
                "skill (greedy or pass@K up), sharpening (only pass@1 up), worse (something down), equivalent (all "
                "three equivalent), else undecided. A recipe is never called better on pass@1 alone: read the "
                "leaderboard's verdict with its kind. The MDD of each axis is in coverage.csv.")]
    if "coverage_by_warmstart" in ctx.tables:
        out += _coverage_by_warmstart(ctx)
    curves = F.pass_at_k_curves(finished(ctx.data.evals), ctx.cells, ctx.colors)
    if curves is not None:
        out.append(ctx.figure("pass_at_k.png", curves,
                              "pass@k against k at each run's last evaluation (mean over seeds, band min–max; dashed: "
                              "the warm start). A recipe whose curve starts higher and ends lower than another's "
                              "traded coverage for pass@1."))
    else:
        out.append(Para("pass@k curves: these runs logged pass@k at one k only (runs from before the coverage curve "
                        "eval/pass@1, pass@2, ...); rerun them to draw the curve."))
    kl = C.kl_at_evals(ctx.data)
    sources = set(kl["kl_source"].drop_nulls())
    measured = ("KL is measured at each evaluation on its own sampled answers (eval/kl_k1, the first of each "
                "problem; 0 at the warm start, the reference, up to rounding)")
    binned = (f"KL is read from the training batches of the 1/{N_BINS} of the budget before each evaluation, "
              "0 at the warm start (the reference)")
    how = {frozenset({"eval"}): measured, frozenset({"eval", "steps"}): f"{measured}; for runs that did not log it, "
           f"{binned[0].lower()}{binned[1:]}"}.get(frozenset(sources), binned)
    out.append(ctx.figure("frontier.png", F.accuracy_kl_frontier(kl, ctx.cells, ctx.colors, rs.accuracy_text),
                          f"{cap(rs.accuracy_text)} against the policy's KL k1 to the reference, each recipe's "
                          "evaluations as a path (mean over seeds at each evaluation of the schedule; square: the last). "
                          f"{how}. Up and to the left: more accuracy for less drift."))
    return out


def _coverage_by_warmstart(ctx: Context) -> list:
    """Cells with several warm starts: their verdicts are over warm starts; each warm start's own."""
    t, cov = ctx.tables["coverage_by_warmstart"], ctx.tables["coverage"]
    out = [Para("Cells whose seeds start from several independently trained warm starts (a regime's "
                "`warmstarts`): there the three axes are read over warm starts, not seeds (level \"warm start\" in "
                "coverage.csv). Each axis's difference is the mean over warm starts of the mean paired difference on "
                "each one's seeds, every warm start weighted equally; its interval, p and MDD come from t over those "
                "W means (df = W − 1), Holm over the cell's recipes as elsewhere. Seeds that share a warm start are "
                "not independent draws of the comparison another warm start would give, so pooling them as seeds "
                "would read a gap that one warm start moves as settled; with three warm starts the t(2) interval is "
                "wide, and that is what three can say. Below, each warm start on its own (coverage_by_warmstart.csv): "
                "the paired difference over its seeds with its t interval, the findings and kind that a report of "
                "those seeds alone would give (Holm over the cell's recipes within the warm start, no adjustment "
                "across warm starts); with two or three seeds each, few are decided.")]
    k = k_text(ctx)
    for cell in t["cell"].unique(maintain_order=True).to_list():
        c = t.filter(pl.col("cell") == cell)
        v = cov.filter(pl.col("cell") == cell)
        w = int(v["warmstarts"].max())
        same, none, differ = [], [], []
        for r in v.iter_rows(named=True):
            kinds = c.filter(pl.col("recipe") == r["recipe"])["kind"].to_list()
            if set(kinds) == {"undecided"}:
                none.append(f"{r['recipe']} ({r['kind']} over them)")
            else:
                (same if len(set(kinds)) == 1 else differ).append(
                    f"{r['recipe']} ({r['kind']} over them; each alone: {', '.join(kinds)})")
        parts = ([f"every warm start gives the same kind for {', '.join(same)}"] if same else []) + (
            [f"no warm start alone decides a kind (undecided on each) for {', '.join(none)}"] if none else []) + (
            [f"the warm starts differ on the kind for {', '.join(differ)}"] if differ else [])
        out.append(Para(f"{cell}: the kinds above are over its {w} warm starts; " + "; and ".join(parts) + "."))
        out.append(table(c, {
            "recipe": lambda r: r["recipe"], "warm start": lambda r: str(r["warmstart"]),
            "seeds": lambda r: str(r["pairs"]),
            "Δ pass@1 [95% CI]": lambda r: _axis_ci(r, "pass1"), "Δ greedy [95% CI]": lambda r: _axis_ci(r, "greedy"),
            f"Δ {k} [95% CI]": lambda r: _axis_ci(r, "pass_k"), "gain": lambda r: r["kind"]}))
    return out


def _axis_ci(r: dict, key: str) -> str:
    """An axis's difference with its interval, `*` where Holm's p < α."""
    return ci(r[f"{key}_diff"], r[f"{key}_lo"], r[f"{key}_hi"], "+.3f") + (
        " *" if r[f"{key}_p_holm"] is not None and r[f"{key}_p_holm"] < stats.ALPHA else "")
