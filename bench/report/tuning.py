"""The Tuning section's tables: pure functions of `bench tune`'s trial runs (bench.tune.costs) and of
two leaderboards, the suite's at its defaults and at its tuned settings (issue 23).

    trials        tuning.csv: one row per trial run: cell, recipe, trial, seed, one column per tuned
                  parameter (its path, e.g. train.lr), status, the objective (a column named for it:
                  final or auc), acc (final accuracy), run_id
    trial_values  one row per trial: its mean objective over tuning seeds (`value`, as tuning scored
                  it) and the lowest and highest seed's (`lo`, `hi`): the sensitivity curves' points
    chosen_trials per study, the trial whose values the tuned settings hold (else the best complete
                  trial, as `bench tune` chooses): every "best" below is that trial
    costs         tuning_cost.csv: per study, what tuning spent and what it chose
    lr_robustness lr_robustness.csv: per study, the learning rates within a margin of the chosen trial
    side_by_side  tuned_vs_default.csv: per cell × recipe, the leaderboard at defaults beside the tuned one
    rank_compare  two rankings of one set of recipes: who moves, which pairs swap (also the Clipping
                  section's clip-off check, with clipped_twin)

A trial is `complete` when every tuning seed scored (not pruned, not failed): only complete trials
are compared, since a trial's value over fewer seeds is another quantity.
"""
from __future__ import annotations

import json
import math

import polars as pl

from bench.config import Regime
from bench.suite import Cell, Suite
from bench.tune import costs
from bench.tune.study import tie_order  # bench tune's ties (study.best): smaller settings first

LR = "train.lr"  # the parameter the sensitivity curves and the robustness width are drawn against
# a margin when the tuning objective is not the report's primary metric (whose [report] margin is
# in that metric's units): 2 accuracy points, issue 23's "within 2 points of its best"
DEFAULT_MARGIN = 0.02


def margin_for(suite: Suite, objective: str) -> float:
    """The robustness margin: the suite's [report] margin when tuning optimised its primary metric
    (the same units), else DEFAULT_MARGIN."""
    return suite.report.margin if suite.report.primary == objective else DEFAULT_MARGIN


def _value_dtype(values: list) -> pl.DataType:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pl.Boolean
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pl.Int64
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pl.Float64
    return pl.String


def param_columns(params: pl.Series) -> pl.DataFrame:
    """A `params` column of canonical JSON objects {path: value} -> one column per path (sorted), null
    where a row's trial did not tune that path; numbers stay numbers, anything else is its JSON text."""
    rows = [json.loads(p) if p else {} for p in params.to_list()]
    paths = sorted({k for r in rows for k in r})
    cols = {}
    for path in paths:
        values = [r.get(path) for r in rows]
        dtype = _value_dtype(values)
        if dtype == pl.String:
            values = [v if v is None or isinstance(v, str) else json.dumps(v) for v in values]
        elif dtype == pl.Float64:
            values = [None if v is None else float(v) for v in values]
        cols[path] = pl.Series(path, values, dtype=dtype)
    return pl.DataFrame(cols, height=len(rows))


def _order_by_suite(df: pl.DataFrame, suite: Suite, *then: str) -> pl.DataFrame:
    """Rows in suite order (cells, then recipes; others last), then by `then`."""
    cells = {c.name: i for i, c in enumerate(suite.cells)}
    recipes = {r: i for i, r in enumerate(suite.recipes)}
    return (df.with_columns(pl.col("cell").replace_strict(cells, default=len(cells), return_dtype=pl.Int64).alias("_c"),
                            pl.col("recipe").replace_strict(recipes, default=len(recipes), return_dtype=pl.Int64)
                            .alias("_r"))
            .sort("_c", "cell", "_r", "recipe", *then).drop("_c", "_r"))


def trials(t: pl.DataFrame, suite: Suite, objective: str) -> pl.DataFrame:
    """tuning.csv from costs.trial_runs: see the module docstring. The objective column is named for
    the objective (0 for a diverged run, empty for a pruned or failed one, as tuning scored it)."""
    base = t.select("cell", "recipe", "trial", "seed")
    tail = t.select("status", pl.col("objective").alias(objective), "acc", "run_id")
    out = pl.concat([base, param_columns(t["params"]), tail], how="horizontal")
    return _order_by_suite(out, suite, "trial", "seed")


