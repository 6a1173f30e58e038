"""Summary: the grid, the settings, the primary metric and each cell's verdicts in a paragraph."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl

from bench.report import figures as F
from bench.report import manifest as M
from bench.report import stats
from bench.report import tables as T
from bench.report.context import Context
from bench.report.data import Data, finished, run_config
from bench.report.prose import names, run_cells, span, stale_text
from bench.report.registry import section
from bench.report.render import Heading, Para, ci, num
from bench.report.tables import baseline
from bench.report.sections.coverage import coverage_figure, kinds_text, with_kind
from bench.report.sections.leaderboard import margin_spread
from bench.report.sections.model_scale import scale_findings, scale_groups, scale_summary
from bench.suite import Suite


SKILL_FORMAT = 0.95  # least mean format rate of sampled answers at the start: the gain is not a switch of format
SKILL_SE = 5.0  # least baseline gain, in standard errors of its mean over seeds: RL measurably improves skill
# a sampled accuracy that passes the skill check while greedy accuracy gains less than this many SE:
# RL sharpened sampling toward the greedy answer rather than improving the task's greedy accuracy
SHARPENING_SE = 2.0


def skill_check(suite: Suite, data: Data) -> pl.DataFrame | None:
    """Per cell, whether it compares skill rather than format: the mean format rate of sampled answers
    at fraction 0 (every finished run), and the baseline's gain in the report's accuracy (last
    evaluation − first, per seed) with its standard error over seeds. Beside it, the same gain in
    greedy accuracy (greedy_*): where the report's accuracy passes while greedy accuracy does not rise
    (`sharpening`: greedy gain under SHARPENING_SE standard errors), RL made sampling more like greedy
    decoding rather than the policy better at the task (a report reading greedy accuracy never is:
    its two gains are one). None when no run logged a format rate
    (runs from before eval/format_rate, or evaluations without samples)."""
    ev = finished(data.evals)
    if "format_rate" not in ev.columns or not ev["format_rate"].drop_nulls().drop_nans().len():
        return None
    base = baseline(suite)
    rows = []
    for cell in (c.name for c in suite.cells):
        e = ev.filter(pl.col("cell") == cell)
        fmt = e.filter(pl.col("fraction") == 0)["format_rate"].drop_nulls().drop_nans()
        gains, greedy = [], []
        for _, g in e.filter(pl.col("recipe") == base).sort("fraction").group_by("seed", maintain_order=True):
            if g.height >= 2:
                gains.append(float(g["acc"][-1] - g["acc"][0]))
                greedy.append(float(g["acc_greedy"][-1] - g["acc_greedy"][0]))
        n = len(gains)
        m, se, z = _gain(gains)
        gm, gse, gz = _gain(greedy)
        start = float(fmt.mean()) if fmt.len() else math.nan
        skill = bool(start >= SKILL_FORMAT and n >= 2 and z >= SKILL_SE)
        rows.append({"cell": cell, "format_start": start, "baseline": base, "seeds": n, "gain_mean": m,
                     "gain_se": se, "gain_z": z, "skill": skill, "greedy_gain_mean": gm, "greedy_gain_se": gse,
                     "greedy_gain_z": gz, "sharpening": bool(skill and not gz >= SHARPENING_SE)})
    return pl.DataFrame(rows, schema={"cell": pl.String, "format_start": pl.Float64, "baseline": pl.String,
                                      "seeds": pl.Int64, "gain_mean": pl.Float64, "gain_se": pl.Float64,
                                      "gain_z": pl.Float64, "skill": pl.Boolean, "greedy_gain_mean": pl.Float64,
                                      "greedy_gain_se": pl.Float64, "greedy_gain_z": pl.Float64,
                                      "sharpening": pl.Boolean})


def _gain(gains: list[float]) -> tuple[float, float, float]:
    """Mean of per-seed gains, its standard error, and the mean in standard errors (inf for a positive
    mean with no spread; NaN under 2 seeds)."""
    n = len(gains)
    m = stats.mean(gains)
    se = float(np.std(gains, ddof=1) / math.sqrt(n)) if n >= 2 else math.nan
    z = m / se if n >= 2 and se > 0 else (math.inf if n >= 2 and m > 0 else math.nan)
    return m, se, z


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
    return (f"Skill check (a cell compares skill when at least {SKILL_FORMAT:g} of the sampled answers are well-formed "
            f"at the start, so that a gain is not a switch of format, and {ctx.base}'s gain in {ctx.suite.report.accuracy_text} "
            f"from the first evaluation to the last is at least {SKILL_SE:g} standard errors of its mean over seeds; "
            f"a sampled accuracy's gain is sharpening when greedy accuracy gains less than {SHARPENING_SE:g} standard "
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


def _tables(ctx: Context) -> dict:
    return {"skill_check": skill_check(ctx.suite, ctx.data)}


@section("summary", tables=_tables, writes=("skill_check",),
         needs=("leaderboard", "power", "coverage", "claims", "scales"),
         figures=("claims.png", "leaderboard.png", "pass_at_k_baseline.png"))
def summary(ctx: Context) -> list:
    """The grid and its runs, the settings, the primary metric, the warm starts, and each cell's verdicts."""
    runs, board, pw = ctx.data.runs, ctx.tables["leaderboard"], ctx.tables["power"]
    rs = ctx.suite.report
    out = [Heading(2, "Summary")]
    if ctx.suite.description:
        out.append(Para(ctx.suite.description))
    claims_ = ctx.tables.get("claims")
    if claims_ is not None:  # a claims suite leads with its verdicts
        counts = ", ".join(f"{claims_.filter(pl.col('verdict') == v).height} {v}" for v in T.CLAIM_VERDICTS)
        out.append(ctx.figure("claims.png", F.claims(claims_),
                              f"The {claims_.height} claims' contrasts and verdicts ({counts}; Holm over the engaged claims): "
                              "see Claims below for each claim's statement, mechanism and outcome."))
    if "coverage" in ctx.tables:
        out.append(coverage_figure(ctx))
    elif len(ctx.suite.recipes) == 1:  # the baseline alone (what RL does to it): its coverage curves lead
        curves = F.pass_at_k_curves(finished(ctx.data.evals), ctx.cells, ctx.colors)
        if curves is not None:
            out.append(ctx.figure("pass_at_k_baseline.png", curves,
                                  f"{ctx.base}'s pass@k against k at each run's last evaluation (mean over seeds, band "
                                  "min–max) beside the warm start's (dashed): a curve that ends above the warm start's "
                                  "at large k solves problems the warm start never solved in k tries (coverage); one "
                                  "that crosses it below has traded coverage for pass@1. The Skill check below gives "
                                  "the gains with their standard errors."))
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
