"""`bench results SUITE`: a terminal leaderboard from results.scan().

Per cell and recipe, over the seeds that finished: final held-out greedy accuracy mean ± std,
final mean length, mean KL (k3) and clip fractions over the run's steps, FLOPs spent over the
budget (in the budget's unit). Diverged and failed runs are not averaged in; they are counted and listed.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import polars as pl

from bench import results

NUMERIC = ["acc", "len", "kl_k3", "clip_low", "clip_high", "spent"]


def _nanmean(col: str) -> pl.Expr:
    return pl.col(col).fill_nan(None).mean()


def per_run(root: Path, run_ids: list[str] | None = None, suite: str | None = None) -> pl.DataFrame:
    """One row per recorded run: ids, labels, status and the final/mean metrics the leaderboard uses."""
    t = results.scan(root)
    runs = t["runs"]
    runs = runs.filter(pl.col("run_id").is_in(run_ids)) if run_ids is not None else runs.filter(pl.col("suite") == suite)
    final = (t["evals"].filter(pl.col("fraction") == pl.col("fraction").max().over("run_id"))
             .select("run_id", pl.col("eval/acc_greedy").alias("acc"), pl.col("eval/len_mean").alias("len")))
    steps = t["steps"].group_by("run_id").agg(
        _nanmean("kl/k3").alias("kl_k3"), _nanmean("policy/clip_frac_low").alias("clip_low"),
        _nanmean("policy/clip_frac_high").alias("clip_high"))
    return (runs.join(final, on="run_id", how="left").join(steps, on="run_id", how="left")
            .with_columns(pl.coalesce(pl.col("cell"), pl.format("{}/{}", "task", "scale")).alias("cell"),
                          (pl.when(pl.col("budget_kind") == "steps").then(pl.col("steps_done"))
                           .when(pl.col("budget_kind") == "tokens").then(pl.col("gen_tokens"))
                           .otherwise(pl.col("flops_spent")) / pl.col("budget")).alias("spent"))
            .collect())


def table(runs: pl.DataFrame) -> pl.DataFrame:
    """Aggregate finished runs per (cell, recipe); counts of the other statuses beside them."""
    ok = runs.filter(pl.col("status") == "finished")
    agg = ok.group_by("cell", "recipe").agg(
        pl.len().alias("n"), pl.col("acc").mean().alias("acc_mean"), pl.col("acc").std().alias("acc_std"),
        *[_nanmean(c).alias(c) for c in NUMERIC if c != "acc"], pl.col("wall_s").mean().alias("wall_s"))
    bad = runs.group_by("cell", "recipe").agg((pl.col("status") != "finished").sum().alias("not_finished"))
    return (bad.join(agg, on=["cell", "recipe"], how="left").with_columns(pl.col("n").fill_null(0))
            .sort(["cell", "acc_mean", "recipe"], descending=[False, True, False], nulls_last=True))


def _f(x, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def print_leaderboard(runs: pl.DataFrame, expected: int | None = None, title: str = "", out=None) -> None:
    out = out or sys.stdout  # resolved per call: a default bound at import outlives a replaced stdout
    if title:
        print(title, file=out)
    if runs.is_empty():
        print("no recorded runs" + (f" (of {expected} in the suite)" if expected else ""), file=out)
        return
    t = table(runs)
    head = (f"{'recipe':<13} {'final acc':>15} {'n':>3} {'not ok':>6} {'len':>7} {'KL k3':>9} {'clip lo':>8} "
            f"{'clip hi':>8} {'spent/budget':>12} {'wall':>7}")
    for cell in t["cell"].unique(maintain_order=True):
        print(f"\n{cell}\n{head}", file=out)
        for r in t.filter(pl.col("cell") == cell).iter_rows(named=True):
            acc = _f(r["acc_mean"], ".3f") + (" ± " + _f(r["acc_std"], ".3f") if r["n"] and r["n"] > 1 else "")
            print(f"{r['recipe']:<13} {acc:>15} {r['n']:>3} {r['not_finished']:>6} {_f(r['len'], '.1f'):>7} "
                  f"{_f(r['kl_k3'], '.2e'):>9} {_f(r['clip_low'], '.4f'):>8} {_f(r['clip_high'], '.4f'):>8} "
                  f"{_f(r['spent'], '.3f'):>12} {_f(r['wall_s'], '.1f'):>6}s", file=out)
    print("\nfinal acc: held-out greedy accuracy at the end of the budget, mean ± std over finished seeds; "
          "len: its mean length (tokens); KL and clip fractions: means over training steps", file=out)
    bad = runs.filter(pl.col("status") != "finished").sort("cell", "recipe", "seed")
    if not bad.is_empty():
        print(f"\nnot finished ({bad.height}):", file=out)
        for r in bad.iter_rows(named=True):
            print(f"  {r['status']:<8} {r['cell']} {r['recipe']} seed {r['seed']} ({r['run_id']}, step "
                  f"{r['steps_done']}): {r['reason']}", file=out)
    if expected is not None and runs.height < expected:
        print(f"\n{expected - runs.height} of the suite's {expected} runs have no record yet", file=out)
