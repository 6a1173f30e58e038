"""The base of every part: a frozen dataclass whose fields are checked against their annotations.

A part is one choice on one axis of a recipe (an advantage estimator, an objective, an
aggregation, ...). Parts register under a type tag (`@part("ppo_clip")`), which is what canonical
JSON writes, so two parts with no fields never collide. `__post_init__` validates and raises
`ConfigError` (algorithms/errors.py) naming the field; it never rewrites a value.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

from .errors import ConfigError

PARTS: dict[str, type[Part]] = {}


def part(tag: str, *, kw_only: bool = False):
    """Class decorator: make a frozen dataclass and register it under `tag` (duplicates raise)."""

    def wrap(cls):
        if tag in PARTS:
            raise ValueError(f"part type {tag!r} is already registered by {PARTS[tag].__name__}")
        cls = dataclasses.dataclass(frozen=True, kw_only=kw_only)(cls)
        cls.tag = tag
        PARTS[tag] = cls
        return cls

    return wrap


@functools.cache
def hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


class Part:
    """Base class of every part. Subclasses add `check()` for ranges; types are checked here."""

    tag: ClassVar[str] = ""
    # Fields added after recipes were published: canonical JSON leaves them out while they hold
    # their default, so every earlier recipe id (and run id) stays what it was.
    LATER: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        where = type(self).__name__
        for f in dataclasses.fields(self):
            check_type(f"{where}.{f.name}", getattr(self, f.name), hints(type(self))[f.name])
        self.check()

    def check(self) -> None:
        """Range checks; raise `ConfigError` naming the field (`fail`, `positive`, ...)."""

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def short(self) -> str:
        """`tag(field=value, ...)`, the form recipes print."""
        args = ", ".join(f"{f.name}={short(getattr(self, f.name))}" for f in dataclasses.fields(self)
                         if f.repr)
        return f"{self.tag}({args})"


def short(v: Any) -> str:
    if isinstance(v, Part):
        return v.short()
    if isinstance(v, tuple):
        return "(" + ", ".join(short(x) for x in v) + ")"
    return repr(v)


def fail(field: str, msg: str):
    raise ConfigError(f"{field}: {msg}")


def check_type(field: str, value: Any, tp: Any) -> None:
    """Raise ConfigError naming `field` unless `value` fits annotation `tp`."""
    if not fits(value, tp):
        if get_origin(tp) is Literal:
            fail(field, f"unknown value {value!r}; choose one of {', '.join(map(repr, get_args(tp)))}")
        fail(field, f"expected {describe(tp)}, got {value!r} ({type(value).__name__})")


def fits(value: Any, tp: Any) -> bool:
    origin = get_origin(tp)
    if tp is Any:
        return True
    if origin is Literal:
        return value in get_args(tp) and isinstance(value, str)
    if origin in (Union, types.UnionType):
        return any(fits(value, a) for a in get_args(tp))
    if origin is tuple:
        args = get_args(tp)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(fits(v, args[0]) for v in value)
        return len(args) == len(value) and all(fits(v, a) for v, a in zip(value, args))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:  # ints are accepted for floats; canonical JSON writes them as floats
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value))
    return isinstance(value, tp)


def describe(tp: Any) -> str:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a) for a in get_args(tp))
    if origin is tuple:
        return f"a tuple of {describe(get_args(tp)[0])}"
    if tp is type(None):
        return "None"
    if isinstance(tp, type) and issubclass(tp, Part):
        names = sorted(t for t, c in PARTS.items() if issubclass(c, tp))
        return f"a {tp.__name__} part ({', '.join(names)})" if names else tp.__name__
    return getattr(tp, "__name__", str(tp))


def positive(field: str, v: float) -> None:
    if not v > 0:
        fail(field, f"must be > 0, got {v!r}")


def nonnegative(field: str, v: float) -> None:
    if not v >= 0:
        fail(field, f"must be >= 0, got {v!r}")


def unit(field: str, v: float, *, open_low: bool = False) -> None:
    if not (0 < v <= 1 if open_low else 0 <= v <= 1):
        fail(field, f"must be in {'(0' if open_low else '[0'}, 1], got {v!r}")