def trial_values(t: pl.DataFrame, n_seeds: int) -> pl.DataFrame:
    """costs.per_trial (value = mean objective over the trial's scored seeds, `complete`) with `lo` and
    `hi`, the lowest and highest seed's objective, and `lr` (train.lr; null when the study did not tune it)."""
    spread = t.group_by("study", "trial").agg(pl.col("objective").min().alias("lo"), pl.col("objective").max().alias("hi"))
    pt = costs.per_trial(t, n_seeds).join(spread, on=["study", "trial"], how="left")
    lrs = [json.loads(p).get(LR) for p in pt["params"].to_list()]
    return pt.with_columns(pl.Series("lr", [None if v is None else float(v) for v in lrs], dtype=pl.Float64))


def chosen_trials(pt: pl.DataFrame, chosen: dict[str, dict | None]) -> dict[str, dict]:
    """study -> {"trial", "value", "acc", "params", "from"}: the complete trial whose params are the
    study's chosen values (`from` "tuned settings"), else the best complete trial, ties to the smaller
    settings as `bench tune` breaks them (`from` "best trial": no tuned settings, or none of the trials
    has their values, e.g. a settings file from an earlier study). A study without a complete trial
    has no entry."""
    out = {}
    for study in pt["study"].unique(maintain_order=True).to_list():
        rows = pt.filter((pl.col("study") == study) & pl.col("complete")).to_dicts()
        if not rows:
            continue
        for r in rows:
            r["params"] = json.loads(r["params"])
        want = chosen.get(study)
        hit = [r for r in rows if want is not None and r["params"] == want]
        how = "tuned settings" if hit else "best trial"
        r = hit[0] if hit else max(rows, key=lambda r: (r["value"], tie_order(r["params"])))
        out[study] = {"trial": r["trial"], "value": r["value"], "acc": r["acc"], "params": r["params"], "from": how}
    return out


COST_SCHEMA = {
    "cell": pl.String, "recipe": pl.String, "study": pl.String, "trials": pl.Int64, "complete": pl.Int64,
    "runs": pl.Int64, "finished": pl.Int64, "pruned": pl.Int64, "diverged": pl.Int64, "failed": pl.Int64,
    "flops": pl.Float64, "gen_tokens": pl.Int64, "wall_s": pl.Float64, "budget": pl.String, "budget_flops": pl.Float64,
    "cost_in_runs": pl.Float64, "chosen": pl.String, "chosen_from": pl.String, "chosen_trial": pl.Int64,
    "chosen_value": pl.Float64, "chosen_acc": pl.Float64,
}


def costs_table(summary: pl.DataFrame, pt: pl.DataFrame, picked: dict[str, dict], suite: Suite) -> pl.DataFrame:
    """tuning_cost.csv: costs.summary per study (trials, runs and their statuses, FLOPs, wall seconds,
    the per-run budget, cost in runs) without its best_* columns, with `complete` (trials every seed
    scored) and the chosen trial (chosen_trials): its values as canonical JSON, where they come from,
    its number, its mean objective and mean final accuracy over the tuning seeds."""
    complete = pt.group_by("study").agg(pl.col("complete").sum().cast(pl.Int64))
    ch = pl.DataFrame([{"study": s, "chosen": json.dumps(c["params"], sort_keys=True), "chosen_from": c["from"],
                        "chosen_trial": c["trial"], "chosen_value": c["value"], "chosen_acc": c["acc"]}
                       for s, c in picked.items()],
                      schema={k: COST_SCHEMA[k] for k in ("study", "chosen", "chosen_from", "chosen_trial",
                                                          "chosen_value", "chosen_acc")})
    out = summary.join(complete, on="study", how="left").join(ch, on="study", how="left")
    return _order_by_suite(out.select(list(COST_SCHEMA)).cast(COST_SCHEMA), suite)


def matched(cost: pl.DataFrame) -> list[str]:
    """Where tuning was not matched: per cell, recipes whose trial count, runs per trial or per-run
    budget differ from the others' (one line each); empty when every recipe of every cell had the
    same. FLOPs spent may still differ: pruned runs stop early."""
    out = []
    for cell in cost["cell"].unique(maintain_order=True).to_list():
        c = cost.filter(pl.col("cell") == cell)
        for what, col in (("trials", pl.col("trials")), ("runs per trial", pl.col("runs") / pl.col("trials")),
                          ("per-run budget", pl.col("budget"))):
            v = c.select("recipe", col.alias("v"))
            if v["v"].n_unique() > 1:
                shown = ", ".join(f"{r} {x:g}" if isinstance(x, float) else f"{r} {x}" for r, x in v.rows())
                out.append(f"{cell}: {what} differ ({shown})")
    return out


