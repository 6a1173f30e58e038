"""Tuning: what `bench tune` did and what it bought (issue 23), from its trial runs under the results
directory and the suite's two expansions.
"""
from __future__ import annotations

import json

import polars as pl

from bench.report import figures as F
from bench.report import tables as T
from bench.report import tuning as TU
from bench.report.context import Context
from bench.report.prose import names
from bench.report.registry import section
from bench.report.render import Heading, Para, ci, num, table
from bench.suite import Suite


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
        return su.replace(cell_overrides={}, tuned_from=None), su
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
