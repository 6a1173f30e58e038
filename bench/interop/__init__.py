"""Recipes to and from the trainers our users run: TRL's GRPOConfig (`trl.py`) and verl's PPO trainer
config (`verl.py`); `bench recipe --from-trl/--from-verl/--to` is the front door (bench/cli.py).

An import is a `Translation`: the recipe, the run settings the config also fixes (group size, learning
rate, generation cap: `--set` paths of `bench run`), and one line for every field it read, by fate:
mapped (into a part or a setting), ignored (changes only throughput: sharding, vLLM memory, logging),
unmodelled (changes results, but no part of ours expresses it: named, never silently dropped).
Anything else that is wrong with the input (its syntax, a field's type or value) is an InputError of
one line naming the file and the field. The libraries' semantics each field maps to are in their
modules, checked by the tests against the libraries' own loss code (tests/interop/).
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import algorithms
from algorithms.errors import ConfigError, InputError, MissingInput
from algorithms.serialize import flatten

TARGETS = ("trl", "verl")


@dataclass
class Translation:
    """What an imported config means here."""

    recipe: algorithms.Recipe
    source: str  # the file (or "--from-trl-args") the fields came from
    settings: dict[str, Any] = field(default_factory=dict)  # RunConfig paths: train.group_size = 8, ...
    mapped: list[str] = field(default_factory=list)  # "loss_type = 'dapo' -> aggregation token_mean"
    ignored: list[str] = field(default_factory=list)  # fields that change throughput only
    unmodelled: list[str] = field(default_factory=list)  # fields that change results but map to nothing
    notes: list[str] = field(default_factory=list)  # where the mapping departs from the library


def load_tree(path: str | Path) -> dict[str, Any]:
    """A YAML or JSON file's top-level table; one-line errors naming the file."""
    p = Path(path)
    if not p.is_file():
        raise MissingInput(f"{p}: no such file (a GRPOConfig or verl config as YAML or JSON)")
    text = p.read_text(encoding="utf-8", errors="replace")
    try:
        if p.suffix.lower() == ".json":
            tree = json.loads(text)
        else:
            import yaml

            tree = yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{p}: line {e.lineno}: not valid JSON: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 -- yaml's errors share no base we can import without yaml
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise InputError(f"{p}: {where}not valid YAML: {getattr(e, 'problem', None) or e}") from None
    if tree is None:
        return {}
    if not isinstance(tree, dict):
        raise InputError(f"{p}: expected a table of config fields at the top, got {type(tree).__name__}")
    return tree


def load_verl(path: str | Path) -> dict[str, Any]:
    """A verl config file as {dotted.key: value}: nested tables and dotted keys (Hydra overrides) alike."""
    tree = load_tree(path)
    out: dict[str, Any] = {}

    def walk(t: dict, prefix: str) -> None:
        for k, v in t.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) and v:
                walk(v, key)
            else:
                out[key.lstrip("+")] = v

    walk(tree, "")
    return out


def parse_cli_args(text: str, source: str = "--from-trl-args") -> dict[str, Any]:
    """`--loss_type dapo --beta 0 --mask_truncated_completions` -> {loss_type: "dapo", beta: 0, ...},
    as TRL's argument parser reads them (a flag with no value is True; values parsed as YAML scalars)."""
    import yaml

    try:
        words = shlex.split(text)
    except ValueError as e:
        raise InputError(f"{source}: {e}") from None
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("--") or len(w) == 2:
            raise InputError(f"{source}: {w!r}: expected --field value (e.g. --loss_type dapo --beta 0.04)")
        key, eq, raw = w[2:].partition("=")
        key = key.replace("-", "_")
        if not eq:
            if i + 1 < len(words) and not words[i + 1].startswith("--"):
                raw, i = words[i + 1], i + 1
            else:
                raw = "true"
        try:
            out[key] = yaml.safe_load(raw)
        except yaml.YAMLError:
            out[key] = raw
        i += 1
    return out


