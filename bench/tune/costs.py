"""Tuning cost and tuned-versus-default, as Polars frames from results/ alone (no storage needed).

`summary(suite, root)`: one row per study (cell × recipe) from the trial runs' run.json (tags
study/trial): trials by status, FLOPs and wall seconds spent, the per-trial budget, the cost in
runs' worth of FLOPs, and the best finished trial's final accuracy.
`compare(suite, root)`: per cell × recipe, final held-out greedy accuracy over the suite's seeds
with default settings and with the tuned file applied.
"""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from bench import results, suite as suites
from bench.suite import Suite

SUMMARY_SCHEMA = {
    "cell": pl.String, "recipe": pl.String, "study": pl.String, "trials": pl.Int64, "runs": pl.Int64,
    "finished": pl.Int64,
    "pruned": pl.Int64, "diverged": pl.Int64, "failed": pl.Int64, "flops": pl.Float64, "gen_tokens": pl.Int64,
    "wall_s": pl.Float64, "budget": pl.String, "budget_flops": pl.Float64, "cost_in_runs": pl.Float64,
    "best_value": pl.Float64, "best_acc": pl.Float64, "best_trial": pl.Int64, "best_params": pl.String,
}


def _suite(s: str | Suite) -> Suite:
    return s if isinstance(s, Suite) else suites.load(s)


TRIAL_SCHEMA = {
    "run_id": pl.String, "study": pl.String, "trial": pl.Int64, "cell": pl.String, "recipe": pl.String,
    "seed": pl.Int64, "params": pl.String, "status": pl.String, "flops": pl.Float64, "gen_tokens": pl.Int64,
    "wall_s": pl.Float64, "budget": pl.String, "budget_value": pl.Float64, "budget_kind": pl.String,
    "acc": pl.Float64, "objective": pl.Float64,
}


def trial_runs(suite: str | Suite, root: Path | None = None, skipped: list | None = None) -> pl.DataFrame:
    """One row per recorded trial run of the suite's studies (run.json tags study and trial; the
    studies of its current cells and recipes only): its
    tuning seed, the trial's sampled values (`params`, canonical JSON {path: value}), the final
    accuracy (`acc`: the suite's [report] accuracy at the last evaluation) and the run's value of
    the tuning objective (`objective`: final, or the mean over the budget for auc; 0 for a diverged
    run, as tuning scores it; null for a pruned or failed one). A corrupt record is left out and
    its (run_id, problem) appended to `skipped` when given."""
    from bench.tune.settings import from_suite
    from bench.tune.study import objective_value, study_name

    su = _suite(suite)
    settings = from_suite(su)
    # the studies of the suite as it stands: a report republished after its cells changed (a new
    # regime, other warm starts) must not list, nor `bench publish` carry, the old cells' trials
    studies = {study_name(su.name, c.name, r) for c in su.cells for r in su.cell_recipes(c.name)}
    root = Path(root) if root else results.default_root()
    rows = []
    for f in sorted((root / "runs").glob("*/run.json")):
        problem = results.check_record(f.parent)
        if problem:
            if skipped is not None:
                skipped.append((f.parent.name, problem))
            continue
        m = json.loads(f.read_text())
        tags = m["config"].get("tags", {})
        if tags.get("study") not in studies:  # another suite's, or a study of a cell the suite no longer has
            continue
        ev = f.parent / "evals.parquet"
        acc = value = None
        if m["status"] == "finished" and ev.is_file():
            e = pl.read_parquet(ev).sort("fraction")
            if e.height and settings.accuracy in e.columns:
                acc = float(e[settings.accuracy][-1])
                value = objective_value(e.to_dicts(), settings.objective, settings.accuracy)
        elif m["status"] == "diverged":
            value = 0.0
        rows.append({"run_id": m["run_id"], "study": tags["study"], "trial": int(tags["trial"]),
                     "cell": tags.get("cell"), "recipe": m["recipe_name"], "seed": int(m["config"]["seed"]),
                     "params": json.dumps(tags.get("params", {}), sort_keys=True), "status": m["status"],
                     "flops": float(m.get("flops_spent", 0.0)), "gen_tokens": int(m.get("gen_tokens", 0)),
                     "wall_s": float(m.get("wall_s", 0.0)), "budget": f"{m['config']['budget']['value']:g}"
                     f"{m['config']['budget']['kind']}", "budget_value": float(m["config"]["budget"]["value"]),
                     "budget_kind": m["config"]["budget"]["kind"], "acc": acc, "objective": value})
    return pl.DataFrame(rows, schema=TRIAL_SCHEMA).sort("study", "trial", "seed")


