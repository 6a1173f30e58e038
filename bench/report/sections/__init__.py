"""The report's sections, one module each, and their order (ORDER). Every module of this package
registers its own with `@section(name, ...)` (bench/report/registry.py) and is imported here, so a
new section is one module plus its name in ORDER:

    summary (led by each contrast on three axes, with the skill check when runs logged format rates) ·
    leaderboard (with the equivalence margin against the spread between recipes) · coverage: skill,
    sharpening or collapse (pass@k curves, the accuracy–KL frontier) · across tasks (when cells span
    ≥ 2 tasks) · claims and sanity checks (when the suite declares some) · model scale (when a task
    spans ≥ 2 model scales) · power (with warm-start variance when a cell has several) · accuracy
    against compute (AUC, sigmoid fits) · length bias (lengths, slopes and gaps, aggregation
    weights) · KL · clipping (with the ranking checked against the clipped twin of a cell that turns
    the clip off, and the ratio telemetry) · entropy · group weights · recipes as diffs from the
    baseline · tuning (trial runs, sensitivity curves, chosen settings and their cost, lr
    robustness, defaults against tuned; bench/report/tuning.py) · failed, diverged and missing runs ·
    manifest

`build_tables` computes every section's tables once, before any section renders (an owner's tables
before those of a section that needs them); `render` then renders the sections in ORDER and refuses
a table or a figure that the section rendering it does not declare.
"""
from __future__ import annotations

import importlib
import pkgutil

from bench.report import registry
from bench.report.context import Context
from bench.report.render import Block

ORDER = ["summary", "leaderboard", "coverage", "across_tasks", "claims", "sanity", "model_scale", "power", "accuracy",
         "length", "kl", "clipping", "entropy", "group_weights", "recipes", "tuning", "problems", "manifest"]

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = ["ORDER", "Context", "blocks", "build_tables", "render"]


def _ordered() -> list[registry.Section]:
    """The sections in ORDER; a registered section missing from it (or a name it has twice) raises."""
    left = sorted(set(registry.SECTIONS) - set(ORDER))
    if left:
        raise ValueError(f"report section(s) {left} are registered but not in bench.report.sections.ORDER")
    if len(set(ORDER)) != len(ORDER):
        raise ValueError(f"bench.report.sections.ORDER names a section twice: {ORDER}")
    return [registry.get(name) for name in ORDER]


def build_tables(ctx: Context) -> None:
    """Compute every section's tables into ctx.tables (each becomes a CSV), in ORDER but the owner of a
    table a section needs first; a None frame (this report has no such table) is left out."""
    done: set[str] = set()

    def build(s: registry.Section, path: tuple[str, ...]) -> None:
        if s.name in done or s.name in path:  # in path: it needs a table only to render, built by then
            return
        for table in s.needs:
            owner = registry.owner(table)
            if owner is None:
                raise ValueError(f"report section {s.name!r} needs table {table!r}, which no section writes")
            build(owner, path + (s.name,))
        done.add(s.name)
        if s.tables is None:
            return
        for name, frame in s.tables(ctx).items():
            if name not in s.writes:
                raise AssertionError(f"report section {s.name!r} computed table {name!r}, which it does not declare")
            if frame is not None:
                ctx.tables[name] = frame

    for s in _ordered():
        build(s, ())


def blocks(name: str, ctx: Context) -> list[Block]:
    """One section's blocks (after `build_tables`); a table or figure it adds must be among its own."""
    s = registry.get(name)
    tables, figs = set(ctx.tables), set(ctx.figs)
    out = s.render(ctx)
    for table in set(ctx.tables) - tables:
        if table not in s.writes:
            raise AssertionError(f"report section {name!r} wrote table {table!r}, which it does not declare")
    for fig in set(ctx.figs) - figs:
        if not s.owns_figure(fig):
            raise AssertionError(f"report section {name!r} drew figure {fig!r}, which it does not declare")
    return out


def render(ctx: Context) -> list[Block]:
    """Every section's blocks, in ORDER."""
    return [b for s in _ordered() for b in blocks(s.name, ctx)]
