"""Phrases that several report sections write alike: a list of names, a count of seeds, the stale
runs' sentence, which cell a run counts under."""
from __future__ import annotations

import math

import polars as pl

from bench.report.context import Context
from bench.report.render import num


def names(xs: list[str]) -> str:
    return ", ".join(xs) if xs else "none"


def cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def seeds_cell(n) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    return ">10000" if math.isinf(n) else str(int(n))


def span(r: tuple[float, float]) -> str:
    return f"{num(r[0])}–{num(r[1])}, a spread of {num(r[1] - r[0])}"


def stale_text(ctx: Context) -> str:
    n = len(ctx.data.stale)
    return (f"{n} other recorded run{'s are' if n != 1 else ' is'} tagged suite={ctx.suite.name} but not part of "
            "its current expansion (an older version of the suite file, or a change in how configs hash into run "
            "ids); not used here. `bench suite " + ctx.suite.name + "` runs the current configurations.")


def run_cells(ctx: Context) -> dict[str, str]:
    """run_id -> cell, cells in suite order (a run shared by two cells is listed under the first)."""
    out: dict[str, str] = {}
    for cell in ctx.cells:
        for rid in ctx.data.runs.filter(pl.col("cell") == cell)["run_id"].to_list():
            out.setdefault(rid, cell)
    return out