def per_trial(t: pl.DataFrame, n_seeds: int) -> pl.DataFrame:
    """One row per trial from trial_runs: its params, the mean and std of its runs' objectives and
    final accuracies over its tuning seeds, and `complete` (every one of the `n_seeds` seeds scored:
    not pruned, not failed, not still to run); the trial's value is the mean, as tuning scored it."""
    return (t.group_by("study", "cell", "recipe", "trial", maintain_order=True)
            .agg(pl.col("params").first(), pl.len().cast(pl.Int64).alias("runs"),
                 pl.col("objective").count().cast(pl.Int64).alias("scored"),
                 pl.col("objective").mean().alias("value"), pl.col("objective").std().alias("value_std"),
                 pl.col("acc").mean().alias("acc"))
            .with_columns((pl.col("scored") == n_seeds).alias("complete"))
            .sort("study", "trial"))


def summary(suite: str | Suite, root: Path | None = None) -> pl.DataFrame:
    """Tuning cost per study: see SUMMARY_SCHEMA. `trials` counts trials (each trains one run per
    tuning seed, `runs`); the status counts are of runs. cost_in_runs = FLOPs spent / one run's FLOPs
    budget (null for steps or tokens budgets); best_value is the best complete trial's objective (the
    mean over tuning seeds; ties as `bench tune` breaks them, `study.tie_order`: the smaller setting)
    and best_acc that trial's final accuracy, mean over tuning seeds."""
    su = _suite(suite)
    t = trial_runs(su, root)
    if t.is_empty():
        return pl.DataFrame(schema=SUMMARY_SCHEMA)
    from bench.tune.settings import from_suite

    n = lambda s: (pl.col("status") == s).sum().cast(pl.Int64).alias(s)  # noqa: E731
    best = best_trials(per_trial(t, len(from_suite(su).seeds)))
    agg = (t.group_by("study", "cell", "recipe").agg(
        pl.col("trial").n_unique().cast(pl.Int64).alias("trials"), pl.len().cast(pl.Int64).alias("runs"),
        n("finished"), n("pruned"), n("diverged"), n("failed"),
        pl.col("flops").sum(), pl.col("gen_tokens").sum(), pl.col("wall_s").sum(), pl.col("budget").first(),
        pl.when(pl.col("budget_kind") == "flops").then(pl.col("budget_value")).first().alias("budget_flops")))
    return (agg.join(best, on="study", how="left")
            .with_columns((pl.col("flops") / pl.col("budget_flops")).alias("cost_in_runs"))
            .select(list(SUMMARY_SCHEMA)).cast(SUMMARY_SCHEMA).sort("cell", "recipe"))


def compare(suite: str | Suite, root: Path | None = None, tuned_file: Path | None = None) -> pl.DataFrame:
    """Per cell × recipe with a tuned table: final greedy accuracy (mean, std, n over finished seeds)
    with default settings and tuned; runs are those of the suite's two expansions."""
    from bench.harness.leaderboard import per_run
    from bench.tune import tuned

    s = _suite(suite)
    root = Path(root) if root else results.default_root()
    t = tuned.apply(s, tuned_file or tuned.default_path(root, s.name))
    rows = []
    for label, su in (("default", s), ("tuned", t)):
        for cell in su.cells:
            for recipe in su.recipes:
                if (cell.name, recipe) not in t.cell_overrides:
                    continue
                for seed in su.cell_seeds(cell):
                    rows.append({"cell": cell.name, "recipe": recipe, "seed": seed, "setting": label,
                                 "run_id": su.run_config(cell, recipe, seed).run_id})
    ids = pl.DataFrame(rows, schema={"cell": pl.String, "recipe": pl.String, "seed": pl.Int64, "setting": pl.String,
                                     "run_id": pl.String})
    if ids.is_empty():
        return pl.DataFrame()
    runs = per_run(root, run_ids=ids["run_id"].to_list()).filter(pl.col("status") == "finished").select("run_id", "acc")
    j = ids.join(runs, on="run_id", how="inner")
    agg = j.group_by("cell", "recipe", "setting").agg(pl.col("acc").mean().alias("acc"), pl.col("acc").std().alias("std"),
                                                      pl.len().cast(pl.Int64).alias("n"))
    d = agg.filter(pl.col("setting") == "default").drop("setting")
    tu = agg.filter(pl.col("setting") == "tuned").drop("setting")
    return (ids.select("cell", "recipe").unique().join(d, on=["cell", "recipe"], how="left")
            .join(tu, on=["cell", "recipe"], how="left", suffix="_tuned")
            .rename({"acc": "acc_default", "std": "std_default", "n": "n_default"})
            .with_columns((pl.col("acc_tuned") - pl.col("acc_default")).alias("delta")).sort("cell", "recipe"))


