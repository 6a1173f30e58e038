"""Model scale: how the comparison with the baseline moves with model size (suites with ≥ 2 scales
of a task); the findings the summary states in a sentence.
"""
from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from bench.report import figures as F
from bench.report import tables as T
from bench.report.context import Context
from bench.report.data import finished
from bench.report.prose import cap, names
from bench.report.registry import section
from bench.report.render import Heading, Para, ci, num, table


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


def _tables(ctx: Context) -> dict:
    return {"scales": T.scales(ctx.suite, ctx.data, ctx.tables["leaderboard"])}


@section("model_scale", tables=_tables, writes=("scales",), needs=("leaderboard",), figures=("scales.png",))
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
