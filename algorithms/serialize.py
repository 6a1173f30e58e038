"""Canonical JSON for parts and recipes: type tags on every part, sorted keys, floats as floats.

`to_dict(part)` -> {"type": tag, field: value, ...}; `from_dict` inverts it and fails loudly on an
unknown type tag or field, naming the path. A recipe's `id` is sha256 of its canonical JSON
without the `name` label (the name is a label, not part of the algorithm), first 12 hex digits.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import types
from typing import Any, Union, get_args, get_origin

from .errors import ConfigError
from .parts import PARTS, Part, hints

EXCLUDED = ("description",)  # documentation fields: not serialized, not compared


def to_dict(p: Part) -> dict[str, Any]:
    """Every field but documentation ones; a LATER field only when it differs from its default."""
    out: dict[str, Any] = {"type": p.tag}
    tps = hints(type(p))
    for f in dataclasses.fields(p):
        if f.name in EXCLUDED or (f.name in p.LATER and getattr(p, f.name) == default(f)):
            continue
        out[f.name] = encode(getattr(p, f.name), tps[f.name])
    return out


def default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING


def encode(v: Any, tp: Any) -> Any:
    if isinstance(v, Part):
        return to_dict(v)
    if isinstance(v, tuple):
        args = get_args(tp) if get_origin(tp) is tuple else ()
        item = args[0] if len(args) == 2 and args[1] is Ellipsis else Any  # tuple[float, ...]: floats as floats
        return [encode(x, item) for x in v]
    if is_float_type(tp) and isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return v


def is_float_type(tp: Any) -> bool:
    if tp is float:
        return True
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return args == [float]
    return False


def canonical(d: dict[str, Any]) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"), allow_nan=False)


def to_json(p: Part) -> str:
    return canonical(to_dict(p))


def from_dict(d: Any, path: str = "$") -> Part:
    if not isinstance(d, dict) or "type" not in d:
        raise ConfigError(f"{path}: expected an object with a 'type' tag, got {d!r}")
    tag = d["type"]
    if tag not in PARTS:
        close = difflib.get_close_matches(str(tag), PARTS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{path}.type: unknown part type {tag!r}{hint} Known: {', '.join(sorted(PARTS))}")
    cls = PARTS[tag]
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in EXCLUDED}
    kwargs = {}
    for key, value in d.items():
        if key == "type":
            continue
        if key not in fields:
            raise ConfigError(f"{path}.{key}: {tag} has no field {key!r}; fields: {', '.join(fields) or 'none'}")
        kwargs[key] = decode(value, f"{path}.{key}")
    missing = [name for name, f in fields.items() if name not in kwargs and default(f) is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{path}.{missing[0]}: missing; a {tag} part needs {', '.join(missing)}")
    try:
        return cls(**kwargs)
    except ConfigError as e:  # "PPOClip.eps_high: ..." -> "recipe.objective.eps_high: ...": the path the user wrote
        msg, own = str(e), f"{cls.__name__}."
        raise ConfigError(f"{path}.{msg[len(own):]}" if msg.startswith(own) else f"{path}: {msg}") from None


def decode(v: Any, path: str) -> Any:
    if isinstance(v, dict):
        return from_dict(v, path)
    if isinstance(v, list):
        return tuple(decode(x, f"{path}[{i}]") for i, x in enumerate(v))
    return v


def from_json(s: str) -> Part:
    """The part (usually a Recipe) that `to_json` wrote."""
    return from_dict(json.loads(s))


def short_hash(d: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(d).encode()).hexdigest()[:12]


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    """{"objective.eps_high": 0.28, "shaping.0.type": "overlong_penalty", ...}"""
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else k))
        return out
    if isinstance(d, list):
        out = {f"{prefix}.len": len(d)} if prefix else {}
        for i, v in enumerate(d):
            out.update(flatten(v, f"{prefix}.{i}"))
        return out
    return {prefix: d}