def _f(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def best_trials(trials: pl.DataFrame) -> pl.DataFrame:
    """Per study, its best complete trial (per_trial's rows): best_value, best_acc, best_trial and
    best_params; ties as `bench tune` breaks them (`study.tie_order`: the smaller setting wins)."""
    from bench.tune.study import tie_order

    picked = [max(g.iter_rows(named=True), key=lambda r: (r["value"], tie_order(json.loads(r["params"]))))
              for _, g in trials.filter(pl.col("complete") & pl.col("value").is_not_nan())
              .group_by("study", maintain_order=True)]
    return pl.DataFrame([{"study": r["study"], "best_value": r["value"], "best_acc": r["acc"], "best_trial": r["trial"],
                          "best_params": r["params"]} for r in picked],
                        schema={"study": pl.String, "best_value": pl.Float64, "best_acc": pl.Float64,
                                "best_trial": pl.Int64, "best_params": pl.String})


def print_summary(suite: str | Suite, root: Path | None = None, tuned_file: Path | None = None, out=None) -> None:
    """The tuning cost per study, then tuned versus default where both have runs."""
    import sys

    out = out or sys.stdout
    s = summary(suite, root)
    if s.is_empty():
        print("no trial runs recorded", file=out)
        return
    print(f"{'study':<40} {'trials':>6} {'fin':>4} {'prun':>4} {'div':>4} {'fail':>4} {'FLOPs':>9} {'runs':>5} "
          f"{'wall':>8} {'best obj':>8} {'its acc':>8}", file=out)
    for r in s.iter_rows(named=True):
        print(f"{r['study']:<40} {r['trials']:>6} {r['finished']:>4} {r['pruned']:>4} {r['diverged']:>4} {r['failed']:>4} "
              f"{r['flops']:>9.3g} {_f(r['cost_in_runs'], '.1f'):>5} {r['wall_s']:>7.0f}s {_f(r['best_value'], '.3f'):>8} "
              f"{_f(r['best_acc'], '.3f'):>8}", file=out)
    from bench.tune.settings import from_suite

    ts = from_suite(_suite(suite))
    print(f"best obj: the best complete trial's objective ({ts.objective} of {ts.accuracy}), mean over tuning seeds; "
          f"its acc: that trial's final {ts.accuracy}", file=out)
    print(f"tuning cost: {s['trials'].sum()} trials, {s['flops'].sum():.3g} FLOPs, {s['wall_s'].sum():.0f} s of runs "
          "(runs: FLOPs in units of one run's budget; pruned trials spend less)", file=out)
    try:
        c = compare(suite, root, tuned_file)
    except FileNotFoundError:
        return
    if c.is_empty():
        return
    print(f"\n{'cell':<18} {'recipe':<13} {'default acc':>17} {'tuned acc':>17} {'delta':>7}", file=out)
    for r in c.iter_rows(named=True):
        fmt = lambda a, sd, n: "-" if a is None else f"{a:.3f} ± {_f(sd, '.3f')} ({n})"  # noqa: E731
        print(f"{r['cell']:<18} {r['recipe']:<13} {fmt(r['acc_default'], r['std_default'], r['n_default']):>17} "
              f"{fmt(r['acc_tuned'], r['std_tuned'], r['n_tuned']):>17} {_f(r['delta'], '+.3f'):>7}", file=out)
    print("final held-out greedy accuracy, mean ± std (finished seeds) of `bench suite` with default and with --tuned "
          "settings; `bench suite SUITE --tuned` runs the missing ones", file=out)
