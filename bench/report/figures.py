"""Seaborn figures for reports: each function takes report tables or curves and returns a Figure.

Curves show the mean over finished seeds with a band from the lowest to the highest seed
(seaborn's `errorbar=("pi", 100)`: no resampling, so figures are deterministic). Step metrics are
averaged in bins of 1/20 of the budget first, so seeds line up on the same x.
"""
from __future__ import annotations

import io
import math
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import polars as pl
import seaborn as sns
from matplotlib.ticker import NullFormatter

from bench.report import stats

BAND = ("pi", 100)  # min–max over seeds
DPI = 100


def palette(recipes: list[str]) -> dict[str, tuple]:
    """One fixed colour per recipe (suite order), shared by every figure: tab10, then darker extras."""
    extra = ["#000000", "#b8860b", "#4b0082", "#006400", "#8b0000", "#00008b"]
    base = list(sns.color_palette("tab10", 10)) + extra
    if len(recipes) > len(base):
        base = list(sns.color_palette("husl", len(recipes)))
    return dict(zip(recipes, base))


def png_bytes(fig) -> bytes:
    """PNG without the Software tag or timestamps, so an unchanged figure gives unchanged bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _theme() -> None:
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)


def _axes(ncols: int, nrows: int = 1, w: float = 6.0, h: float = 3.6, sharey=False):
    _theme()
    fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows), squeeze=False, sharey=sharey)
    return fig, axes


def _legend_outside(fig, axes) -> None:
    handles, labels = [], []
    for ax in axes.ravel():
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    if handles:
        fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.tight_layout()


def leaderboard(board: pl.DataFrame, cells: list[str], colors: dict, base: str, metric: str, margin: float) -> plt.Figure:
    """Paired difference from the baseline on the primary metric per recipe: mean over shared seeds
    (dot) with its 95% paired t interval (bar); shaded: ±margin; dotted: ±the cell's median MDD."""
    fig, axes = _axes(len(cells), w=5.5, h=0.35 * board["recipe"].n_unique() + 1.2)
    for ax, cell in zip(axes[0], cells):
        b = board.filter(pl.col("cell") == cell)
        ax.axvspan(-margin, margin, color="0.9", zorder=0)
        ax.axvline(0, color="0.4", lw=0.8)
        mdd = b["mdd"].drop_nulls()
        if mdd.len():
            for sgn in (-1, 1):
                ax.axvline(sgn * float(mdd.median()), color="0.5", lw=0.8, ls=":")
        for i, r in enumerate(b.iter_rows(named=True)):
            c = colors[r["recipe"]]
            if r["recipe"] == base:
                ax.plot(0, i, "D", color=c)
                continue
            if r["diff"] is None or not math.isfinite(r["diff"]):
                continue
            lo = r["diff_lo"] if r["diff_lo"] is not None else r["diff"]
            hi = r["diff_hi"] if r["diff_hi"] is not None else r["diff"]
            ax.errorbar(r["diff"], i, xerr=[[r["diff"] - lo], [hi - r["diff"]]], fmt="o", color=c, capsize=3)
            if r["mark"]:
                ax.annotate(r["mark"], (hi, i), xytext=(4, -4), textcoords="offset points", fontsize=12)
        labels = [f"{r['recipe']} (n={r['n']}/{r['expected']})" for r in b.iter_rows(named=True)]
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        ax.set_title(cell)
        ax.set_xlabel(f"{metric}: recipe − {base}, paired by seed")
    fig.tight_layout()
    return fig


