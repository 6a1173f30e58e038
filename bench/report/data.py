"""The report's inputs: a suite's current expansion joined with what results/ holds for it.

Runs are selected by the run ids of `suite.expand()`, never by the `suite` tag: results/ may hold
runs of older versions of the suite (other ids), and a run shared with another suite carries that
suite's tag. Every expected run appears in `runs`, with status `missing` when it has no record.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from algorithms import metrics as metric_registry
from algorithms.metrics import PASS_AT
from bench import results
from bench.config import RunConfig
from bench.suite import Suite

N_BINS = 20  # steps are averaged in bins of 1/20 of the budget before seeds are compared

RUN_COLUMNS = ["cell", "recipe", "seed", "run_id", "status", "steps_done", "spent", "reason"]


@dataclass(frozen=True)
class Data:
    """Everything a report reads, as eager frames sorted into a fixed order.

    runs   one row per expected run: cell, recipe, seed, run_id, status (finished, diverged,
           failed or missing), steps_done, spent (fraction of the budget), reason, budget
    evals  held-out evaluations of recorded runs, one row per (cell, run, optimizer step): cell, recipe,
           seed, run_id, status, step, fraction (the schedule's label: the last nominal fraction the
           step passed), spent (the fraction of the budget actually spent at the evaluation, in the
           budget's unit: FLOPs, steps or generated tokens), flops, acc (the suite's [report] accuracy),
           acc_greedy, len_mean, len_correct, len_incorrect; where the runs logged them format_rate,
           avg_k and pass_k (the mean and the any-correct of the evaluation's k samples per problem) and
           the coverage curve pass@1, pass@2, ... pass@K (null in rows of runs that did not log that K),
           and eval_kl (eval/kl_k1: the KL to the reference on the evaluation's samples)
    steps  per run and budget bin (N_BINS per budget): cell, recipe, seed, run_id, status,
           frac, flops and the step metrics over the bin, each reduced as it declares (its `over_steps`: the
           mean, or the max for policy/ratio_max; NaN-aware)
    metas  run_id -> run.json of every recorded run
    cfgs   run_id -> RunConfig of the expansion (its cell tags say which cells read the run); what a
           recorded run ran with is its run.json's config (`run_config`)
    stale  ids of recorded runs tagged with the suite's name but not in its current expansion
           (older configurations, or the code's config hashing changed): reported, never used
    """

    runs: pl.DataFrame
    evals: pl.DataFrame
    steps: pl.DataFrame
    metas: dict[str, dict]
    cfgs: dict[str, RunConfig]
    stale: tuple[str, ...] = ()


STEP_KEEP = ["kl/k1", "kl/k3", "policy/clip_frac_low", "policy/clip_frac_high", "policy/clip_frac_seq",
             "policy/weight_capped_frac", "policy/entropy", "len/mean", "len/correct", "len/incorrect"]
# Logged by newer engines only (off-policy telemetry, per-group weights): binned when present,
# absent from `steps` for runs recorded before them (the report says "not logged in these runs").
# Every metric of a report group (algorithms/metrics.py `group`) is binned likewise when present, and
# every column a suite's claim reads.
STEP_OPTIONAL = ["grad/norm", "policy/ratio_mean", "policy/ratio_max", "policy/ratio_dev_frac", "policy/log_ratio_abs_mean",
                 "policy/seq_ratio_mean", "policy/seq_ratio_max", "rollout/lag",
                 "adv/group_std_q10", "adv/group_std_q50", "adv/group_std_q90", "adv/low_std_weight_frac",
                 "adv/low_std_group_frac"]


def load(suite: Suite, root: Path) -> Data:
    """Read the suite's runs from results root (a missing root is an empty results directory)."""
    root = Path(root)
    expanded = suite.expand()
    cfgs = {c.run_id: c for c in expanded}
    order = {name: i for i, name in enumerate(suite.recipes)}
    # one row per cell a run belongs to: two regimes that differ only in their seeds or recipes share
    # runs (the same experiment), and each of their cells reads them
    expected = pl.DataFrame(
        [{"run_id": c.run_id, "cell": c.tags["cell"], "recipe": c.recipe.name, "seed": c.seed, "budget": c.budget.value,
          "budget_kind": c.budget.kind, "rank": order[c.recipe.name]} for c in expanded],
        schema={"run_id": pl.String, "cell": pl.String, "recipe": pl.String, "seed": pl.Int64,
                "budget": pl.Float64, "budget_kind": pl.String, "rank": pl.Int64})
    metas = {rid: json.loads((results.run_dir(root, rid) / "run.json").read_text())
             for rid in sorted(cfgs) if results.is_finished(root, rid)}
    recorded = pl.DataFrame(
        [{"run_id": rid, "status": m.get("status", "failed"), "steps_done": int(m.get("steps_done", 0)),
          "flops_spent": float(m.get("flops_spent", 0.0)), "gen_tokens": float(m.get("gen_tokens", 0)),
          "reason": m.get("reason") or ""} for rid, m in metas.items()]
        + [{"run_id": rid, "status": "missing", "steps_done": 0, "flops_spent": 0.0, "gen_tokens": 0.0,
            "reason": f"corrupt record, skipped (`bench suite` quarantines and reruns it): {problem}"}
           for rid, problem in results.problems(root, [r for r in cfgs if r not in metas])],
        schema={"run_id": pl.String, "status": pl.String, "steps_done": pl.Int64, "flops_spent": pl.Float64,
                "gen_tokens": pl.Float64, "reason": pl.String})
    runs = (expected.join(recorded, on="run_id", how="left")
            .with_columns(pl.col("status").fill_null("missing"), pl.col("reason").fill_null(""),
                          pl.col("steps_done").fill_null(0),
                          (pl.when(pl.col("budget_kind") == "steps").then(pl.col("steps_done").cast(pl.Float64))
                           .when(pl.col("budget_kind") == "tokens").then(pl.col("gen_tokens"))
                           .otherwise(pl.col("flops_spent")) / pl.col("budget")).alias("spent"))
            .sort("cell", "rank", "seed"))
    labels = runs.select("run_id", "cell", "recipe", "seed", "status", "budget", "budget_kind", "rank")
    ids = list(metas)
    if ids:
        paths = [results.run_dir(root, rid) for rid in ids]
        ev = pl.concat([pl.scan_parquet(p / "evals.parquet").with_columns(pl.lit(p.name).alias("run_id"))
                        for p in paths], how="diagonal_relaxed")
        st = pl.concat([pl.scan_parquet(p / "steps.parquet").with_columns(pl.lit(p.name).alias("run_id"))
                        for p in paths], how="diagonal_relaxed")
    else:
        ev = pl.LazyFrame(schema={"run_id": pl.String, **results.eval_schema()})
        st = pl.LazyFrame(schema={"run_id": pl.String, **results.step_schema()})
    # the format rate of sampled answers, where runs logged it (December 2026 on): the report's skill check
    names = ev.collect_schema().names()
    skill = [pl.col("eval/format_rate").alias("format_rate")] if "eval/format_rate" in names else []
    # the coverage curve, where runs logged it: pass@1, pass@2, ... pass@K (December 2026 on) beside
    # avg_k and pass_k (the mean and the any-correct of the k samples, every run)
    coverage = [pl.col(c).alias(c.removeprefix("eval/")) for c in PASS_AT if c in names]
    coverage += [pl.col(c).alias(c.removeprefix("eval/")) for c in ("eval/avg_k", "eval/pass_k") if c in names]
    # the KL to the reference on the evaluation's own samples, where runs logged it (December 2026 on)
    coverage += [pl.col("eval/kl_k1").alias("eval_kl")] if "eval/kl_k1" in names else []
    evals = (ev.join(labels.lazy(), on="run_id")
             .pipe(_spent, st)
             .select("cell", "recipe", "seed", "run_id", "status", "rank", "step", "fraction", "spent",
                     pl.col("compute/flops").alias("flops"), pl.col(suite.report.accuracy).alias("acc"),
                     pl.col("eval/acc_greedy").alias("acc_greedy"),
                     pl.col("eval/len_mean").alias("len_mean"), pl.col("eval/len_correct").alias("len_correct"),
                     pl.col("eval/len_incorrect").alias("len_incorrect"), *skill, *coverage)
             # schedule points passed within one optimizer step share one evaluation; a step recorded
             # twice (never seen, but a resumed run could) counts once, its last row
             .with_columns(pl.col("step").cast(pl.Float64).fill_null(-1.0 - pl.col("fraction")).alias("_at"))
             .unique(["cell", "run_id", "_at"], keep="last", maintain_order=True).drop("_at")
             .sort("cell", "rank", "seed", "spent", "fraction").collect())
    present = set(st.collect_schema().names())
    keep = STEP_KEEP + [m for m in STEP_OPTIONAL if m in present]
    keep += [m.name for m in metric_registry.step_metrics() if m.group and m.name in present and m.name not in keep]
    # and every step column a claim reads (its metric or mechanism, steps:COLUMN or slope:COLUMN)
    named = [col for c in suite.claims for col in c.step_columns]
    keep += [m for m in dict.fromkeys(named) if m in present and m not in keep]
    steps = (st.join(labels.lazy(), on="run_id")
             .pipe(_bin_steps, keep)
             .sort("cell", "rank", "seed", "frac").collect())
    return Data(runs, evals, steps, metas, cfgs, stale_runs(suite, root, set(cfgs)))


def stale_runs(suite: Suite, root: Path, current: set[str]) -> tuple[str, ...]:
    """Recorded runs tagged suite=NAME whose ids are not in the current expansion (sorted). Runs of
    `bench suite NAME --tuned` (tagged tuned) are not stale, nor, for a suite at committed tuned
    settings, the runs of its defaults expansion: the Tuning section reports them."""
    if suite.tuned_from is not None and suite.path is not None:
        from bench.suite import load

        current = current | {c.run_id for c in load(suite.path, tuned=False).expand()}
    out = []
    for p in sorted((Path(root) / "runs").glob("*/run.json")):
        if p.parent.name in current:
            continue
        try:
            tags = json.loads(p.read_text()).get("config", {}).get("tags", {})
        except (OSError, ValueError):
            continue
        if tags.get("suite") == suite.name and not tags.get("tuned"):
            out.append(p.parent.name)
    return tuple(out)


def _spent(ev: pl.LazyFrame, st: pl.LazyFrame) -> pl.LazyFrame:
    """Add `spent`: the fraction of the budget spent when each evaluation ran, from the ledger (its
    FLOPs, its step, or the generated tokens the steps table records at that step), not the
    schedule's label, which the step that passed it overshoots by up to one step's compute."""
    tokens = st.select("run_id", "step", pl.col("compute/gen_tokens").alias("_gen_tokens")) \
        if "compute/gen_tokens" in st.collect_schema().names() else None
    if tokens is not None:
        ev = ev.join(tokens.unique(["run_id", "step"], keep="last"), on=["run_id", "step"], how="left")
    gen = (pl.when(pl.col("step") == 0).then(0.0).otherwise(pl.col("_gen_tokens")) if tokens is not None
           else pl.lit(None, dtype=pl.Float64))
    spent = (pl.when(pl.col("budget_kind") == "steps").then(pl.col("step").cast(pl.Float64))
             .when(pl.col("budget_kind") == "tokens").then(gen)
             .otherwise(pl.col("compute/flops")) / pl.col("budget"))
    return ev.with_columns(spent.fill_null(pl.col("fraction")).alias("spent"))


def _bin_steps(lf: pl.LazyFrame, keep: list[str]) -> pl.LazyFrame:
    """Average each run's steps in bins of the budget (the bin's upper edge as `frac`), NaN-aware."""
    spent = (pl.when(pl.col("budget_kind") == "steps").then(pl.col("step").cast(pl.Float64))
             .when(pl.col("budget_kind") == "tokens").then(pl.col("compute/gen_tokens"))
             .otherwise(pl.col("compute/flops")))
    frac = spent / pl.col("budget")
    return (lf.with_columns(((frac * N_BINS).ceil().clip(1, N_BINS) / N_BINS).alias("frac"))
            .group_by("cell", "recipe", "seed", "run_id", "status", "rank", "frac")
            .agg(pl.col("compute/flops").mean().alias("flops"),
                 *[_over_steps(m).alias(m) for m in keep]))


def _over_steps(metric: str) -> pl.Expr:
    """A bin's steps of `metric` reduced as it declares (algorithms/metrics.py `over_steps`), NaN-aware."""
    col = pl.col(metric).fill_nan(None)
    how = metric_registry.get(metric).over_steps
    return col.max() if how == "max" else col.min() if how == "min" else col.mean()


def run_config(suite: Suite, data: Data | None, cell: str, recipe: str) -> RunConfig:
    """The config `recipe` ran with in `cell`: read from the run.json of its first recorded run (seed
    order), so the report describes what ran, not what the suite file says now; as the suite builds it
    when no run of the pair is recorded yet (or no data is given)."""
    if data is not None:
        rows = data.runs.filter((pl.col("cell") == cell) & (pl.col("recipe") == recipe)
                                & pl.col("run_id").is_in(list(data.metas))).sort("seed")
        if rows.height:
            return RunConfig.from_dict(data.metas[rows["run_id"][0]]["config"])
    return suite.run_config(suite.cell(cell), recipe, suite.cell_seeds(cell)[0])


def finished(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(pl.col("status") == "finished")


def max_new_tokens(suite: Suite, data: Data, cell: str) -> int:
    """The generation cap L_max of a cell: from a recorded run, else the suite's train setting, else the task."""
    for rid, c in data.cfgs.items():
        if c.tags["cell"] == cell and rid in data.metas and data.metas[rid].get("max_new_tokens"):
            return int(data.metas[rid]["max_new_tokens"])
    if suite.train.max_new_tokens:
        return suite.train.max_new_tokens
    from bench import tasks

    task = suite.cell(cell).task
    return int(tasks.get(task, **suite.task_params.get(task, {})).max_new_tokens)
