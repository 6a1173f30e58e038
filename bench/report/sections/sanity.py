"""Sanity checks: contrasts that hold by construction, kept out of the claims."""
from __future__ import annotations

import polars as pl

from bench.report import tables as T
from bench.report.context import Context
from bench.report.prose import names
from bench.report.registry import section
from bench.report.render import Heading, Para, ci, num, table


def _tables(ctx: Context) -> dict:
    return {"sanity": T.claims(ctx.suite, ctx.data, ctx.tables["leaderboard"], kind="sanity")}


@section("sanity", tables=_tables, writes=("sanity",), needs=("leaderboard",))
def sanity(ctx: Context) -> list:
    """Contrasts that hold by construction: checks that the code is right, kept out of the claims."""
    t = ctx.tables.get("sanity")
    if t is None:
        return []
    failed = t.filter(~pl.col("passed"))["claim"].to_list()
    return [Heading(2, "Sanity checks"),
            Para(f"{t.height} contrasts that hold by construction (declared `kind = \"sanity\"` in the suite file): "
                 "each must pass, but none is a finding, none is counted among the claims, and they form a Holm "
                 "family of their own. " + (f"**{len(failed)} failed: {names(failed)}** — the code or the suite is "
                                            "wrong." if failed else "All pass.")),
            table(t, {"check": lambda r: r["claim"], "statement": lambda r: r["statement"],
                      "contrast": lambda r: f"{r['a']} − {r['b']}", "metric": lambda r: r["metric"],
                      "Δ [95% CI]": lambda r: ci(r["diff"], r["diff_lo"], r["diff_hi"], ".3g"),
                      "p_Holm": lambda r: num(r["p_holm"], ".2g"), "n": lambda r: str(r["n"]),
                      "passed": lambda r: "yes" if r["passed"] else "**no**"})]