ROBUST_SCHEMA = {
    "cell": pl.String, "recipe": pl.String, "study": pl.String, "chosen_trial": pl.Int64, "chosen_lr": pl.Float64,
    "chosen_value": pl.Float64, "margin": pl.Float64, "others": pl.String, "lrs_tested": pl.Int64,
    "lrs_within": pl.Int64, "lr_lo": pl.Float64, "lr_hi": pl.Float64, "decades": pl.Float64, "edge": pl.String,
    "fragile": pl.Boolean,
}


def lr_robustness(pt: pl.DataFrame, picked: dict[str, dict], margin: float, suite: Suite) -> pl.DataFrame:
    """Per study that tuned train.lr: how wide a range of learning rates scores near its chosen trial.

    Among the complete trials at the chosen trial's values of the other tuned parameters (`others`,
    JSON), the learning rates tested (`lrs_tested`; trials at one lr are averaged) are walked outwards
    from the chosen lr while each scores at least chosen_value − margin: [lr_lo, lr_hi] is that
    contiguous range (a lr beyond one that falls short does not count, however it scores), `decades`
    its width log10(lr_hi / lr_lo) (0 for one point), `lrs_within` its points. `edge`: "low", "high"
    or "both" when the range reaches the end of the lrs tested (the true range may be wider), else "".
    `fragile`: several lrs were tested and only the chosen one is within the margin."""
    rows = []
    for study, c in picked.items():
        if LR not in c["params"]:
            continue
        others = {k: v for k, v in c["params"].items() if k != LR}
        same = [r for r in pt.filter((pl.col("study") == study) & pl.col("complete")).iter_rows(named=True)
                if {k: v for k, v in json.loads(r["params"]).items() if k != LR} == others]
        by_lr: dict[float, list[float]] = {}
        for r in same:
            by_lr.setdefault(r["lr"], []).append(r["value"])
        lrs = sorted(by_lr)
        score = [sum(by_lr[x]) / len(by_lr[x]) for x in lrs]
        i = lo = hi = lrs.index(float(c["params"][LR]))
        floor = c["value"] - margin - 1e-12  # a value exactly at the margin is within it
        while lo > 0 and score[lo - 1] >= floor:
            lo -= 1
        while hi < len(lrs) - 1 and score[hi + 1] >= floor:
            hi += 1
        edge = {(True, True): "both", (True, False): "low", (False, True): "high"}.get(
            (lo == 0 and len(lrs) > 1, hi == len(lrs) - 1 and len(lrs) > 1), "")
        head = pt.filter(pl.col("study") == study).row(0, named=True)
        rows.append({"cell": head["cell"], "recipe": head["recipe"], "study": study, "chosen_trial": c["trial"],
                     "chosen_lr": lrs[i], "chosen_value": c["value"], "margin": margin,
                     "others": json.dumps(others, sort_keys=True), "lrs_tested": len(lrs), "lrs_within": hi - lo + 1,
                     "lr_lo": lrs[lo], "lr_hi": lrs[hi], "decades": math.log10(lrs[hi] / lrs[lo]), "edge": edge,
                     "fragile": len(lrs) > 1 and hi == lo})
    return _order_by_suite(pl.DataFrame(rows, schema=ROBUST_SCHEMA), suite)


def ranks(values: dict[str, float], higher_is_better: bool) -> dict[str, int]:
    """Competition ranks (1 = best; equal values share the better rank) of {recipe: value}."""
    sign = -1.0 if higher_is_better else 1.0
    return {r: 1 + sum(sign * w < sign * v for w in values.values()) for r, v in values.items()}


def rank_compare(a: dict[str, float], b: dict[str, float], higher_is_better: bool, order: list[str]) -> dict:
    """Two rankings of the recipes both have a value for: {"common": recipes in `order`, "a"/"b": those
    recipes best first (ties in `order`), "moves": [(recipe, rank in a, rank in b)] for each whose rank
    among the common recipes differs, in b's order, "swaps": [(x, y)] each pair in strictly opposite order, "only_a",
    "only_b": recipes with a value on one side only}."""
    def finite(d: dict) -> dict:
        return {r: v for r, v in d.items() if v is not None and math.isfinite(v)}

    a, b = finite(a), finite(b)
    common = [r for r in order if r in a and r in b]
    ra, rb = ranks({r: a[r] for r in common}, higher_is_better), ranks({r: b[r] for r in common}, higher_is_better)
    best_first = lambda rk: sorted(common, key=lambda r: rk[r])  # noqa: E731 (stable: ties in `order`)
    swaps = [(x, y) for i, x in enumerate(common) for y in common[i + 1:] if (a[x] - a[y]) * (b[x] - b[y]) < 0]
    return {"common": common, "a": best_first(ra), "b": best_first(rb),
            "moves": [(r, ra[r], rb[r]) for r in best_first(rb) if ra[r] != rb[r]], "swaps": swaps,
            "only_a": [r for r in order if r in a and r not in b], "only_b": [r for r in order if r in b and r not in a]}