def expect(source: str, key: str, value: Any, kind: type | tuple, what: str) -> Any:
    """value when isinstance(value, kind) (bool is not a number); else a one-line InputError."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        raise InputError(f"{source}: {key}: got {value!r}; expected {what}")
    return value


def choice(source: str, key: str, value: Any, valid) -> Any:
    if value not in valid:
        raise InputError(f"{source}: {key}: unknown value {value!r}; valid: {', '.join(map(str, valid))}")
    return value


def build(source: str, **parts: Any) -> algorithms.Recipe:
    """A Recipe from parts; a part's own check (e.g. delta <= 1 + eps_high) reads as the source's error."""
    try:
        return algorithms.Recipe(**parts)
    except ConfigError as e:
        raise InputError(f"{source}: {e}") from None


def closest_registered(recipe: algorithms.Recipe) -> tuple[str, dict[str, tuple]]:
    """The registered recipe the fewest field paths away, and that diff (base's value, recipe's)."""
    best = None
    for name in algorithms.names():
        d = algorithms.get(name).diff(recipe)
        if best is None or len(d) < len(best[1]):
            best = (name, d)
    return best


def variant_toml(tr: Translation, name: str) -> str:
    """The import as a `[variants.NAME]` table: whole parts that differ from the closest registered
    recipe, so `bench run --recipe file:PATH` runs it and a suite can paste it (README, Recipe variants)."""
    base, diff = closest_registered(tr.recipe)
    changed = sorted({k.split(".", 1)[0] for k in diff})
    d = tr.recipe.to_dict()
    lines = [f"# imported from {tr.source} by `bench recipe`; recipe id {tr.recipe.id}",
             *(f"# unmodelled (not in this recipe): {u}" for u in tr.unmodelled),
             *(f"# run setting: {k} = {toml_value(v)}" for k, v in tr.settings.items()),
             f"[variants.{name}]", f'base = "{base}"']
    for k in changed:
        lines.append(f"{k} = {toml_value(d[k])}")
    return "\n".join(lines) + "\n"


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items() if x is not None) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML for {v!r}")


def load_variant_file(path: str | Path) -> algorithms.Recipe:
    """The recipe of a file `bench recipe --write` wrote (one `[variants.NAME]` table)."""
    import tomllib

    from bench.suite import _variants

    p = Path(path)
    if not p.is_file():
        raise MissingInput(f"{p}: no such file (a recipe variant written by `bench recipe ... --write`)")
    try:
        tree = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{p}: not valid TOML: {e}") from None
    tables = tree.get("variants")
    if set(tree) != {"variants"} or not isinstance(tables, dict) or len(tables) != 1:
        raise InputError(f"{p}: expected exactly one [variants.NAME] table, got keys {', '.join(tree) or 'none'}")
    (name, table), = tables.items()
    if isinstance(table, dict) and set(table) <= {"base", "description"} and table.get("base") in algorithms.names():
        return algorithms.get(table["base"])  # the import is a registered recipe as it is

    def err(key: str, msg: str) -> InputError:
        return InputError(f"{p}: {key}: {msg}" if key else f"{p}: {msg}")

    return _variants(tables, err)[name].recipe


def describe(tr: Translation) -> str:
    """The import, for stdout: the recipe's parts, the run settings, and the fields by fate."""
    base, diff = closest_registered(tr.recipe)
    rows = [str(tr.recipe),
            f"  closest registered recipe: {base}" + (" (identical)" if not diff else
                                                     " (differs in " + ", ".join(sorted(diff)) + ")")]
    if tr.settings:
        rows.append("run settings (bench run --set): " + " ".join(f"{k}={v}" for k, v in tr.settings.items()))
    for title, items in (("mapped", tr.mapped), ("ignored (throughput only)", tr.ignored), ("notes", tr.notes)):
        if items:
            rows.append(f"{title}:")
            rows.extend(f"  {x}" for x in items)
    return "\n".join(rows)


def flat_parts(recipe: algorithms.Recipe) -> dict[str, Any]:
    return flatten(recipe.to_dict())
