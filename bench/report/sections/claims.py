"""Claims: the suite's claims of the literature, each a paired contrast with a verdict."""
from __future__ import annotations

import polars as pl

from bench.report import tables as T
from bench.report.context import Context
from bench.report.prose import names
from bench.report.registry import section
from bench.report.render import Heading, Para, ci, num, table


def _tables(ctx: Context) -> dict:
    return {"claims": T.claims(ctx.suite, ctx.data, ctx.tables["leaderboard"])}


@section("claims", tables=_tables, writes=("claims",), needs=("leaderboard",))
def claims(ctx: Context) -> list:
    """The suite's claims of the literature, each a paired contrast with a verdict (only when it has some)."""
    table_ = ctx.tables.get("claims")
    if table_ is None:
        return []
    counts = {v: table_.filter(pl.col("verdict") == v).height for v in T.CLAIM_VERDICTS}
    out = [Heading(2, "Claims"),
           Para(f"{table_.height} claims of the literature, each an experiment declared in the suite file: a contrast "
                "a − b of two arms (recipe@cell) on one metric, paired by seed, with its 95% paired t interval and "
                "Holm's adjustment over the engaged claims. Each claim first passes an engagement gate: the metric "
                "through which its part acts must reach the value at which it acts enough to matter (the gate "
                "column: metric, arm, value measured, threshold); below it the verdict is *not engaged* (the part "
                "barely acted, so the runs say nothing about the paper) and the claim is left out of Holm's family. "
                "One rule decides the others: *reproduced* when the adjusted p < 0.05 in the claimed direction (for "
                "an equivalence claim: the 90% interval lies inside ±margin); *contradicted* when it is significant "
                "the other way (an equivalence claim: significant and not inside ±margin); *undecided at this power* "
                "otherwise. A difference shown smaller than the margin qualifies any of them (the qualifier column), "
                "it is not a verdict of its own. "
                + ", ".join(f"{n} {v}" for v, n in counts.items()) + ". "
                + _one_part(table_)),
           table(table_, {
               "claim": lambda r: r["claim"], "statement": lambda r: r["statement"],
               "contrast": lambda r: f"{r['a']} − {r['b']}", "metric": lambda r: r["metric"],
               "expect": lambda r: r["expect"] + (f" (±{r['margin']:g})" if r["expect"] == "equivalent" else ""),
               "a / b": lambda r: f"{num(r['mean_a'], '.4g')} / {num(r['mean_b'], '.4g')}",
               "Δ [95% CI]": lambda r: ci(r["diff"], r["diff_lo"], r["diff_hi"], ".3g"),
               "p_Holm": lambda r: num(r["p_holm"], ".2g"), "n": lambda r: str(r["n"]),
               "mechanism Δ [95% CI]": lambda r: _side(r, "mechanism"),
               "outcome Δ [95% CI]": lambda r: _side(r, "outcome"),
               "finding / leaderboard": lambda r: f"{r['finding']} / {r['leaderboard'] or '-'}",
               "parts differing": lambda r: f"{r['parts_differing']} ({r['differs'] or '-'})",
               "gate (value ≥ threshold)": _gate,
               "verdict": lambda r: r["verdict"] + (f" ({r['qualifier']})" if r["qualifier"] else "")}),
           Para("Mechanism and outcome: every claim is also read on the mechanism it works through (its own metric "
                "when that is a step metric, else the one the suite file names: KL drift, entropy, clip share, ratio "
                f"drift, length slope) and on the outcome ({ctx.suite.report.primary}, its own metric when that is an "
                "accuracy metric), the same arms paired by seed, each with its unadjusted p; only the claim's metric "
                "decides its verdict."),
           Para(_step_cost(table_)),
           Para(_claims_vs_leaderboard(ctx, table_)),
           Para("Sources: " + "; ".join(f"{r['claim']}: {r['paper']}" for r in table_.iter_rows(named=True)) + ".")]
    return out


