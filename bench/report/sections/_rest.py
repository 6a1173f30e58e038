"""The sections not yet in a module of their own (summary, leaderboard, coverage, model_scale,
clipping, tuning); moved one module each in the next step.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from bench.report import coverage as C
from bench.report import figures as F
from bench.report import manifest as M
from bench.report import stats
from bench.report import tables as T
from bench.report import tuning as TU
from bench.report.context import Context
from bench.report.data import N_BINS, Data, finished, run_config
from bench.report.prose import cap, names, run_cells, seeds_cell, span, stale_text
from bench.report.registry import section
from bench.report.render import Figure, Heading, Para, ci, num, table
from bench.suite import Suite


def budget_text(b) -> str:
    unit = {"flops": "FLOPs", "steps": "steps", "tokens": "generated tokens"}[b.kind]
    return f"{b.value:.3g} {unit}"


def _count(runs: pl.DataFrame, status: str) -> int:
    return runs.filter(pl.col("status") == status).height


PRIMARY_TEXT = {
    "auc": "AUC, the mean {acc} over the budget (area under accuracy against the compute each evaluation "
           "actually spent, as a fraction of the budget, from 0 to the budget)",
    "final": "final {acc} at the end of the budget",
    "plateau": "plateau accuracy, the mean {acc} of the evaluations at ≥ {from_:g} of the budget spent, and "
               "at least the last {k} (one point would be final accuracy again)",
}


def primary_text(ctx: Context) -> str:
    rs = ctx.suite.report
    if rs.threshold is not None:
        return (f"compute to {rs.threshold:g} accuracy, the fraction of the budget at which {rs.accuracy_text} "
                "first reaches it (interpolated between evaluations; a run that never reaches it counts as 1.0, "
                "the whole budget); lower is better")
    return PRIMARY_TEXT[rs.primary].format(from_=rs.plateau_from, acc=rs.accuracy_text, k=T.PLATEAU_POINTS)


def _skill_text(ctx: Context) -> str:
    """The Summary's skill check: does each cell compare skill, not a switch of format?"""
    t = ctx.tables["skill_check"]
    parts = []
    for r in t.iter_rows(named=True):
        verdict = ("passes, but its gain is sharpening: sampled answers grow more like the greedy one while greedy "
                   "accuracy does not improve, so its verdicts rank how fast a recipe sharpens" if r["sharpening"]
                   else "compares skill" if r["skill"] else "does NOT pass: read its verdicts as format as much as skill")
        sharp = (f"; greedy accuracy {num(r['greedy_gain_mean'], '+.3f')} ± {num(r['greedy_gain_se'])} SE"
                 if ctx.suite.report.accuracy != "eval/acc_greedy" else "")
        parts.append(f"{r['cell']} {verdict} (format rate at the start {num(r['format_start'])}; {r['baseline']}'s gain "
                     f"{num(r['gain_mean'], '+.3f')} ± {num(r['gain_se'])} SE over {r['seeds']} seeds, "
                     f"{num(r['gain_z'], '.1f')} SE{sharp})")
    return (f"Skill check (a cell compares skill when at least {T.SKILL_FORMAT:g} of the sampled answers are well-formed "
            f"at the start, so that a gain is not a switch of format, and {ctx.base}'s gain in {ctx.suite.report.accuracy_text} "
            f"from the first evaluation to the last is at least {T.SKILL_SE:g} standard errors of its mean over seeds; "
            f"a sampled accuracy's gain is sharpening when greedy accuracy gains less than {T.SHARPENING_SE:g} standard "
            "errors): " + "; ".join(parts) + ".")


def declared_text(ctx: Context) -> str:
    rs = ctx.suite.report
    if rs.declared:
        return f"Primary metric (declared in the suite file's [report] table): {primary_text(ctx)}."
    return (f"Primary metric: {primary_text(ctx)}. The suite file declares none, so this is the default "
            f"(`[report] primary = \"{rs.primary}\"`); declare one before running to make the comparison "
            "confirmatory.")


def settings_text(su, data: Data | None = None) -> str:
    """Whether the recipes run at tuned settings or at their defaults, in one sentence."""
    if su.tuned_from is None:
        lrs = {c.name: {run_config(su, data, c.name, r).train.lr for r in su.cell_recipes(c)} for c in su.cells}
        shared = all(len(v) == 1 for v in lrs.values())
        return ("Settings: every recipe runs at its defaults and the suite's `[overrides]`, "
                + ("one shared learning rate per cell" if shared else "learning rates as the suite sets them")
                + ", untuned (no tuned settings file).")
    from bench.suite import tuned_beside

    pairs = sorted({r for _, r in su.cell_overrides})
    f = Path(su.tuned_from)
    where = (f"suites/tuned/{f.name}, committed beside the suite" if f.resolve() == tuned_beside(su.path).resolve()
             else f"{f.name}, a tuned settings file given to `bench suite --tuned`")
    return (f"Settings: **tuned** — {len(pairs)} recipe(s) ({names(pairs)}) run at the values in {where} "
            "(tagged tuned = true; the Tuning section says what tuning cost and how the defaults compare); the "
            "others at their defaults.")


def _summary_tables(ctx: Context) -> dict:
    return {"skill_check": T.skill_check(ctx.suite, ctx.data)}


@section("summary", tables=_summary_tables, writes=("skill_check",),
         needs=("leaderboard", "power", "coverage", "claims", "scales"), figures=("claims.png", "leaderboard.png"))
