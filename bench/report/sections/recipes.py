"""Recipes as diffs from the baseline."""
from __future__ import annotations

import polars as pl

from algorithms.serialize import flatten
from bench.report.context import Context
from bench.report.data import Data, run_config
from bench.report.registry import section
from bench.report.render import Heading, Para, table
from bench.report.tables import baseline
from bench.suite import Suite


def recipe_diffs(suite: Suite, data: Data | None = None) -> pl.DataFrame:
    """Each recipe's parts (suite overrides applied) as field-by-field differences from the baseline's.

    Training settings overridden per recipe (train.*) are included with a `train.` prefix."""
    base = baseline(suite)
    cell = suite.cells[0].name
    ref = run_config(suite, data, cell, base)
    ref_train = flatten(ref.to_dict()["train"])
    rows = []
    for recipe in suite.recipes:
        cfg = run_config(suite, data, cell, recipe)
        if recipe != base:
            for k, (mine, theirs) in cfg.recipe.diff(ref.recipe).items():
                rows.append({"recipe": recipe, "field": k, "baseline": _show(theirs), "value": _show(mine)})
        train = flatten(cfg.to_dict()["train"])
        for k in sorted(train.keys() | ref_train.keys()):
            if train.get(k) != ref_train.get(k):
                rows.append({"recipe": recipe, "field": f"train.{k}", "baseline": _show(ref_train.get(k)),
                             "value": _show(train.get(k))})
    return pl.DataFrame(rows, schema={"recipe": pl.String, "field": pl.String, "baseline": pl.String,
                                      "value": pl.String})


def _show(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return format(v, "g")
    return str(v)


def _tables(ctx: Context) -> dict:
    return {"recipe_diffs": recipe_diffs(ctx.suite, ctx.data)}


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
