"""Reports: a pure function of results/ and a fixed bootstrap seed (DESIGN.md, "Report").

    from bench import report, suite
    out = report.build(suite.load("math-small"), Path("results"))    # -> results/reports/math-small/

writes, for the runs of the suite's current expansion (selected by run id, not by tag), into
`default_dir` (a results directory's report beside its runs; a published report, reports/NAME/,
from its own data/):

    OUT/report.md                 Markdown, figures beside it in figures/*.png
    OUT/index.html                one self-contained page, the same content, figures embedded
    OUT/*.csv                     every table a section writes (bench/report/registry.py): leaderboard, sigmoid_fits, length_bias,
                                  grad_weights, clipping, recipe_diffs, runs, claims, sanity, power, ...;
                                  with `bench tune` trials: tuning (one row per trial run), tuning_cost,
                                  lr_robustness and tuned_vs_default

report.md and the CSVs are byte-identical when regenerated from the same results (no timestamps,
fixed row order and float formats); index.html adds when and where it was generated.

Modules: data (Polars queries over results/), stats (pure statistics), tables (one frame per
table), figures (seaborn), registry (what a section declares: its tables, CSVs and figures),
sections/ (one module per section, and the report's order: sections.ORDER), context (what every
section reads), prose (phrases several sections share), render (Markdown, HTML, CSV), manifest
(what reproduces it).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.suite import Suite


def default_dir(suite_name: str, root: Path | str | None = None) -> Path:
    """Where the report of suite NAME over results ROOT goes unless --out says: $BENCH_REPORTS/NAME
    when that is set; a published report's own directory when ROOT is its data (REPORTS/NAME/data,
    as its manifest's `bench report NAME --results reports/NAME/data` regenerates it in place); else
    ROOT/reports/NAME, beside the runs it reads. So `bench suite math-small` never writes over the
    committed reports/math-small/, which also holds tuning and default-settings runs that a user's
    results directory does not. Without ROOT: reports/NAME (where `bench publish` writes)."""
    env = os.environ.get("BENCH_REPORTS")
    if env:
        return Path(env) / suite_name
    if root is None:
        return Path("reports") / suite_name
    root = Path(root)
    if root.name == "data" and root.parent.name == suite_name:
        return root.parent
    return root / "reports" / suite_name


def build(suite: Suite | str, root: Path | str, out_dir: Path | str | None = None) -> Path:
    """Write the report of `suite` over results `root` into out_dir (default: `default_dir`); return out_dir."""
    from bench import suite as suites
    from bench.report import data, manifest, registry, render, sections

    s = suites.load(suite) if isinstance(suite, (str, Path)) else suite
    root = Path(root)
    out = Path(out_dir) if out_dir is not None else default_dir(s.name, root)
    ctx = sections.Context(s, root, data.load(s, root))
    sections.build_tables(ctx)
    blocks = sections.render(ctx)
    title = f"grpo-bench report: {s.name}"

    (out / "figures").mkdir(parents=True, exist_ok=True)
    for name, frame in ctx.tables.items():
        _write(out / f"{name}.csv", render.csv_frame(frame).encode())
    for name in registry.all_tables():  # a table of an earlier build of this report that this one does not have
        if name not in ctx.tables:
            (out / f"{name}.csv").unlink(missing_ok=True)
    for stale in (out / "figures").glob("*.png"):  # figures of an earlier version of the suite
        if stale.name not in ctx.figs:
            stale.unlink()
    for name, png in ctx.figs.items():
        _write(out / "figures" / name, png)
    _write(out / "report.md", render.markdown(title, blocks).encode())
    gen = [render.Para("This page was generated (not part of report.md, which stays byte-identical):"),
           render.Table(("item", "value"), tuple(manifest.generator()))]
    _write(out / "index.html", render.html_page(title, blocks + gen, ctx.figs).encode())
    return out


def build_if_results(suite: Suite, root: Path | str, out=None) -> Path | None:
    """`build(suite, root)` after `bench suite`, unless none of the suite's runs has a result: then an
    existing report is never replaced by an empty one, and no empty one is written (the line printed
    to `out`, default stdout, says so). The report directory, or None."""
    from bench import results

    out = out or sys.stdout
    root = Path(root)
    cfgs = suite.expand()
    if not any(results.is_finished(root, c.run_id)
               and results.read_meta(results.run_dir(root, c.run_id)).get("status") != "failed" for c in cfgs):
        there = default_dir(suite.name, root)
        kept = f"; the existing report in {there} is kept" if (there / "report.md").is_file() else ""
        print(f"report: not written: none of the {len(cfgs)} run(s) has a result yet{kept} "
              f"(`bench report {suite.name}` writes one when they do)", file=out)
        return None
    path = build(suite, root)
    print(f"report: {path}", file=out)
    return path


def _write(path: Path, content: bytes) -> None:
    """Write through a temporary name, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(content)
    os.replace(tmp, path)