def _step_cost(t: pl.DataFrame) -> str:
    """The claims whose arms differ in FLOPs per step, each also read at matched steps."""
    text = (f"Step cost: every claim compares its arms at matched FLOPs, the benchmark's premise. Where the arms' "
            f"FLOPs per optimizer step differ by more than {T.STEP_COST_TOL:.0%} (a part that adds a forward pass, "
            "or changes how long answers are), an accuracy claim is also read at matched steps: mean accuracy over "
            "the first S updates, S the fewest any of its runs made")
    shown = t.filter(pl.col("matched_steps").is_not_null())
    if not shown.height:
        return text + "; no claim's arms differ that much."
    return text + ": " + "; ".join(
        f"{r['claim']} (a/b {r['flops_per_step_ratio']:.2f}× FLOPs per step): {ci(r['diff'], r['diff_lo'], r['diff_hi'], '.3g')} "
        f"at matched FLOPs, {ci(r['steps_diff'], r['steps_lo'], r['steps_hi'], '.3g')} (p {num(r['steps_p'], '.2g')}) over "
        f"the first {r['matched_steps']} steps" for r in shown.iter_rows(named=True)) + "."


def _gate(r: dict) -> str:
    """A claim's engagement gate as 'metric on arm: value ≥ threshold ✓' ('-' without one)."""
    if r["engage"] is None:
        return "-"
    arm = "|a − b|" if r["engage_arm"] == "diff" else f"arm {r['engage_arm']}"
    return (f"{r['engage']} on {arm}: {num(r['engage_value'], '.3g')} {'≥' if r['engaged'] else '<'} "
            f"{r['engage_min']:g}")


def _side(r: dict, key: str) -> str:
    """A claim's mechanism or outcome contrast as 'metric: Δ [lo, hi] (p)', '-' where it has none."""
    if r[key] is None:
        return "-"
    return f"{r[key]}: {ci(r[f'{key}_diff'], r[f'{key}_lo'], r[f'{key}_hi'], '.3g')} (p {num(r[f'{key}_p'], '.2g')})"


def _one_part(t: pl.DataFrame) -> str:
    """How many claims isolate their mechanism (one part of the arms' configs differs)."""
    one = t.filter(pl.col("parts_differing") == 1).height
    many = t.filter(pl.col("parts_differing") > 1)["claim"].to_list()
    text = (f"Parts differing (computed from the arms' configs: recipe parts, then training settings and budget): "
            f"{one} of {t.height} claims are one-part ablations")
    if many:
        text += (f"; {len(many)} compare arms that differ in several parts ({names(many)}), so they test the whole "
                 "recipes, not the mechanism the claim names")
    return text + "."


def _claims_vs_leaderboard(ctx: Context, claims: pl.DataFrame) -> str:
    """Where a claim's contrast is also a leaderboard comparison, whether the two agree, and why not."""
    rs, base = ctx.suite.report, ctx.base
    text = ("Finding: what the contrast shows by the leaderboard's rule (greater / less when p_Holm < 0.05, else "
            "equivalent when the 90% interval lies inside ±margin, else undecided); the verdict reads it against "
            "what the claim expects (a not-engaged claim is outside Holm's family: its finding tests nothing). "
            "Leaderboard: the "
            f"leaderboard's verdict on the same contrast, for a claim that compares a recipe with {base} in one cell "
            f"on {rs.primary} (else -).")
    shared = claims.filter(pl.col("leaderboard").is_not_null())
    if not shared.height:
        return text
    board = ctx.tables["leaderboard"]
    agree = shared.filter(pl.col("finding") == pl.col("leaderboard"))["claim"].to_list()
    family = claims.filter(pl.col("engaged").fill_null(True)).height
    text += (f" Both use the same paired t-test and TOST; Holm's family differs (the {family} engaged claims here, the "
             f"cell's comparisons with {base} there). The finding agrees with the leaderboard for {len(agree)} of "
             f"{shared.height} ({names(agree)})")
    differ = []
    for r in shared.filter(pl.col("finding") != pl.col("leaderboard")).iter_rows(named=True):
        (ra, cell), (rb, _) = (x.split("@", 1) for x in (r["a"], r["b"]))
        other = ra if rb == base else rb
        row = board.filter((pl.col("cell") == cell) & (pl.col("recipe") == other)).row(0, named=True)
        why = (f"the claim's own margin ±{r['margin']:g} against the report's ±{rs.margin:g}"
               if r["margin"] != rs.margin else "Holm's family")
        differ.append(f"{r['claim']} is {r['finding']} here (p_Holm {num(r['p_holm'], '.2g')}) and {r['leaderboard']} "
                      f"there (p_Holm {num(row['p_holm'], '.2g')}): {why}")
    return text + (f"; it differs for {len(differ)}: " + "; ".join(differ) + "." if differ else ".")
