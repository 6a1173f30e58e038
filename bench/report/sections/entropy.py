"""Entropy of the policy on the training batches."""
from __future__ import annotations

from bench.report import figures as F
from bench.report.context import Context
from bench.report.registry import section
from bench.report.render import Heading, Para


@section("entropy", figures=("entropy.png",))
def entropy(ctx: Context) -> list:
    """The policy's entropy on the training batches against compute."""
    return [Heading(2, "Entropy"),
            Para("Mean per-token entropy of the policy on each training batch (nats), binned like KL."),
            ctx.figure("entropy.png", F.step_metrics(ctx.curves, {"policy/entropy": "entropy (nats)"},
                                                     ctx.cells, ctx.budgets, ctx.colors, ctx.xlabels),
                       "Policy entropy against compute.")]
