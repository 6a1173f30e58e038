"""Manifest: what reproduces the report, and the runs table (runs.csv)."""
from __future__ import annotations

import polars as pl

from bench.report import manifest as M
from bench.report.context import Context
from bench.report.data import Data
from bench.report.prose import run_cells
from bench.report.registry import section
from bench.report.render import Code, Heading, Para, Table


def runs_table(data: Data) -> pl.DataFrame:
    """Every expected run with its status (the manifest's run ids)."""
    return data.runs.select("cell", "recipe", "seed", "run_id", "status", "steps_done", "spent", "reason")


def _tables(ctx: Context) -> dict:
    return {"runs": runs_table(ctx.data)}


@section("manifest", tables=_tables, writes=("runs",))
def manifest(ctx: Context) -> list:
    """What reproduces the report, and the CSVs beside it."""
    rows = M.manifest(ctx.suite, ctx.root, ctx.data.metas, ctx.data.runs.height, run_cells(ctx))
    return [Heading(2, "Manifest"),
            Para("Reproduce this report (a pure function of the results directory and the bootstrap seed):"),
            Code(rows[0][1]),
            Table(("item", "value"), tuple((k, v) for k, v in rows[1:])),
            Para("Tables as CSV beside this file: " + ", ".join(f"`{n}.csv`" for n in sorted(ctx.tables)) + ".")]
