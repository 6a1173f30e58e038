"""Clipping and off-policy: clip fractions, the gradient-norm clip and the ratio telemetry."""
from __future__ import annotations

import polars as pl

from bench.report import figures as F
from bench.report import tables as T
from bench.report import tuning as TU
from bench.report.context import Context
from bench.report.prose import names
from bench.report.registry import section
from bench.report.render import Heading, Para, num, table


def _tables(ctx: Context) -> dict:
    s, d = ctx.suite, ctx.data
    return {"clipping": T.clipping(s, d), "off_policy": T.step_summary(s, d, T.group_metrics(T.OFF_POLICY_GROUP))}


@section("clipping", tables=_tables, writes=("clipping", "off_policy"), needs=("leaderboard",),
         figures=("clipping.png", "off_policy.png"))
def clipping(ctx: Context) -> list:
    """Clip fractions and the gradient-norm clip per recipe, then the ratio telemetry."""
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
