"""Failed, diverged and missing runs."""
from __future__ import annotations

import polars as pl

from bench.report.context import Context
from bench.report.data import Data
from bench.report.prose import stale_text
from bench.report.registry import section
from bench.report.render import Heading, Para, num, table


def problems_table(data: Data) -> pl.DataFrame:
    """Expected runs without a finished record: diverged, failed and missing, never dropped silently."""
    return (data.runs.filter(pl.col("status") != "finished")
            .select("cell", "recipe", "seed", "run_id", "status", "steps_done", "spent", "reason"))


@section("problems")
def problems(ctx: Context) -> list:
    """The runs that did not finish, and why."""
    bad = problems_table(ctx.data)
    out = [Heading(2, "Failed, diverged and missing runs")]
    if ctx.data.stale:
        out.append(Para(stale_text(ctx)))
    if not bad.height:
        return out + [Para(f"None: all {ctx.data.runs.height} expected runs finished.")]
    out.append(Para(f"{bad.height} of {ctx.data.runs.height} expected runs did not finish. They are not averaged into "
                    "any statistic above (a diverged run has no accuracy at the budget); `missing` runs have no "
                    "record yet (rerun `bench suite` to resume them)."))
    out.append(table(bad, {"cell": lambda r: r["cell"], "recipe": lambda r: r["recipe"], "seed": lambda r: str(r["seed"]),
                           "run id": lambda r: f"`{r['run_id']}`", "status": lambda r: r["status"],
                           "steps": lambda r: str(r["steps_done"]), "budget spent": lambda r: num(r["spent"], ".2f"),
                           "reason": lambda r: r["reason"] or "-"}))
    return out
