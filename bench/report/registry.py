"""The registry of report sections: the `section` decorator that fills it (bench/report/sections/:
every module there registers its own), `get(name)` and `names()`. The report's order is the list
of names `bench.report.sections.ORDER`.

A section declares what it reads and writes, so the report can compute every table once, in an
order that serves each section's inputs, and refuse a CSV or a figure that no section owns:

    name     its key in ORDER
    render   ctx -> blocks (Markdown/HTML, render.py); it adds its figures with `ctx.figure`
    tables   ctx -> {table name: frame, or None where this report has no such table}: the frames it
             computes before any section renders (each becomes NAME.csv); None when it has none
    writes   every table name it may put in ctx.tables (from `tables`, or while it renders)
    needs    the tables of other sections it reads (theirs are computed before its own)
    figures  the file names it may add under figures/, as fnmatch patterns ("length_*.png")
"""
from __future__ import annotations

import difflib
import fnmatch
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from algorithms.errors import InputError


@dataclass(frozen=True)
class Section:
    name: str
    render: Callable
    tables: Callable | None = None
    writes: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    description: str = ""

    def owns_figure(self, file: str) -> bool:
        return any(fnmatch.fnmatchcase(file, p) for p in self.figures)


SECTIONS: dict[str, Section] = {}


def section(name: str, *, tables: Callable | None = None, writes: tuple[str, ...] = (), needs: tuple[str, ...] = (),
            figures: tuple[str, ...] = ()) -> Callable[[Callable], Callable]:
    """Register the decorated `render(ctx) -> blocks` as section `name` (its docstring is its
    description). Registering a name twice, or a table another section already writes, raises."""

    def wrap(render: Callable) -> Callable:
        if name in SECTIONS:
            raise ValueError(f"report section {name!r} is already registered")
        for other in SECTIONS.values():
            shared = set(writes) & set(other.writes)
            if shared:
                raise ValueError(f"report section {name!r}: table(s) {sorted(shared)} already written by {other.name!r}")
        SECTIONS[name] = Section(name, render, tables, tuple(writes), tuple(needs), tuple(figures),
                                 inspect.cleandoc(render.__doc__ or ""))
        return render

    return wrap


def names() -> list[str]:
    """Registered section names, sorted."""
    return sorted(SECTIONS)


def get(name: str) -> Section:
    """The named section; an unknown name raises, suggesting the closest one."""
    if name in SECTIONS:
        return SECTIONS[name]
    close = difflib.get_close_matches(name, SECTIONS, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise InputError(f"unknown report section {name!r}.{hint} Known sections: {', '.join(names())}")


def owner(table: str) -> Section | None:
    """The section that writes `table`, or None."""
    return next((s for s in SECTIONS.values() if table in s.writes), None)


def all_tables() -> tuple[str, ...]:
    """Every table any registered section may write (a report writes each as NAME.csv)."""
    return tuple(t for s in SECTIONS.values() for t in s.writes)
