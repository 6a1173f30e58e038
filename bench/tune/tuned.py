"""The tuned overrides file: best values per (cell, recipe), which `bench suite SUITE --tuned` applies.

    results/tuned/math-small.toml

    [overrides."addition/nano".grpo]
    # study math-small/addition/nano/grpo: best of 8 trials (3 pruned) is trial 5, final = 0.620
    "train.lr" = 0.000123

Each table holds RunConfig override paths (recipe.* and train.*), the same paths a suite's
[overrides.RECIPE] table takes; `--tuned` applies them after the suite's own overrides, so they
take precedence. A table without a cell (`[overrides.grpo]`) applies to every cell. Tuned runs
get new run ids (their configs differ) and the tag `tuned = true`; their run.json shows the values.
"""
from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path

from bench.suite import Suite, unknown
from bench.textfile import read_text
from bench.tune.space import TUNABLE


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
    """tables: (cell, recipe) -> {path: value}; merged over the tables already in the file."""
    path = Path(path)
    merged = read(path) if path.is_file() else {}
    merged.update(tables)
    notes = notes or {}
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


def read(path: Path) -> dict[tuple[str, str], dict]:
    """(cell, recipe) -> {path: value}; cell is "" for a table that applies to every cell."""
    path = Path(path)
    try:
        data = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: invalid TOML: {e}") from None
    if set(data) - {"overrides"}:
        raise ValueError(f"{path}: unknown top-level keys {sorted(set(data) - {'overrides'})}; a tuned file holds "
                         "[overrides.\"TASK/SCALE\".RECIPE] tables")
    out = {}
    for key, table in data.get("overrides", {}).items():
        if not isinstance(table, dict):
            raise ValueError(f"{path}: overrides.{key}: expected a table")
        if "/" in key:  # a cell: recipes below it
            for recipe, values in table.items():
                out[(key, recipe)] = _values(path, f"overrides.\"{key}\".{recipe}", values)
        else:
            out[("", key)] = _values(path, f"overrides.{key}", table)
    return out


def _values(path: Path, where: str, values) -> dict:
    if not isinstance(values, dict) or any(isinstance(v, dict) for v in values.values()):
        raise ValueError(f'{path}: {where}: expected dotted paths with values, e.g. "train.lr" = 1e-4')
    for p in values:
        if not p.startswith(TUNABLE):
            raise ValueError(f"{path}: {where}: {p!r}: only {' and '.join(t + '*' for t in TUNABLE)} paths")
    return dict(values)


def apply(suite: Suite, path: Path) -> Suite:
    """The suite with the file's tuned values; checks cells, recipes and values against the suite."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no tuned overrides at {path}; run `bench tune {suite.name} --all` first "
                                "(or pass --tuned-file)")
    tables = read(path)
    cells = [c.name for c in suite.cells]
    per = {}
    for (cell, recipe), values in sorted(tables.items(), key=lambda kv: kv[0][0] != ""):  # a cell's table wins
        if recipe not in suite.recipes:
            raise ValueError(f"{path}: {unknown('recipe', recipe, list(suite.recipes))} (in suite {suite.name})")
        if cell and cell not in cells:
            raise ValueError(f"{path}: {unknown('cell', cell, cells)} (in suite {suite.name})")
        for c in ([cell] if cell else cells):
            per[(c, recipe)] = {**per.get((c, recipe), {}), **values}
    tuned = dataclasses.replace(suite, cell_overrides=per)
    for (c, recipe) in per:  # bad paths or values fail here, before any run
        cell = next(x for x in suite.cells if x.name == c)
        try:
            tuned.run_config(cell, recipe, suite.seeds[0])
        except ValueError as e:
            raise ValueError(f"{path}: {c} {recipe}: {e}") from None
    return tuned
