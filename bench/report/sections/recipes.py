"""Recipes as diffs from the baseline."""
from __future__ import annotations



from bench.report import tables as T
from bench.report.context import Context
from bench.report.registry import section
from bench.report.render import Heading, Para, table


def _tables(ctx: Context) -> dict:
    return {"recipe_diffs": T.recipe_diffs(ctx.suite, ctx.data)}


@section("recipes", tables=_tables, writes=("recipe_diffs",))
def recipes(ctx: Context) -> list:
    """Each recipe's parts where they differ from the baseline's."""
    diffs = ctx.tables["recipe_diffs"]
    out = [Heading(2, f"Recipes as diffs from {ctx.base}"),
           Para(f"Each recipe's parts (with this suite's overrides) where they differ from {ctx.base}'s; field paths "
                "as in `Recipe.diff` (see ALGORITHMS.md for the parts).")]
    out.append(table(diffs, {"recipe": lambda r: r["recipe"], "field": lambda r: f"`{r['field']}`",
                             ctx.base: lambda r: r["baseline"], "recipe's value": lambda r: r["value"]})
               if diffs.height else Para("No recipe differs from the baseline."))
    return out