SIDE = ("n", "expected", "primary_mean", "primary_lo", "primary_hi", "diff", "verdict")


def side_by_side(default: pl.DataFrame, tuned: pl.DataFrame, tuned_pairs: set[tuple[str, str]], suite: Suite) -> pl.DataFrame:
    """tuned_vs_default.csv from two leaderboards (tables.leaderboard of the defaults expansion and of
    the tuned one): per cell × recipe with a finished run in either, `tuned` (the recipe has tuned
    values in the cell), then per setting (suffix _default, _tuned) n of expected finished runs, the
    primary metric's mean and 95% bootstrap interval over the evaluation seeds, its rank among the
    cell's recipes at that setting (1 = best), the paired difference from the baseline and the
    verdict; delta = tuned − default primary mean."""
    rs = suite.report
    sides = []
    for label, board in (("default", default), ("tuned", tuned)):
        b = board.select("cell", "recipe", *SIDE)
        rk = {}
        for cell in b["cell"].unique(maintain_order=True).to_list():
            c = b.filter((pl.col("cell") == cell) & pl.col("primary_mean").is_not_null())
            rk |= {(cell, r): k for r, k in ranks(dict(zip(c["recipe"], c["primary_mean"])), rs.higher_is_better).items()}
        b = b.with_columns(pl.Series("rank", [rk.get(k) for k in zip(b["cell"], b["recipe"])], dtype=pl.Int64))
        sides.append(b.rename({c: f"{c}_{label}" for c in (*SIDE, "rank")}))
    joined = (sides[0].join(sides[1], on=["cell", "recipe"], how="full", coalesce=True)
              .with_columns(pl.col("n_default", "n_tuned", "expected_default", "expected_tuned")
                            .fill_null(0).cast(pl.Int64))
              .filter((pl.col("n_default") + pl.col("n_tuned")) > 0))
    out = joined.with_columns(
        pl.Series("tuned", [(c, r) in tuned_pairs for c, r in zip(joined["cell"], joined["recipe"])], dtype=pl.Boolean),
        pl.lit(rs.primary).alias("primary"),
        (pl.col("primary_mean_tuned") - pl.col("primary_mean_default")).alias("delta"))
    cols = ["cell", "recipe", "tuned", "primary",
            *(f"{c}_{s}" for s in ("default", "tuned") for c in ("n", "expected", "primary_mean", "primary_lo",
                                                                  "primary_hi", "rank", "diff", "verdict")), "delta"]
    return _order_by_suite(out.select(cols), suite)


def experiment(regime: Regime | None) -> dict:
    """A regime's fields that change its runs, apart from the gradient clip: what a clipped twin shares
    (name, where it runs and its seeds do not change a run)."""
    return (regime or Regime()).model_dump(exclude={"name", "grad_clip", "recipes", "cells", "seeds"})


def grad_clip(suite: Suite, cell: Cell) -> float:
    """The gradient-norm clip of a cell's runs: its regime's, else the suite's [train] grad_clip (0: off)."""
    r = cell.regime
    return float(r.grad_clip if r is not None and r.grad_clip is not None else suite.train.grad_clip)


def clip_off_cells(suite: Suite) -> list[Cell]:
    """The cells whose regime turns the gradient-norm clip off (grad_clip = 0), in suite order."""
    return [c for c in suite.cells if c.regime is not None and c.regime.grad_clip == 0]


def clipped_twin(suite: Suite, cell: Cell) -> tuple[Cell | None, bool]:
    """(the cell to compare a clip-off cell with, exact): among the suite's cells of the same task and
    scale with the clip on, the first (suite order) whose regime equals this one's but for the clip
    (`experiment`; exact = True); else the one sharing the most recipes with it (ties: the first;
    exact = False: it differs in more than the clip); (None, False) when there is none."""
    others = [c for c in suite.cells if c.name != cell.name and c.task == cell.task and c.scale == cell.scale
              and grad_clip(suite, c) > 0]
    for c in others:
        if experiment(c.regime) == experiment(cell.regime):
            return c, True
    if not others:
        return None, False
    mine = set(suite.cell_recipes(cell))
    return max(others, key=lambda c: (len(mine & set(suite.cell_recipes(c))), -others.index(c))), False
