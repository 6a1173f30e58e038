"""The tuned overrides file: best values per (cell, recipe), which `bench suite SUITE --tuned` applies.

    results/tuned/math-small.toml

    [overrides."addition/nano".grpo]
    # study math-small/addition/nano/grpo: best of 8 trials (3 pruned) is trial 5, final = 0.620
    "train.lr" = 0.000123

Each table holds RunConfig override paths (recipe.* and train.*), the same paths a suite's
[overrides.RECIPE] table takes; `--tuned` applies them after the suite's own overrides, so they
take precedence. Copied to suites/tuned/NAME.toml and committed, they become the suite's settings:
`bench.suite.load` applies that file whenever it exists (`bench suite --defaults` ignores it), and
the report's Summary says so. Reading and applying live in bench.suite (read_tuned, apply_tuned).
A table without a cell (`[overrides.grpo]`) applies to every cell. Tuned runs
get new run ids (their configs differ) and the tag `tuned = true`; their run.json shows the values.
"""
from __future__ import annotations

import json
from pathlib import Path

from bench.suite import apply_tuned as apply, read_tuned as read  # noqa: F401 (re-exported)


def default_path(root: Path, suite: str) -> Path:
    return Path(root) / "tuned" / f"{suite}.toml"


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)  # shortest repr: reads back to the same float
    if isinstance(v, (int, str)):
        return json.dumps(v)
    raise ValueError(f"cannot write {v!r} to a tuned overrides file")


def write(path: Path, suite: str, tables: dict[tuple[str, str], dict], notes: dict[tuple[str, str], str] | None = None,
          header: str = "") -> Path:
    """tables: (cell, recipe) -> {path: value}; merged over the tables already in the file, whose
    notes (the comment under each table's header: the study it came from) are kept."""
    path = Path(path)
    merged = read(path) if path.is_file() else {}
    merged.update(tables)
    notes = {**(_notes(path) if path.is_file() else {}), **(notes or {})}
    lines = [f"# Tuned overrides for suite {suite}, written by `bench tune`: the best trial of each study.",
             f"# `bench suite {suite} --tuned` applies them on top of the suite's own [overrides].",
             *(f"# {h}" for h in header.splitlines() if h)]
    for (cell, recipe) in sorted(merged):
        key = f'[overrides."{cell}".{recipe}]' if cell else f"[overrides.{recipe}]"
        lines += ["", key]
        if (cell, recipe) in notes:
            lines.append(f"# {notes[(cell, recipe)]}")
        lines += [f'"{p}" = {_toml_value(v)}' for p, v in sorted(merged[(cell, recipe)].items())]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)
    return path


def _notes(path: Path) -> dict[tuple[str, str], str]:
    """(cell, recipe) -> the comment line right under its table header, as `write` puts it."""
    import re

    out, key = {}, None
    for line in path.read_text().splitlines():
        m = re.fullmatch(r'\[overrides\.(?:"([^"]*)"\.)?([A-Za-z0-9_.-]+)\]', line.strip())
        if m:
            key = (m.group(1) or "", m.group(2))
        elif key is not None and line.startswith("# "):
            out[key] = line[2:]
            key = None
        else:
            key = None
    return out