def coverage_verdicts(cov: pl.DataFrame, board: pl.DataFrame, cells: list[str], colors: dict, base: str,
                      margin: float) -> plt.Figure:
    """One row per cell, one column per axis (sampled pass@1, greedy accuracy, pass@K): each recipe's
    paired difference from the baseline (dot) with its 95% paired t interval (bar), `*` where Holm's
    p < 0.05, shaded ±margin; the y labels carry each recipe's kind (skill, sharpening, collapse ...)."""
    from bench.report.coverage import AXES, AXIS_TEXT

    cells = [c for c in cells if cov.filter(pl.col("cell") == c).height]  # a cell of the baseline alone has none
    fig, axes = _axes(3, nrows=len(cells), w=4.2, h=0.4 * max(2, board["recipe"].n_unique()) + 1.3)
    for row, cell in zip(axes, cells):
        c = cov.filter(pl.col("cell") == cell)
        order = [r for r in board.filter(pl.col("cell") == cell)["recipe"].to_list() if r != base]
        by = {r["recipe"]: r for r in c.iter_rows(named=True)}
        k = next((r["k"] for r in by.values() if r["k"] is not None), None)
        for ax, axis in zip(row, AXES):
            ax.axvspan(-margin, margin, color="0.9", zorder=0)
            ax.axvline(0, color="0.4", lw=0.8)
            for i, recipe in enumerate(order):
                r = by.get(recipe)
                if r is None or r[f"{axis}_diff"] is None:
                    continue
                d = r[f"{axis}_diff"]
                lo = r[f"{axis}_lo"] if r[f"{axis}_lo"] is not None else d
                hi = r[f"{axis}_hi"] if r[f"{axis}_hi"] is not None else d
                ax.errorbar(d, i, xerr=[[d - lo], [hi - d]], fmt="o", color=colors[recipe], capsize=3)
                p = r[f"{axis}_p_holm"]
                if p is not None and p < stats.ALPHA:
                    ax.annotate("*", (hi, i), xytext=(4, -4), textcoords="offset points", fontsize=12)
            labels = [f"{r}: {by[r]['kind']}" if r in by else r for r in order]
            ax.set_yticks(range(len(order)), labels if axis == "pass1" else [""] * len(order))
            ax.set_ylim(len(order) - 0.5, -0.5)
            title = f"pass@{k}" if axis == "pass_k" and k else AXIS_TEXT[axis]
            ax.set_title(f"{cell}: Δ {title}", fontsize=10)
            ax.set_xlabel(f"recipe − {base}, paired by seed")
    fig.tight_layout()
    return fig