def summary(ctx: Context) -> list:
    runs, board, pw = ctx.data.runs, ctx.tables["leaderboard"], ctx.tables["power"]
    rs = ctx.suite.report
    out = [Heading(2, "Summary")]
    if ctx.suite.description:
        out.append(Para(ctx.suite.description))
    claims_ = ctx.tables.get("claims")
    if claims_ is not None:  # a claims suite leads with its verdicts
        counts = ", ".join(f"{claims_.filter(pl.col('verdict') == v).height} {v}" for v in T.CLAIM_VERDICTS)
        out.append(ctx.figure("claims.png", F.claims(claims_),
                              f"The {claims_.height} claims' contrasts and verdicts ({counts}; Holm over the claims): "
                              "see Claims below for each claim's statement, mechanism and outcome."))
    if "coverage" in ctx.tables:
        out.append(coverage_figure(ctx))
    su = ctx.suite
    if all(su.cell_seeds(c) == su.seeds for c in su.cells):
        cells = ", ".join(f"{c.name} (budget {budget_text(c.budget)})" for c in su.cells)
        grid = f"{len(su.recipes)} recipes × {len(su.seeds)} seeds on {cells}"
    else:  # a regime runs its own seeds: say each cell's
        grid = ", ".join(f"{c.name} ({len(su.cell_recipes(c))} recipes × {len(su.cell_seeds(c))} seeds, budget "
                         f"{budget_text(c.budget)})" for c in su.cells)
    out.append(Para(f"{grid}: "
                    f"{runs.height} runs expected, {_count(runs, 'finished')} finished, {_count(runs, 'diverged')} "
                    f"diverged, {_count(runs, 'failed')} failed, {_count(runs, 'missing')} without a record. "
                    "Statistics use finished runs only; the others are listed under "
                    "\"Failed, diverged and missing runs\"."))
    out.append(Para(settings_text(su, ctx.data)))
    out.append(Para(declared_text(ctx) + f" Every recipe is compared with {ctx.base}, paired by seed, "
                    "Holm-corrected within a cell; a comparison is decided when it finds a difference (adjusted "
                    f"p < 0.05) or rules out one of {rs.margin:g} or more (equivalence), and undecided otherwise."))
    if ctx.data.stale:
        out.append(Para(stale_text(ctx)))
    out.append(Para(_warm_start_text(ctx)))
    if "skill_check" in ctx.tables:
        out.append(Para(_skill_text(ctx)))
    for cell in ctx.cells:
        b = board.filter((pl.col("cell") == cell) & pl.col("primary_mean").is_not_null())
        if not b.height:
            out.append(Para(f"{cell}: no finished run yet."))
            continue
        best = b.row(0, named=True)
        p = pw.filter((pl.col("cell") == cell) & pl.col("primary")).row(0, named=True)
        by = {v: b.filter(pl.col("verdict") == v)["recipe"].to_list()
              for v in ("better", "worse", "equivalent", "undecided")}
        n_cmp = sum(len(v) for v in by.values())
        decided = n_cmp - len(by["undecided"])
        need = p["seeds_for_margin"]
        power_txt = (f"With {p['seeds']} paired seeds the minimum detectable difference (80% power, α = 0.05) is "
                     f"{num(p['mdd'])} (pooled paired SD {num(p['sd_pooled'])}); detecting {rs.margin:g} would take "
                     f"{_seeds(need)} seeds." if p["seeds"] >= 2 else
                     "Fewer than 2 paired seeds: no comparison can be made.")
        if p["seeds"] >= 2 and by["undecided"]:  # the pooled SD can hide one noisy comparison, or blame it on all
            own = b.filter(pl.col("verdict") == "undecided")
            power_txt += " The undecided comparisons' own MDD: " + ", ".join(
                f"{r['recipe']} {num(r['mdd'])} ({_seeds(r['seeds_for_margin'])} seeds for {rs.margin:g})"
                for r in own.iter_rows(named=True)) + "."
        spread = margin_spread(ctx, cell)
        warn = (f" **Warning: the ±{rs.margin:g} equivalence window is at least as wide as the spread of the recipes "
                f"not found different from {ctx.base}** ({span(spread['field'])}), so their `equivalent` says little: "
                "see \"Equivalence margin\"." if spread["warn"] else "")
        out.append(Para(
            f"{cell}: best {rs.primary} {best['recipe']} {ci(best['primary_mean'], best['primary_lo'], best['primary_hi'])}. "
            f"{decided} of {n_cmp} comparisons with {ctx.base} are decided on {rs.primary}: better "
            f"{names([with_kind(ctx, cell, r) for r in by['better']])}; worse "
            f"{names([with_kind(ctx, cell, r) for r in by['worse']])}; equivalent within ±{rs.margin:g} "
            f"{names(by['equivalent'])}. Undecided: {names(by['undecided'])}. {power_txt}{warn}"))
        if "coverage" in ctx.tables:
            out.append(Para(kinds_text(ctx, cell)))
    for label, cells, g in scale_groups(ctx):
        out.append(Para(scale_summary(ctx, label, scale_findings(ctx, cells, g))))
    return out


def _warm_start_text(ctx: Context) -> str:
    """Where the runs started: one warm start per cell (the intervals then hold no warm-start
    variance), or a warning for a cell that mixes checkpoints or runs that do not record theirs."""
    counts = M.warm_starts(run_cells(ctx), ctx.data.metas)
    mixed = {c: n for c, n in counts.items() if M.mixed(n)}
    unknown = sum(n.get(None, 0) for n in counts.values())
    several = M.several_warm_starts(run_cells(ctx), ctx.data.metas)
    text = ("Warm starts: the runs of each cell start from one warm start (one SFT checkpoint; its weights' "
            "SHA-256 is in the Manifest), so the intervals hold the variance between seeds, not between warm "
            "starts, and a different checkpoint can move every curve (a stale one once moved them by ~20 points)."
            if not mixed and not unknown and not several else "Warm starts:")
    if several and not mixed and not unknown:
        text += (f" {', '.join(several)} start{'s' if len(several) == 1 else ''} from several independently "
                 "trained warm starts by design (a regime's `warmstarts`: seed s from warm start s mod N, every "
                 "recipe of a seed from the same one), so there the intervals hold warm-start variance too (see "
                 "\"Warm-start variance\"); the runs of every other cell start from one warm start, so their "
                 "intervals hold the variance between seeds only. Each SFT checkpoint's SHA-256 is in the Manifest.")
    if mixed:
        text += " **Warning**: " + "; ".join(f"cell {c} mixes {len(n)} warm starts ({M.warm_start_text(n)})"
                                             for c, n in mixed.items()) + ": its comparisons mix checkpoints."
    if unknown:
        text += (f" {unknown} run{'s do' if unknown != 1 else ' does'} not record the weights of {'their' if unknown != 1 else 'its'} warm "
                 "start (runs before the SHA-256 was recorded), so whether they share one cannot be checked.")
    dirty = sum(1 for m in ctx.data.metas.values() if m.get("git_dirty"))
    if dirty:
        text += f" {dirty} run{'s were' if dirty != 1 else ' was'} trained from a modified (dirty) tree."
    return text


def _seeds(n) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "an unknown number of"
    return "more than 10,000" if math.isinf(n) else f"{int(n)}"


def _leaderboard_tables(ctx: Context) -> dict:
    return {"leaderboard": T.leaderboard(ctx.suite, ctx.data)}


@section("leaderboard", tables=_leaderboard_tables, writes=("leaderboard",), needs=("coverage",), figures=("leaderboard.png",))
def leaderboard(ctx: Context) -> list:
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


def _coverage_tables(ctx: Context) -> dict:
    s, d = ctx.suite, ctx.data
    cov = C.verdicts(s, d)
    if not cov.height:
        return {}
    several = (cov["level"] == "warm start").any()
    # level and warmstarts only where some cell has several warm starts: a report of one warm start
    # per cell reads as it did before they were told apart (its published CSV stays byte for byte)
    return {"coverage": cov if several else cov.drop("level", "warmstarts"),
            "coverage_by_warmstart": C.per_warmstart(s, d) if several else None}


@section("coverage", tables=_coverage_tables, writes=("coverage", "coverage_by_warmstart"), needs=("leaderboard",),
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


def scale_groups(ctx: Context) -> list[tuple[str, list[str], pl.DataFrame]]:
    """(label, cell names in scale order, the scales table's rows) per task/regime spanning ≥ 2 scales."""
    frame = ctx.tables.get("scales")
    if frame is None:
        return []
    out = []
    for (task, regime), cells in T.scale_groups(ctx.suite).items():
        g = frame.filter((pl.col("task") == task) & (pl.col("regime") == regime))
        out.append((task + (f" ({regime})" if regime else ""), [c.name for c in cells], g))
    return out


@dataclass(frozen=True)
class ScaleFindings:
    """What one task/regime's scales table decides. scales: names in order; ranking: scale -> recipes
    best first (None without a finished run); flips: (recipe, scales where significantly better than
    the baseline, where significantly worse); changes: the rows whose Δ change from the first scale
    is decided; noise / involved: later scale -> recipe pairs whose order differs from the first
    scale's, with neither recipe's difference decided there / with one decided (and who); tested: the
    changes that have a p-value (Holm's family)."""

    scales: list[str]
    ranking: dict[str, list[str] | None]
    flips: list[tuple[str, list[str], list[str]]]
    changes: list[dict]
    noise: dict[str, list[tuple[str, str]]]
    involved: dict[str, list[tuple[str, str, str]]]
    tested: int


def scale_findings(ctx: Context, cells: list[str], g: pl.DataFrame) -> ScaleFindings:
    rows = {(r["recipe"], r["cell"]): r for r in g.iter_rows(named=True)}
    recipes = [r for r in ctx.suite.recipes if (r, cells[0]) in rows]
    scale = {c: rows[(recipes[0], c)]["scale"] for c in cells}
    rank = {(r, c): rows[(r, c)]["rank"] for r in recipes for c in cells}
    ranking = {}
    for c in cells:
        have = [r for r in recipes if rank[(r, c)] is not None]
        ranking[scale[c]] = sorted(have, key=lambda r: rank[(r, c)]) if have else None
    flips = []
    for r in recipes:
        better = [scale[c] for c in cells if rows[(r, c)]["verdict"] == "better"]
        worse = [scale[c] for c in cells if rows[(r, c)]["verdict"] == "worse"]
        if better and worse:
            flips.append((r, better, worse))
    changes = [rows[(r, c)] for r in recipes for c in cells[1:]
               if rows[(r, c)]["change_verdict"] in ("improves", "worsens")]

    def decided(r: str, c: str) -> bool:  # r's difference from the baseline at c is decided against cells[0]
        v = {rows[(r, cells[0])]["verdict"], rows[(r, c)]["verdict"]}
        return v == {"better", "worse"} or rows[(r, c)]["change_verdict"] in ("improves", "worsens")

    noise, involved = {}, {}
    for c in cells[1:]:
        for i, x in enumerate(recipes):
            for y in recipes[i + 1:]:
                ranks = [rank[(x, cells[0])], rank[(y, cells[0])], rank[(x, c)], rank[(y, c)]]
                if None in ranks or (ranks[0] - ranks[1]) * (ranks[2] - ranks[3]) >= 0:
                    continue
                who = [z for z in (x, y) if decided(z, c)]
                if who:
                    involved.setdefault(scale[c], []).append((x, y, " and ".join(who)))
                else:
                    noise.setdefault(scale[c], []).append((x, y))
    tested = sum(rows[(r, c)]["change_p_holm"] is not None for r in recipes for c in cells[1:])
    return ScaleFindings(list(scale.values()), ranking, flips, changes, noise, involved, tested)


def scale_summary(ctx: Context, label: str, f: ScaleFindings) -> str:
    head = f"Model scale, {label} ({', '.join(f.scales)})"
    if all(v is None for v in f.ranking.values()):
        return f"{head}: no finished run yet."
    who = list(dict.fromkeys([r for r, _, _ in f.flips] + [r["recipe"] for r in f.changes]))
    if who:
        rest = "; the other order differences between scales are within noise" if f.noise else ""
        return (f"{head}: a change with scale of the comparison with {ctx.base} is decided for {names(who)}"
                f"{rest} (see \"Model scale\").")
    if f.noise:
        return (f"{head}: the ranking differs between scales, but no change is decided: every difference is within "
                "noise (see \"Model scale\").")
    return f"{head}: the same ranking at every scale, and no change with scale is decided."


def _scale_statement(ctx: Context, label: str, f: ScaleFindings) -> list:
    """The plain statement of where the ranking changes with scale, decided changes apart from noise."""
    metric, base, s0 = ctx.suite.report.primary, ctx.base, f.scales[0]
    known = {s: r for s, r in f.ranking.items() if r is not None}
    if len(set(map(tuple, known.values()))) == 1 and len(known) == len(f.scales):
        order = f"{label}: the ranking by {metric} is the same at every scale: {', '.join(next(iter(known.values())))}."
    else:
        order = f"{label}: ranking by {metric}, best first: " + "; ".join(
            f"{s}: {', '.join(r) if r is not None else 'no finished run'}" for s, r in f.ranking.items()) + "."
    out = [Para(order)]
    decided = [f"{r} is significantly better than {base} at {_and(b)}, and significantly worse at {_and(w)}: a "
               "decided ranking change." for r, b, w in f.flips]
    decided += [f"{r['recipe']}'s Δ vs {base} changes by {ci(r['change'], r['change_lo'], r['change_hi'], '+.3f')} "
                f"from {s0} to {r['scale']} (Welch p_Holm {_p(r['change_p_holm'])}): a decided change, "
                f"{r['recipe']} {'gains on' if r['change_verdict'] == 'improves' else 'loses ground to'} {base}."
                for r in f.changes]
    if decided:
        out.append(Para("Decided: " + " ".join(decided)))
    elif not f.tested:
        out.append(Para("Nothing is decided: no change of Δ between scales can be tested yet (each needs 2 paired "
                        "seeds at both scales)."))
    else:
        out.append(Para(f"No ranking change with scale is decided: no recipe is significantly better than {base} at "
                        f"one scale and significantly worse at another, and no recipe's Δ changes significantly from "
                        f"{s0} (Holm over the {f.tested} changes)."))
    for s in f.scales[1:]:
        pairs = f.noise.get(s, [])
        if pairs:
            which = "neither difference is" if len(pairs) == 1 else "none of these differences is"
            out.append(Para(f"The order of {_pairs(pairs)} differs at {s} (against {s0}) but {which} decided: "
                            "within noise."))
        by_who: dict[str, list[tuple[str, str]]] = {}
        for x, y, who in f.involved.get(s, []):
            by_who.setdefault(who, []).append((x, y))
        for who, pairs in by_who.items():
            out.append(Para(f"The order of {_pairs(pairs)} also differs at {s} (against {s0}); it involves {who}, "
                            f"whose change from {s0} is decided (above)."))
    return out


def _pairs(pairs: list[tuple[str, str]]) -> str:
    """'a and b', or 'a and b, and of c and d,' (to be followed by a verb)."""
    text = ", and of ".join(f"{x} and {y}" for x, y in pairs)
    return text + "," if len(pairs) > 1 else text


def _and(xs: list[str]) -> str:
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


def _p(p) -> str:
    return "< 0.001" if p is not None and p < 0.001 else num(p)


def _model_scale_tables(ctx: Context) -> dict:
    return {"scales": T.scales(ctx.suite, ctx.data, ctx.tables["leaderboard"])}


@section("model_scale", tables=_model_scale_tables, writes=("scales",), needs=("leaderboard",), figures=("scales.png",))
def model_scale(ctx: Context) -> list:
    """How the comparison with the baseline moves with model size (only for suites with ≥ 2 scales of a task)."""
    groups = scale_groups(ctx)
    if not groups:
        return []
    rs = ctx.suite.report
    out = [Heading(2, "Model scale"),
           Para(f"The same recipes on the same task at several model sizes (scales in the suite's order, the first "
                f"the reference). Per scale: {rs.primary} with its 95% bootstrap interval over seeds, the rank among "
                f"the scale's recipes (1 = best mean), and Δ vs {ctx.base} with its paired t interval, Holm p and "
                "verdict, as in the leaderboard. \"Change from\" is how much the recipe's Δ moved from the first scale: "
                "the difference of the mean paired differences with a 95% Welch interval and p (different models, so "
                "the per-seed differences are not paired across scales), Holm-adjusted over the task's changes "
                "(recipes × later scales). A ranking change is decided only when a recipe is significantly better "
                f"than {ctx.base} at one scale and significantly worse at another, or when its Δ changes "
                "significantly between scales; a recipe's difference at a scale is decided in either case. The "
                "change column says whether the recipe improves or worsens against the baseline (Holm p < 0.05) or "
                "is undecided. Rank orders that differ otherwise are within noise and are called that.")]
    for label, cells, g in groups:
        found = scale_findings(ctx, cells, g)
        s0 = found.scales[0]
        out.append(Heading(3, label))
        out.append(table(g, {
            "recipe": lambda r: r["recipe"], "scale": lambda r: r["scale"],
            "params": lambda r: f"{r['params'] / 1e6:.3g} M" if r["params"] is not None else "-",
            "n": lambda r: str(r["n"]),
            f"{rs.primary} [95% CI]": lambda r: ci(r["primary_mean"], r["primary_lo"], r["primary_hi"]),
            "rank": lambda r: str(r["rank"]) if r["rank"] is not None else "-",
            f"Δ vs {ctx.base} [95% CI]": lambda r: ci(r["diff"], r["diff_lo"], r["diff_hi"], "+.3f"),
            "p_Holm": lambda r: num(r["p_holm"]), "verdict": lambda r: r["verdict"] or "-",
            f"change from {s0} [95% CI]": lambda r: ci(r["change"], r["change_lo"], r["change_hi"], "+.3f"),
            "change p_Holm": lambda r: num(r["change_p_holm"]),
            "change": lambda r: r["change_verdict"] or "-"}))
        out += _scale_statement(ctx, label, found)
    out.append(ctx.figure("scales.png", F.scales(finished(ctx.data.evals), ctx.tables["scales"],
                                                 {label: cells for label, cells, _ in groups}, ctx.budgets,
                                                 ctx.colors, ctx.xlabels, rs.primary, rs.accuracy_text),
                          f"{cap(rs.accuracy_text)} against compute (log scale; the warm start at compute 0 is left "
                          "out), one panel per model scale: mean over seeds, band from the lowest to the highest "
                          f"seed. Last panel: {rs.primary} per recipe against the model's parameters (log scale), "
                          "mean with its 95% bootstrap interval."))
    return out


def _not_finished(r: dict) -> str:
    parts = [f"{r[k]} {k}" for k in ("diverged", "failed", "missing") if r[k]]
    return ", ".join(parts) or "-"


def _clipping_tables(ctx: Context) -> dict:
    s, d = ctx.suite, ctx.data
    return {"clipping": T.clipping(s, d), "off_policy": T.step_summary(s, d, T.group_metrics(T.OFF_POLICY_GROUP))}


@section("clipping", tables=_clipping_tables, writes=("clipping", "off_policy"), needs=("leaderboard",),
         figures=("clipping.png", "off_policy.png"))
def clipping(ctx: Context) -> list:
    clip = ctx.tables["clipping"]
    zero = pl.col("note").str.starts_with("zero by construction")
    one = clip.filter(zero)["recipe"].unique(maintain_order=True).to_list()
    many = clip.filter(~zero)["recipe"].unique(maintain_order=True).to_list()
    out = [Heading(2, "Clipping and off-policy")]
    if one:
        by_cell = {c: clip.filter(zero & (pl.col("cell") == c))["recipe"].to_list() for c in ctx.cells}
        by_cell = {c: r for c, r in by_cell.items() if r}
        if len(by_cell) == len(ctx.cells) and all(r == one for r in by_cell.values()):  # the same in every cell
            who = f"{', '.join(one)} make"
        else:  # regimes: on-policy in some cells only
            who = "; ".join(f"in {c}, {', '.join(r)}" for c, r in by_cell.items()) + ": these make"
        out.append(Para(f"Zero by construction: {who} one optimizer update per rollout batch on fresh "
                        "rollouts (lag 0), so the ratio π/π_old is exactly 1 at the update and no clip can bind "
                        "(ALGORITHMS.md, convention 8). "
                        "Their clip fractions below are 0 because of this, not because the clip range is wide enough."))
    named = ("clip_low", "clip_high", "clip_seq", "weight_capped")
    # any other metric declared in the clipping group (algorithms/metrics.py) gets a column under its label
    others = {k.replace("_", " "): (lambda r, k=k: num(r[k], ".4f"))
              for k in T.group_metrics(T.CLIP_GROUP) if k in clip.columns and k not in named}
    out.append(table(clip, {
        "cell": lambda r: r["cell"], "recipe": lambda r: r["recipe"], "objective": lambda r: r["objective"],
        "updates/batch": lambda r: str(r["updates_per_batch"]), "clip low": lambda r: num(r["clip_low"], ".4f"),
        "clip high": lambda r: num(r["clip_high"], ".4f"), "clip seq (gspo)": lambda r: num(r["clip_seq"], ".4f"),
        "weight capped (cispo)": lambda r: num(r["weight_capped"], ".4f"), **others,
        "grad norm (median, pre-clip)": lambda r: num(r["grad_norm"], ".3g"),
        "norm clip binds": lambda r: num(r["clip_binds"], ".0%"),
        "note": lambda r: r["note"]}))
    binds = clip.filter(pl.col("clip_binds") > 0.5)["recipe"].unique(maintain_order=True).to_list()  # null: clip off
    checks = [_clip_off_check(ctx, c) for c in TU.clip_off_cells(ctx.suite)]
    tested = ("whether the ranking holds with clipping off is checked below." if checks else
              "whether a ranking holds with clipping off is not tested here.")
    out.append(Para("The gradient-norm clip (train.grad_clip) acts on a step when the pre-clip norm exceeds it; "
                    "`norm clip binds` is the share of steps where it did (a step's norm is the mean over its "
                    "updates). " + (f"It binds on most steps of {names(binds)}: Adam then sees gradients rescaled "
                                    "to the clip's norm on those steps (each step weighs the same, whatever its "
                                    "size), unlike the recipes it rarely touches, so the recipes do not share one "
                                    f"optimiser in effect; {tested}" if binds
                                    else "It binds on at most half the steps of every recipe.")))
    out += [Para(c) for c in checks]
    if many:
        out.append(ctx.figure("clipping.png", F.step_metrics(
            ctx.curves, {"policy/clip_frac_low": "clip fraction low", "policy/clip_frac_high": "clip fraction high"},
            ctx.cells, ctx.budgets, ctx.colors, ctx.xlabels, recipes=many),
            f"Clip fractions (low: A<0 and ratio below 1−ε; high: A>0 and ratio above 1+ε) for the recipes with "
            f"several updates per batch or stale rollouts ({', '.join(many)})."))
    else:
        out.append(Para("Every recipe in this suite makes one update per batch on fresh rollouts, so there is no "
                        "clip-fraction curve to draw."))
    out += off_policy(ctx)
    return out


def _clip_off_check(ctx: Context, cell) -> str:
    """Does the ranking of a cell run with the gradient-norm clip off (its regime's grad_clip = 0) match
    the ranking in its clipped twin (tuning.clipped_twin), by the leaderboard's primary metric?"""
    su, rs = ctx.suite, ctx.suite.report
    twin, exact = TU.clipped_twin(su, cell)
    head = f"Clipping off: {cell.name} runs with train.grad_clip = 0"
    if twin is None:
        return head + f"; no cell of {cell.task}/{cell.scale} runs with the clip on, so no ranking is compared."
    a, b = TU.experiment(twin.regime), TU.experiment(cell.regime)
    how = ("the same regime but for the clip" if exact else "the cell of the same task and scale sharing the most "
           "recipes with it; its regime differs in more than the clip: " + ", ".join(k for k in a if a[k] != b[k]))
    head += f"; its clipped twin is {twin.name} (train.grad_clip = {TU.grad_clip(su, twin):g}; {how})."
    board = ctx.tables["leaderboard"]

    def means(c: str) -> dict:
        b = board.filter(pl.col("cell") == c)
        return dict(zip(b["recipe"], b["primary_mean"]))

    rc = TU.rank_compare(means(twin.name), means(cell.name), rs.higher_is_better, list(su.recipes))
    if len(rc["common"]) < 2:
        return head + " Fewer than two recipes have finished runs in both, so no ranking is compared yet."
    if not rc["swaps"]:
        return (head + f" The ranking by {rs.primary} of the {len(rc['common'])} recipes both ran holds with clipping "
                f"off: {', '.join(rc['b'])}.")
    return (head + f" The ranking by {rs.primary} does not hold with clipping off: with the clip "
            f"{', '.join(rc['a'])}; without {', '.join(rc['b'])} ("
            + "; ".join(f"{x} and {y}" for x, y in rc["swaps"]) + " swap). A rank is of means over seeds; the "
            "leaderboard's verdicts in each cell say which differences are decided.")


def off_policy(ctx: Context) -> list:
    """How far each update's policy was from the one that sampled its batch (ratio telemetry)."""
    table_ = ctx.tables.get("off_policy")
    out = [Heading(3, "Ratio telemetry")]
    if table_ is None:
        return out + [Para("Ratio telemetry (share of tokens with |ρ − 1| > 0.2, mean |log ρ|, the sequence-level "
                           "ratio) is not logged in these runs: they were recorded before the engine logged it.")]
    out.append(Para("Per cell and recipe over the finished runs' steps: the share of trained tokens whose ratio "
                    "ρ = π/π_old is more than 0.2 from 1, the mean |log ρ|, the largest token ratio and the largest "
                    "sequence-level ratio (GSPO's length-normalised exp(mean log ρ)) seen in any step, and the "
                    "rollout lag (the policy versions between the sampler and the update)."))
    out.append(table(table_, {
        "cell": lambda r: r["cell"], "recipe": lambda r: r["recipe"], "lag": lambda r: num(r["lag"], ".0f"),
        "|ρ−1| > 0.2": lambda r: num(r["ratio_dev_frac"], ".4f"), "mean |log ρ|": lambda r: num(r["log_ratio_abs"], ".4f"),
        "max ρ": lambda r: num(r["ratio_max"], ".3g"), "max seq ρ": lambda r: num(r["seq_ratio_max"], ".3g")}))
    out.append(ctx.figure("off_policy.png", F.step_metrics(
        ctx.curves, {"policy/ratio_dev_frac": "share |ρ − 1| > 0.2", "policy/log_ratio_abs_mean": "mean |log ρ|",
                     "policy/clip_frac_low": "clip fraction low", "policy/clip_frac_high": "clip fraction high"},
        ctx.cells, ctx.budgets, ctx.colors, ctx.xlabels),
        "Off-policy drift and clipping against compute, one column per cell (a cell fixes the off-policy regime)."))
    return out


@section("tuning", writes=("tuning", "tuning_cost", "lr_robustness", "tuned_vs_default"), needs=("leaderboard",),
         figures=("tuning_sensitivity.png",))
def tuning(ctx: Context) -> list:
    """What tuning did and what it bought (issue 23), from `bench tune`'s trial runs under the results
    directory and the suite's two expansions: every trial run (tuning.csv), the sensitivity curves, the
    chosen settings with what they cost (tuning_cost), the lr robustness (lr_robustness) and the
    leaderboard at defaults beside the tuned one (tuned_vs_default); a plain statement when none ran."""
    from bench import tune
    from bench.tune import settings as tune_settings

    out = [Heading(2, "Tuning")]
    t = tune.trial_runs(ctx.suite, ctx.root)
    if not t.height:
        return out + [Para("No `bench tune` trials are recorded for this suite: every recipe ran at the suite's own "
                           "settings (its defaults and `[overrides]`). A comparison at tuned settings needs "
                           f"`bench tune {ctx.suite.name} --all` (the same trials and per-trial budget for every "
                           f"recipe), then `bench suite {ctx.suite.name} --tuned`.")]
    st = tune_settings.from_suite(ctx.suite)
    pair = _settings_pair(ctx)
    overrides = pair[1].cell_overrides if pair else {}
    pt = TU.trial_values(t, len(st.seeds))
    studies = pt.unique("study", maintain_order=True).select("study", "cell", "recipe").rows()
    picked = TU.chosen_trials(pt, {s: overrides.get((c, r)) for s, c, r in studies})
    cost = TU.costs_table(tune.summary(ctx.suite, ctx.root), pt, picked, ctx.suite)
    ctx.tables["tuning"] = TU.trials(t, ctx.suite, st.objective)
    ctx.tables["tuning_cost"] = cost
    out.append(Para(_tuning_protocol(ctx, st, t)))
    out += _tuning_cost(ctx, cost, pair is not None)
    out += _sensitivity(ctx, st, pt, picked, cost)
    out += _lr_robustness(ctx, st, pt, picked)
    return out + _tuned_vs_default(ctx, pair)


def _settings_pair(ctx: Context) -> tuple[Suite, Suite] | None:
    """(the suite at its defaults, the suite at its tuned settings): the report's own suite is one of
    them (tuned when it was loaded with a committed tuned file, else the defaults, paired with the
    results directory's `bench tune` output, ROOT/tuned/NAME.toml); None without tuned settings."""
    from bench.tune import tuned

    su = ctx.suite
    if su.tuned_from is not None:
        return replace(su, cell_overrides={}, tuned_from=None), su
    path = tuned.default_path(ctx.root, su.name)
    return (su, tuned.apply(su, path)) if path.is_file() else None


def _objective_text(ctx: Context, objective: str) -> str:
    acc = f"{ctx.suite.report.accuracy_text} (`{ctx.suite.report.accuracy}`)"
    return f"final {acc}" if objective == "final" else f"AUC, the mean {acc} over the budget"


def _seed_list(seeds) -> str:
    return ", ".join(str(s) for s in seeds)


def _tuning_protocol(ctx: Context, st, t: pl.DataFrame) -> str:
    """How tuning ran (sampler, seeds, objective, cell) and what tuning.csv holds."""
    su = ctx.suite
    sampler = ("a grid (every combination of the search space's choices once)" if st.sampler == "grid" else
               f"TPE (sampler seed {st.sampler_seed}, {st.startup_trials} random start-up trials, pruner {st.pruner})")
    both = sorted(set(t["seed"].to_list()) & set(su.all_seeds))
    seeds = (f"none of them is among the evaluation seeds ({_seed_list(su.all_seeds)}), so no evaluation run repeats "
             "a trial" if not both else f"**{_seed_list(both)} {'is' if len(both) == 1 else 'are'} also evaluation "
             "seeds**: the runs at those seeds repeat trials, an optimistic draw")
    where = (f" Tuned on {st.cell} only: the chosen values apply to every cell." if st.cell else "")
    counts = ctx.tables["tuning"].group_by("recipe", maintain_order=True).len()
    return (f"`bench tune` (the suite's `[tune]`) ran {sampler}; each trial trains one run per tuning seed "
            f"({_seed_list(st.seeds)}) and scores the mean of their {_objective_text(ctx, st.objective)}. A diverged "
            "run scores 0; a pruned or failed one has no score, and its trial is incomplete. Tuning seeds: "
            f"{seeds}.{where} `tuning.csv` has one row per trial run with the values its trial sampled (one column "
            f"per parameter path), its status, `{st.objective}` and `acc` (final {su.report.accuracy_text}): "
            + ", ".join(f"{r} {n}" for r, n in counts.rows()) + " rows.")


def _shown_values(params: dict) -> str:
    return ", ".join(f"{p.rsplit('.', 1)[-1]} = {v:.3g}" if isinstance(v, float) else f"{p.rsplit('.', 1)[-1]} = {v}"
                     for p, v in sorted(params.items()))


def _tuning_cost(ctx: Context, cost: pl.DataFrame, has_settings: bool) -> list:
    """The chosen settings and what tuning spent per recipe, with whether tuning was matched."""
    unmatched = TU.matched(cost)
    text = (f"Tuning cost: {int(cost['trials'].sum())} trials in all ({int(cost['runs'].sum())} runs), "
            f"{num(float(cost['flops'].sum()), '.3g')} FLOPs, {num(float(cost['wall_s'].sum()), '.0f')} s of run time. "
            + ("Matched: within each cell every recipe had the same number of trials, the same runs per trial and "
               "the same per-run budget (FLOPs spent still differ where runs were pruned or diverged)."
               if not unmatched else "**Not matched**: " + "; ".join(unmatched) + ".")
            + " Each study is one cell × recipe; `cost in runs` is its FLOPs over one run's budget; `chosen` the "
            + ("values of the tuned settings, and the trial that ran them" if has_settings
               else "best complete trial (no tuned settings file yet)")
            + ", with its mean objective and final accuracy over the tuning seeds.")
    astray = cost.filter((pl.col("chosen_from") == "best trial") & pl.lit(has_settings))["recipe"].to_list()
    if astray:
        text += (f" For {names(astray)} no complete trial ran the tuned settings' values (a settings file from "
                 "another study?): the row shows the best complete trial instead.")
    return [Para(text), table(cost, {
        "cell": lambda r: r["cell"], "recipe": lambda r: r["recipe"],
        "chosen": lambda r: _shown_values(json.loads(r["chosen"])) if r["chosen"] else "-",
        "trials (complete)": lambda r: f"{r['trials']} ({r['complete'] or 0})", "runs": lambda r: str(r["runs"]),
        "pruned": lambda r: str(r["pruned"]), "FLOPs": lambda r: num(r["flops"], ".3g"),
        "cost in runs": lambda r: num(r["cost_in_runs"], ".1f"), "wall": lambda r: f"{num(r['wall_s'], '.0f')} s",
        "chosen trial": lambda r: "-" if r["chosen_trial"] is None else str(r["chosen_trial"]),
        "objective": lambda r: num(r["chosen_value"]), "acc": lambda r: num(r["chosen_acc"])})]


def _study_label(cost: pl.DataFrame, cell: str, recipe: str) -> str:
    return recipe if cost["cell"].n_unique() == 1 else f"{cell}: {recipe}"


def _sensitivity(ctx: Context, st, pt: pl.DataFrame, picked: dict, cost: pl.DataFrame) -> list:
    """The sensitivity figure: each study's objective against its learning rate."""
    done = pt.filter(pl.col("complete") & pl.col("lr").is_not_null())
    if not done.height:
        return [Para(f"No complete trial tuned {TU.LR}, so there is no sensitivity curve to draw.")]
    chosen = {s: c["trial"] for s, c in picked.items()}
    points = done.with_columns(
        pl.Series("panel", [_study_label(cost, c, r) for c, r in zip(done["cell"], done["recipe"])]),
        pl.Series("group", [_shown_values({k: v for k, v in json.loads(p).items() if k != TU.LR})
                            for p in done["params"]], dtype=pl.String),
        pl.Series("chosen", [chosen.get(s) == n for s, n in zip(done["study"], done["trial"])], dtype=pl.Boolean))
    panels = [_study_label(cost, c, r) for c, r, s in cost.select("cell", "recipe", "study").rows()
              if s in set(done["study"])]
    left = pt.filter(~pl.col("complete")).height
    n = len(st.seeds)
    bars = (f"bars from the lowest to the highest of the {n} seeds (min–max, no resampling: with {n} seeds an "
            "interval estimate would not be calibrated)" if n > 1 else "one tuning seed, so no bars")
    return [ctx.figure("tuning_sensitivity.png",
                       F.tuning_sensitivity(points, panels, ctx.colors, f"{st.objective}, {ctx.suite.report.accuracy}"),
                       f"Sensitivity to the learning rate ({TU.LR}, log scale), one panel per recipe: per complete "
                       f"trial, the {_objective_text(ctx, st.objective)} averaged over the tuning seeds "
                       f"({_seed_list(st.seeds)}); {bars}; one line per value of the other tuned parameters (points "
                       f"unjoined where a study has more than {F.SENSITIVITY_LINES}, as a search over ranges gives); the star "
                       f"marks the chosen setting. {left} incomplete trial{'s' if left != 1 else ''} (pruned or failed "
                       f"runs) left out.")]


def _lr_robustness(ctx: Context, st, pt: pl.DataFrame, picked: dict) -> list:
    """Per recipe, the width of the lr range within the margin of its chosen trial (issue 23, item 4)."""
    margin = TU.margin_for(ctx.suite, st.objective)
    rob = TU.lr_robustness(pt, picked, margin, ctx.suite)
    if not rob.height:
        return [Para(f"lr robustness: no study tuned {TU.LR} with a complete trial, so no width is measured.")]
    ctx.tables["lr_robustness"] = rob
    why = ("the suite's `[report] margin`" if ctx.suite.report.primary == st.objective else
           f"{TU.DEFAULT_MARGIN:g}: the tuning objective {st.objective} is not the primary metric "
           f"{ctx.suite.report.primary}, whose margin is in its own units")
    several = rob["cell"].n_unique() > 1  # a recipe tuned in several cells is named with its cell

    def who(f: pl.DataFrame) -> list[str]:
        return [f"{r} ({c})" if several else r for c, r in zip(f["cell"], f["recipe"])]

    fragile = who(rob.filter(pl.col("fragile")))
    one = who(rob.filter(pl.col("lrs_tested") == 1))
    edge = who(rob.filter(pl.col("edge") != ""))
    text = (f"lr robustness: per recipe, the contiguous range of learning rates around the chosen one whose complete "
            f"trials, at the chosen values of the other tuned parameters, score within {margin:g} of the chosen "
            f"trial's {st.objective} (margin {margin:g}, {why}), and its width in decades, log10(hi / lo). "
            + (f"Fragile (of the learning rates tested, only the chosen one is within {margin:g}): {names(fragile)}."
               if fragile else f"No recipe is fragile: each has a neighbouring learning rate within {margin:g}, "
               "or only one was tested.")
            + (f" Only one learning rate was tested at the chosen values of the other parameters for {names(one)}, "
               "so their width is not measured." if one else "")
            + (f" The range of {names(edge)} reaches the end of the learning rates tested, so it may be wider."
               if edge else ""))
    return [Para(text), table(rob, {
        "cell": lambda r: r["cell"], "recipe": lambda r: r["recipe"], "chosen lr": lambda r: num(r["chosen_lr"], ".3g"),
        st.objective: lambda r: num(r["chosen_value"]), f"lr range within {margin:g}": lambda r:
        f"[{num(r['lr_lo'], '.3g')}, {num(r['lr_hi'], '.3g')}]", "decades": lambda r: num(r["decades"], ".2f"),
        "lrs within / tested": lambda r: f"{r['lrs_within']} / {r['lrs_tested']}",
        "at the edge": lambda r: r["edge"] or "-", "fragile": lambda r: "yes" if r["fragile"] else "no"})]


def _tuned_vs_default(ctx: Context, pair: tuple[Suite, Suite] | None) -> list:
    """The leaderboard at defaults beside the one at tuned settings, and per cell whether the ranking moves."""
    from bench.report import data as D
    su, rs = ctx.suite, ctx.suite.report
    if pair is None:
        return [Para(f"No tuned settings file (suites/tuned/{su.name}.toml, or tuned/{su.name}.toml in the results "
                     "directory, which `bench tune` writes) yet, so there are no tuned runs to compare.")]
    boards = [ctx.tables["leaderboard"] if s is su else T.leaderboard(s, D.load(s, ctx.root)) for s in pair]
    cmp = TU.side_by_side(*boards, set(pair[1].cell_overrides), su)
    n_default = int(boards[0]["n"].sum()) if boards[0].height else 0
    if not cmp.height or not int(cmp["n_tuned"].sum()):
        return [Para(f"Tuned values are written, but no `bench suite {su.name} --tuned` runs have finished yet.")]
    if not n_default:
        expected = int(boards[0]["expected"].sum()) if boards[0].height else 0
        return [Para(f"The {expected} runs of the suite at its defaults are missing from this results directory, so the "
                     f"leaderboards at defaults and at tuned settings cannot be compared here (`bench suite {su.name} "
                     "--defaults` runs them; a published report needs them beside the tuned runs).")]
    ctx.tables["tuned_vs_default"] = cmp
    items = ("with `eval.items = \"per_seed\"` each seed draws its own held-out problems, so the tuned column is not "
             "scored on the problems tuning chose on" if su.eval.items == "per_seed" else
             "tuning scored on the same held-out problems the report uses, so the tuned column is somewhat optimistic")
    out = [Para(f"Defaults against tuned settings: the leaderboard's {rs.primary} (mean over the evaluation seeds "
                f"{_seed_list(su.all_seeds)} with its 95% bootstrap interval), each recipe's rank in its cell at that "
                f"setting (1 = best mean), and the paired difference from {ctx.base} with its verdict, at the suite's "
                f"defaults and at its tuned settings (tuned: the recipe has tuned values in the cell). The evaluation "
                f"seeds are not the tuning seeds; {items}. A rank is of means: a move between recipes whose "
                "difference is undecided may be noise (the verdicts say which are decided).")]

    def side(s: str):
        return lambda r: (f"{ci(r[f'primary_mean_{s}'], r[f'primary_lo_{s}'], r[f'primary_hi_{s}'])} "
                          f"(n={r[f'n_{s}']}/{r[f'expected_{s}']})")

    out.append(table(cmp, {
        "cell": lambda r: r["cell"], "recipe": lambda r: r["recipe"], "tuned": lambda r: "yes" if r["tuned"] else "no",
        **{k: f for s, name in (("default", "defaults"), ("tuned", "tuned")) for k, f in (
            (f"{name}: {rs.primary} [95% CI]", side(s)),
            (f"{name}: rank", lambda r, s=s: "-" if r[f"rank_{s}"] is None else str(r[f"rank_{s}"])),
            (f"{name}: Δ vs {ctx.base}", lambda r, s=s: num(r[f"diff_{s}"], "+.3f")),
            (f"{name}: verdict", lambda r, s=s: r[f"verdict_{s}"] or "-"))},
        "tuned − defaults": lambda r: num(r["delta"], "+.3f")}))
    for cell in cmp["cell"].unique(maintain_order=True).to_list():
        out.append(Para(_ranking_change(ctx, cell, cmp.filter(pl.col("cell") == cell))))
    return out


def _ranking_change(ctx: Context, cell: str, c: pl.DataFrame) -> str:
    """One cell's plain sentence: is the ranking at tuned settings the one at defaults?"""
    rs = ctx.suite.report
    rc = TU.rank_compare(dict(zip(c["recipe"], c["primary_mean_default"])), dict(zip(c["recipe"], c["primary_mean_tuned"])),
                         rs.higher_is_better, list(ctx.suite.recipes))
    if len(rc["common"]) < 2:
        return (f"{cell}: fewer than two recipes have finished runs at both settings, so the rankings cannot be "
                "compared.")
    if not rc["moves"]:
        text = f"{cell}: the ranking by {rs.primary} is unchanged from defaults to tuned settings: {', '.join(rc['b'])}."
    else:
        text = (f"{cell}: the ranking by {rs.primary} changes from defaults to tuned settings: "
                + ", ".join(f"{r} moves from {a} to {b}" for r, a, b in rc["moves"])
                + f" (defaults: {', '.join(rc['a'])}; tuned: {', '.join(rc['b'])}).")
    one = rc["only_a"] + rc["only_b"]
    if one:
        text += f" Left out (finished runs at one setting only): {names(one)}."
    flips = [f"{r['recipe']} {r['verdict_default']} → {r['verdict_tuned']}" for r in c.iter_rows(named=True)
             if r["recipe"] in rc["common"] and r["verdict_default"] != r["verdict_tuned"]]
    return text + (f" Verdicts against {ctx.base} that change: {'; '.join(flips)}." if flips
                   else f" Every verdict against {ctx.base} is the same at both settings.")


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
