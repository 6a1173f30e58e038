"""Group reward spread and gradient weight (per-group logging)."""
from __future__ import annotations

from bench.report import tables as T
from bench.report.context import Context
from bench.report.registry import section
from bench.report.render import Heading, Para, num, table


def _tables(ctx: Context) -> dict:
    return {"group_weights": T.step_summary(ctx.suite, ctx.data, T.group_metrics(T.GROUP_WEIGHTS_GROUP))}


@section("group_weights", tables=_tables, writes=("group_weights",))
def group_weights(ctx: Context) -> list:
    """Does std normalisation up-weight low-variance groups? (per-group logging)"""
    g = ctx.tables.get("group_weights")
    out = [Heading(2, "Group reward spread and gradient weight")]
    if g is None:
        return out + [Para("Per-group statistics (quantiles of the groups' reward std, the share of gradient weight "
                           "on low-variance groups) are not logged in these runs: they were recorded before the "
                           "engine logged them.")]
    out.append(Para("Per step, the groups with a nonzero reward std are split at the step's median std. "
                    "\"weight on low-std\" is the share of the step's gradient weight (Σ over a group's tokens of "
                    "|advantage| × aggregation weight) on the groups below the median; \"low-std groups\" their share "
                    "of the groups. A weight share above the group share means low-variance groups are up-weighted "
                    "(what std normalisation does, per Dr. GRPO); means over steps and finished seeds."))
    out.append(table(g, {
        "cell": lambda r: r["cell"], "recipe": lambda r: r["recipe"],
        "group std q10 / q50 / q90": lambda r: " / ".join(num(r[k], ".3f") for k in ("group_std_q10", "group_std_q50",
                                                                                  "group_std_q90")),
        "weight on low-std": lambda r: num(r["low_std_weight"], ".3f"),
        "low-std groups": lambda r: num(r["low_std_groups"], ".3f")}))
    return out