def pass_at_k_curves(evals: pl.DataFrame, cells: list[str], colors: dict) -> plt.Figure | None:
    """pass@k against k (log scale) at each run's last evaluation, mean over seeds with a min–max band,
    one panel per cell; dashed grey: the warm start (the step-0 evaluations). None when no cell logged
    two or more values of k (runs from before the coverage curve logged pass@k at one k)."""
    from bench.report.coverage import curve_columns

    panels = {}
    for cell in cells:
        e = evals.filter(pl.col("cell") == cell)
        have = curve_columns(e)
        if len(have) >= 2:
            panels[cell] = (e, have)
    if not panels:
        return None
    fig, axes = _axes(len(panels), w=5.0, h=3.6)
    for ax, (cell, (e, have)) in zip(axes[0], panels.items()):
        ks = [int(c.removeprefix("pass@")) for c in have]
        last = e.sort("spent").group_by("run_id", maintain_order=True).last()
        start = e.filter(pl.col("step") == 0)
        for name, frame, style in [("warm start", start, dict(color="0.5", ls="--"))] + [
                (r, last.filter(pl.col("recipe") == r), dict(color=colors[r], marker="o", ms=3))
                for r in colors if r in set(last["recipe"])]:
            if not frame.height:
                continue
            vals = frame.select(have).to_numpy()
            ax.plot(ks, vals.mean(axis=0), label=name, **style)
            if name != "warm start":
                ax.fill_between(ks, vals.min(axis=0), vals.max(axis=0), color=style["color"], alpha=0.12, lw=0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(cell)
        ax.set_xlabel("k (samples per problem)")
        ax.set_ylabel("pass@k")
    _legend_outside(fig, axes)
    return fig


def accuracy_kl_frontier(evals: pl.DataFrame, cells: list[str], colors: dict, ylabel: str) -> plt.Figure:
    """Each recipe's evaluations as a path in (KL to the reference, accuracy): the mean over seeds at
    each evaluation of the schedule, in order (the first, at KL 0, is the warm start); one panel per
    cell. A recipe up and to the left of another reached its accuracy at less drift."""
    fig, axes = _axes(len(cells), w=5.0, h=3.8)
    for ax, cell in zip(axes[0], cells):
        e = evals.filter((pl.col("cell") == cell) & pl.col("kl").is_not_null() & pl.col("kl").is_not_nan())
        for r in (r for r in colors if r in set(e["recipe"])):
            path = (e.filter(pl.col("recipe") == r).group_by("fraction").agg(pl.col("kl").mean(), pl.col("acc").mean())
                    .sort("fraction"))
            ax.plot(path["kl"].to_numpy(), path["acc"].to_numpy(), marker="o", ms=3, color=colors[r], label=r)
            ax.plot(path["kl"][-1], path["acc"][-1], marker="s", ms=6, color=colors[r])
        ax.set_title(cell)
        ax.set_xlabel("KL k1 to the reference")
        ax.set_ylabel(textwrap.fill(ylabel, 34))
    _legend_outside(fig, axes)
    return fig


VERDICT_COLORS = {"reproduced": "#2a9d4b", "contradicted": "#c0392b", "undecided": "0.55", "not engaged": "#9bb7d4"}


def claims(t: pl.DataFrame) -> plt.Figure:
    """One row per claim: its paired difference a − b (dot) with the 95% interval (bar), coloured by
    verdict, on a common scale: in units of the claim's margin where it has one (the shaded band is
    ±margin), else relative to arm b's mean (x 100%); points beyond ±4 are drawn at the edge, and the
    numbers in the metric's own units are printed at the right."""
    fig, ax = plt.subplots(figsize=(9.5, 0.36 * t.height + 1.4))
    lim = 4.0
    ax.axvspan(-1, 1, color="0.92", zorder=0)
    ax.axvline(0, color="0.4", lw=0.8)
    labels = []
    for i, r in enumerate(t.iter_rows(named=True)):
        margin = r["margin"]
        by_margin = margin is not None and math.isfinite(margin)
        scale = margin if by_margin else abs(r["mean_b"] or 0.0)
        labels.append(f"{r['claim']}  [{r['metric']}{'' if by_margin else ', ÷|b|'}]")
        if not scale or r["diff"] is None or not math.isfinite(r["diff"]):
            continue
        d, lo, hi = (np.clip(v / scale, -lim, lim) for v in (r["diff"], r["diff_lo"], r["diff_hi"]))
        c = VERDICT_COLORS.get(r["verdict"], "0.3")
        ax.errorbar(d, i, xerr=[[d - lo], [hi - d]], fmt="o", color=c, capsize=3)
        ax.annotate(f"{r['diff']:+.3g} [{r['diff_lo']:+.3g}, {r['diff_hi']:+.3g}]  {r['verdict']}", (lim, i),
                    xytext=(8, -3), textcoords="offset points", fontsize=8, color=c, annotation_clip=False)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(-lim * 1.05, lim * 1.05)
    ax.set_xlabel("a − b, paired by seed: in units of the claim's margin (band ±1), or ÷|b's mean| where it has none")
    ax.set_title("Claims: verdicts (green reproduced, red contradicted, grey undecided, pale blue not engaged)")
    fig.tight_layout()
    return fig


def accuracy_vs_compute(evals: pl.DataFrame, fits: pl.DataFrame, cells: list[str], budgets: dict, colors: dict,
                        xlabels: dict, ylabel: str = "held-out greedy accuracy") -> plt.Figure:
    """Held-out accuracy at each evaluation; dashed: ScaleRL sigmoid where it is identifiable."""
    fig, axes = _axes(len(cells))
    for ax, cell in zip(axes[0], cells):
        d = evals.filter(pl.col("cell") == cell).with_columns((pl.col("fraction") * budgets[cell]).alias("x"))
        if d.height:
            sns.lineplot(d.to_pandas(), x="x", y="acc", hue="recipe", hue_order=[r for r in colors if r in set(d["recipe"])],
                         palette=colors, errorbar=BAND, marker="o", ax=ax)
        for r in fits.filter((pl.col("cell") == cell) & pl.col("identifiable")).iter_rows(named=True):
            xs = np.linspace(budgets[cell] * 0.02, budgets[cell], 100)
            ax.plot(xs, stats.sigmoid(xs, r["A"], r["B"], r["C_mid"], r["R0"]), "--", color=colors[r["recipe"]], lw=1)
        ax.set_title(cell)
        ax.set_xlabel(xlabels[cell])
        ax.set_ylabel(ylabel)
    _legend_outside(fig, axes)
    return fig


def length_vs_compute(evals: pl.DataFrame, cell: str, recipes: list[str], budget: float, xlabel: str) -> plt.Figure:
    """Mean held-out length of correct and of incorrect answers against compute, one panel per recipe."""
    _theme()
    d = (evals.filter(pl.col("cell") == cell)
         .select("recipe", "seed", (pl.col("fraction") * budget).alias("x"),
                 pl.col("len_correct").alias("correct"), pl.col("len_incorrect").alias("incorrect"))
         .unpivot(index=["recipe", "seed", "x"], variable_name="answer", value_name="length")
         .with_columns(pl.col("length").fill_nan(None)))
    present = [r for r in recipes if r in set(d["recipe"])] or recipes[:1]
    ncol = min(6, len(present))
    nrow = math.ceil(len(present) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(2.9 * ncol, 2.5 * nrow + 0.4), squeeze=False, sharex=True, sharey=True)
    colors = {"correct": "#2a9d8f", "incorrect": "#e76f51"}
    for ax, recipe in zip(axes.ravel(), present):
        g = d.filter(pl.col("recipe") == recipe)
        if g.height:
            sns.lineplot(g.to_pandas(), x="x", y="length", hue="answer", hue_order=["correct", "incorrect"],
                         palette=colors, errorbar=BAND, marker="o", ax=ax)
        ax.set_title(recipe)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("mean length (tokens)")
    for ax in axes.ravel()[len(present):]:
        ax.set_visible(False)
    fig.suptitle(f"{cell}: held-out answer length against compute")
    _legend_outside(fig, axes)
    return fig


def length_bias(bias: pl.DataFrame, cells: list[str], colors: dict) -> plt.Figure:
    """Per recipe: length slopes (correct, incorrect) and the incorrect − correct gap, with 95% intervals."""
    fig, axes = _axes(3, nrows=len(cells), w=4.6, h=0.32 * bias["recipe"].n_unique() + 1.3)
    titles = {"slope_correct": "slope, correct answers\n(tokens per budget)",
              "slope_incorrect": "slope, incorrect answers\n(tokens per budget)",
              "gap": "incorrect − correct length\n(tokens)"}
    for row, cell in zip(axes, cells):
        b = bias.filter(pl.col("cell") == cell)
        for ax, col in zip(row, titles):
            for i, r in enumerate(b.iter_rows(named=True)):
                v = r[col]
                if v is None or not math.isfinite(v):
                    continue
                ax.errorbar(v, i, xerr=[[v - r[f"{col}_lo"]], [r[f"{col}_hi"] - v]], fmt="o",
                            color=colors[r["recipe"]], capsize=3)
            ax.axvline(0, color="grey", lw=0.8)
            ax.set_yticks(range(b.height), b["recipe"].to_list())
            ax.invert_yaxis()
            ax.set_title(f"{cell}: {titles[col]}", fontsize=10)
    fig.tight_layout()
    return fig


def grad_weights(w: pl.DataFrame, ref_len: int, max_new_tokens: int) -> plt.Figure:
    """Per-token gradient weight against completion length, one line per aggregation mode."""
    fig, axes = _axes(2, w=5.8, h=3.8)
    modes = w.select("aggregation").unique(maintain_order=True)["aggregation"].to_list()
    pal = dict(zip(modes, sns.color_palette("tab10", len(modes))))
    for mode in modes:
        g = w.filter(pl.col("aggregation") == mode)
        label = f"{mode}: {', '.join(g['recipe'].unique(maintain_order=True).to_list())}"
        first = g.filter(pl.col("recipe") == g["recipe"][0])
        axes[0, 0].plot(first["length"], first["weight"], color=pal[mode], label=label)
        axes[0, 1].plot(first["length"], first["seq_weight"], color=pal[mode], label=label)
    axes[0, 0].set_ylabel("per-token weight (token_mean at L_ref = 1)")
    axes[0, 1].set_ylabel("whole-completion weight (per-token × L)")
    for ax in axes[0]:
        ax.set_yscale("log")
        ax.set_xlabel("completion length L (tokens)")
        ax.axvline(ref_len, color="grey", lw=0.8, ls=":")
    fig.suptitle(f"Aggregation: gradient weight of one completion of length L (others {ref_len} tokens, "
                 f"L_max {max_new_tokens})", fontsize=10)
    _legend_outside(fig, axes)
    return fig


def step_metrics(curves: pl.DataFrame, metrics: dict[str, str], cells: list[str], budgets: dict, colors: dict,
                 xlabels: dict, recipes: list[str] | None = None) -> plt.Figure:
    """Binned step metrics against compute: one row per metric, one column per cell."""
    fig, axes = _axes(len(cells), nrows=len(metrics), h=3.2)
    for row, (metric, label) in zip(axes, metrics.items()):
        for ax, cell in zip(row, cells):
            d = curves.filter((pl.col("cell") == cell) & (pl.col("metric") == metric) & pl.col("value").is_not_null())
            if recipes is not None:
                d = d.filter(pl.col("recipe").is_in(recipes))
            d = d.with_columns((pl.col("x") * budgets[cell]).alias("x"))
            if d.height:
                sns.lineplot(d.to_pandas(), x="x", y="value", hue="recipe",
                             hue_order=[r for r in colors if r in set(d["recipe"])], palette=colors, errorbar=BAND, ax=ax)
            ax.set_title(f"{cell}: {label}", fontsize=10)
            ax.set_xlabel(xlabels[cell])
            ax.set_ylabel(label)
    _legend_outside(fig, axes)
    return fig


def scales(evals: pl.DataFrame, table: pl.DataFrame, groups: dict[str, list[str]], budgets: dict, colors: dict,
           xlabels: dict, metric: str, ylabel: str = "held-out greedy accuracy") -> plt.Figure:
    """Per task/regime (one row each): held-out accuracy against compute (log x), one panel per
    model scale, mean over seeds with a min–max band; the last panel: the primary metric's mean
    and 95% interval per recipe against the model's parameters (log x). The warm start (compute 0)
    cannot sit on a log axis and is left out of the curves."""
    ncols = max(len(c) for c in groups.values()) + 1
    fig, axes = _axes(ncols, nrows=len(groups), w=4.4, h=3.4)
    for row, (label, cells) in zip(axes, groups.items()):
        for ax, cell in zip(row, cells):
            d = (evals.filter((pl.col("cell") == cell) & (pl.col("fraction") > 0))
                 .with_columns((pl.col("fraction") * budgets[cell]).alias("x")))
            if d.height:
                sns.lineplot(d.to_pandas(), x="x", y="acc", hue="recipe",
                             hue_order=[r for r in colors if r in set(d["recipe"])], palette=colors, errorbar=BAND,
                             marker="o", ax=ax)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # a narrow log range labels its minor ticks, overlapping
            ax.set_title(cell, fontsize=10)
            ax.set_xlabel(xlabels[cell])
            ax.set_ylabel(ylabel)
        for ax in row[len(cells):-1]:
            ax.set_visible(False)
        ax = row[-1]
        t = table.filter(pl.col("cell").is_in(cells) & pl.col("params").is_not_null()
                         & pl.col("primary_mean").is_not_null())
        for recipe in [r for r in colors if r in set(t["recipe"])]:
            g = t.filter(pl.col("recipe") == recipe).sort("params")
            x, m = g["params"].to_numpy(), g["primary_mean"].to_numpy()
            lo = g["primary_lo"].fill_null(float("nan")).to_numpy()
            hi = g["primary_hi"].fill_null(float("nan")).to_numpy()
            ax.errorbar(x, m, yerr=[np.nan_to_num(m - lo), np.nan_to_num(hi - m)], fmt="o-", color=colors[recipe],
                        capsize=3, label=recipe)
        ax.set_xscale("log")
        sizes = sorted(set(t["params"].to_list()))
        ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels overlap at 3 points
        ax.set_xticks(sizes, [f"{p / 1e6:.3g}M" for p in sizes])
        ax.set_title(f"{label}: {metric} by model size", fontsize=10)
        ax.set_xlabel("model parameters")
        ax.set_ylabel(metric)
    _legend_outside(fig, axes)
    return fig


SENSITIVITY_LINES = 8  # more values of the other knobs than this (a TPE search over ranges): points unjoined


def tuning_sensitivity(points: pl.DataFrame, panels: list[str], colors: dict, ylabel: str) -> plt.Figure:
    """Sensitivity curves of `bench tune`: one panel per study (`panels`, the `panel` labels in order),
    the objective against the learning rate (log x). points: one row per complete trial with panel,
    recipe, lr, value (mean over tuning seeds), lo and hi (the lowest and highest seed: the bar),
    group (the other tuned parameters' values, "" when lr is the only one: one line per group, or
    unjoined points in the recipe's colour beyond SENSITIVITY_LINES groups) and chosen (the trial the
    tuned settings hold: a star)."""
    ncols = min(4, len(panels))
    fig, axes = _axes(ncols, nrows=math.ceil(len(panels) / ncols), w=4.4, h=3.4)
    for ax, panel in zip(axes.ravel(), panels):
        p = points.filter(pl.col("panel") == panel).sort("group", "lr")
        groups = p["group"].unique(maintain_order=True).to_list()
        lines, many = 1 < len(groups) <= SENSITIVITY_LINES, len(groups) > SENSITIVITY_LINES
        if many:
            groups, p = [""], p.with_columns(pl.lit("").alias("group"))
        shades = sns.color_palette("viridis", len(groups)) if lines else [colors[p["recipe"][0]]]
        for group, color in zip(groups, shades):
            g = p.filter(pl.col("group") == group)
            x, m = g["lr"].to_numpy(), g["value"].to_numpy()
            ax.errorbar(x, m, yerr=[m - g["lo"].to_numpy(), g["hi"].to_numpy() - m], fmt="o" if many else "o-",
                        color=color, capsize=3, ms=4, lw=1, label=group or None)
        c = p.filter(pl.col("chosen"))
        if c.height:
            ax.plot(c["lr"].to_numpy(), c["value"].to_numpy(), "*", ms=15, mfc="none", mec="black", mew=1.2,
                    label="chosen" if lines else None)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # a narrow log range labels its minor ticks, overlapping
        ax.set_title(panel, fontsize=10)
        ax.set_xlabel("learning rate (train.lr)")
        ax.set_ylabel(ylabel)
        if lines:
            ax.legend(fontsize=7, frameon=False)
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig
