"""KL to the reference, on the training batches."""
from __future__ import annotations

from bench.report import figures as F
from bench.report.context import Context
from bench.report.registry import section
from bench.report.render import Heading, Para


@section("kl", figures=("kl.png",))
def kl(ctx: Context) -> list:
    """The policy's KL (k1, k3) to the reference on the training batches against compute."""
    curves = ctx.curves
    return [Heading(2, "KL to the reference"),
            Para("Mean per-token KL of the policy to the reference (the warm start) on each training batch, k1 = "
                 "log π − log π_ref and k3 = e^u − 1 − u with u = log π_ref − log π, logged for every recipe whatever "
                 "its KL placement; averaged in bins of 1/20 of the budget, mean over seeds, band min–max."),
            ctx.figure("kl.png", F.step_metrics(curves, {"kl/k1": "KL k1", "kl/k3": "KL k3"}, ctx.cells, ctx.budgets,
                                                ctx.colors, ctx.xlabels), "KL (k1, k3) against compute.")]
