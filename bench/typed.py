"""The base of every config section: a frozen pydantic model, validated once, with one-line errors.

Types and ranges are declared on the fields (`lr: float = Field(2e-4, gt=0)`); pydantic checks
them, strictly (an int is a float, but 2.5 is not an int, "1e-4" is not a number, inf and NaN are
not numbers), and `ConfigError` turns its report into one line that names the field, the value
and what the field allows:

    train.group_size: got 1; expected an integer >= 2

This is the only place where the config's type and range errors are worded (issue 15).
"""
from __future__ import annotations

import difflib
import types
import typing
from typing import Any, ClassVar, Literal, Union

import annotated_types as at
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from algorithms.errors import ConfigError  # defined there (the lowest layer); `from bench.typed import ConfigError` stays


class Section(BaseModel):
    """A frozen, strict, closed config table. Subclasses declare fields with ranges.

    WHERE names the section in errors when it is built on its own (`TrainConfig(lr=0)` ->
    "train.lr: ..."); inside a RunConfig the path comes from the tree. LATER lists fields added
    after results existed: the canonical form leaves them out at their default, so run ids of
    earlier results stay (the `tis_cap` precedent).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False,
                              arbitrary_types_allowed=True, validate_default=False)
    WHERE: ClassVar[str] = ""
    LATER: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise ConfigError(format_error(e, type(self), self.WHERE), (e, type(self))) from None

    @classmethod
    def build(cls, data: Any, where: str | None = None):
        """Validate a plain tree (a TOML table, a run.json section); errors are one line under `where`."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise ConfigError(format_error(e, cls, cls.WHERE if where is None else where), (e, cls)) from None

    def replace(self, **changes: Any):
        """A copy with `changes`, validated like the original (never an unchecked copy)."""
        return type(self).build({**dict(self), **changes})

    def canonical(self) -> dict:
        """Plain JSON values for hashing: floats as floats, LATER fields left out at their default."""
        d = self.model_dump(mode="python")
        for name in self.LATER:
            if d[name] == type(self).model_fields[name].default:
                del d[name]
        return d


# -- one-line errors ----------------------------------------------------------------------------
def format_error(e: ValidationError, model: type[BaseModel], where: str = "") -> str:
    """The distinct fields at fault, each as `path: got VALUE; expected SPEC`, joined by '; '."""
    seen: dict[str, str] = {}
    for err in e.errors(include_url=False):
        path, field, keys = _walk(model, err["loc"], err["type"] == "extra_forbidden")
        path = ".".join(p for p in (where, path) if p)
        if path in seen:
            continue
        inner = err.get("ctx", {}).get("error")
        if err["type"] == "value_error" and getattr(inner, "source", None):  # a nested section's own report
            seen[path] = format_error(*inner.source, path)
            continue
        msg = _problem(err, field, keys, path)
        # a validator's sentence that names a deeper path itself (recipe.objective.eps_high: ...) stands alone
        seen[path] = msg if err["type"] == "value_error" and path and msg.startswith(path + ".") else \
            f"{path}: {msg}" if path else msg
    return "; ".join(seen.values())


def _walk(model: Any, loc: tuple, extra: bool) -> tuple[str, Any, list[str]]:
    """Follow `loc` through nested models, tables and lists; skip pydantic's union-member tags.

    Returns the dotted path, the FieldInfo describing the value at the end (None for an unknown
    key) and, for an unknown key, the names valid at that level."""
    parts: list[str] = []
    field = None
    cur: Any = model  # a model class, ("table", value type) or None
    for i, item in enumerate(loc):
        if extra and i == len(loc) - 1:
            keys = list(cur.model_fields) if _is_model(cur) else []
            parts.append(str(item))
            return ".".join(parts), None, keys
        if _is_model(cur) and item in cur.model_fields:
            parts.append(str(item))
            field = cur.model_fields[item]
            cur = _inner(field.annotation)
        elif isinstance(cur, tuple):  # a key of a table of sections
            parts.append(str(item))
            field = None
            cur = cur[1]
        elif isinstance(item, int):  # a list item: describe the item type
            parts.append(str(item))
            item_tp = _list_item(field.annotation) if field is not None else None
            field = FieldInfo.from_annotation(item_tp) if item_tp is not None else None
    return ".".join(parts), field, []


def _list_item(tp: Any) -> Any:
    if typing.get_origin(tp) is list:
        return typing.get_args(tp)[0]
    for a in typing.get_args(tp) if typing.get_origin(tp) in (Union, types.UnionType) else ():
        if _list_item(a) is not None:
            return _list_item(a)
    return None


def _is_model(x: Any) -> bool:
    return isinstance(x, type) and issubclass(x, BaseModel)


def _inner(tp: Any) -> Any:
    """The model (or ("table", model)) a field's annotation leads into, else None."""
    if _is_model(tp):
        return tp
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        for a in args:
            if _inner(a) is not None:
                return _inner(a)
    if origin is dict and len(args) == 2 and _is_model(args[1]):
        return ("table", args[1])
    if origin is typing.Annotated:
        return _inner(args[0])
    return None


def _problem(err: dict, field: Any, keys: list[str], path: str) -> str:
    kind, value = err["type"], err.get("input")
    if kind == "extra_forbidden":
        name = path.rsplit(".", 1)[-1]
        msg = f"unknown field {name!r}; valid: {', '.join(keys)}" if keys else f"unknown field {name!r}"
        close = difflib.get_close_matches(name, keys, n=1)
        return msg + (f" (did you mean {close[0]!r}?)" if close else "")
    if kind == "missing":
        return "missing required key"
    if kind == "value_error":  # a validator's own sentence (it names the value and the rule)
        msg = str(err["ctx"]["error"])
        return msg[len(path) + 2:] if path and msg.startswith(path + ": ") else msg
    spec = describe(field) if field is not None else None
    msg = f"got {value!r}; expected {spec}" if spec else f"got {value!r}; {err['msg'][0].lower()}{err['msg'][1:]}"
    return msg + (f" ({field.description})" if field is not None and field.description else "")


def describe(field: Any) -> str:
    """'a finite number > 0', 'an integer in [0, 9223372036854775807]', "one of 'fp32', 'bf16'"."""
    base = _type_words(field.annotation)
    lo = hi = None
    nonempty = ""
    for m in field.metadata:
        if isinstance(m, at.MinLen) and m.min_length >= 1:
            nonempty = "non-empty "
        if isinstance(m, at.Gt):
            lo = ("(", m.gt)
        elif isinstance(m, at.Ge):
            lo = ("[", m.ge)
        elif isinstance(m, at.Lt):
            hi = (")", m.lt)
        elif isinstance(m, at.Le):
            hi = ("]", m.le)
    if lo and hi:
        rng = f" in {lo[0]}{_num(lo[1])}, {_num(hi[1])}{hi[0]}"
    elif lo:
        rng = f" {'>' if lo[0] == '(' else '>='} {_num(lo[1])}"
    elif hi:
        rng = f" {'<' if hi[0] == ')' else '<='} {_num(hi[1])}"
    else:
        rng = ""
    optional, base = base
    if nonempty and base.startswith("a "):
        base = "a " + nonempty + base[2:]
    return f"{base}{rng}" + (" or null" if optional else "")


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _type_words(tp: Any) -> tuple[bool, str]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        optional = len(rest) < len(args)
        words = " or ".join(_type_words(a)[1] for a in rest)
        return optional, words
    if origin is Literal:
        return False, "one of " + ", ".join(repr(a) for a in args)
    if tp is float:
        return False, "a finite number"
    if tp is int:
        return False, "an integer"
    if tp is bool:
        return False, "true or false"
    if tp is str:
        return False, "a string"
    if _is_model(tp):
        return False, f"a table of {', '.join(tp.model_fields)}"
    if origin is dict:
        return False, "a table"
    if origin is list:
        item = describe(FieldInfo.from_annotation(args[0])) if args else "values"
        return False, f"a list, each {item}"
    return False, getattr(tp, "__name__", str(tp))


# -- overrides as deep merges -------------------------------------------------------------------
def merge(base: dict, patch: dict) -> dict:
    """`patch` merged into a copy of `base`: tables merge key by key, anything else replaces.

    A table that names a different part `type` than the one it lands on replaces it whole (a new
    part does not inherit the old part's fields)."""
    out = dict(base)
    for k, v in patch.items():
        old = out.get(k)
        if isinstance(v, dict) and isinstance(old, dict) and v.get("type", old.get("type")) == old.get("type"):
            out[k] = merge(old, v)
        else:
            out[k] = v
    return out


def unflatten(flat: dict[str, Any], where: str = "override") -> dict:
    """{"train.lr": 1e-4, "recipe": {"objective.eps_high": 0.3}} -> nested tables."""
    out: dict = {}
    for key, value in flat.items():
        if isinstance(value, dict):
            value = unflatten(value, where)
        keys = str(key).split(".")
        if not all(keys):
            raise ConfigError(f"{where} {key!r}: empty name in a dotted path")
        cur = out
        for k in keys[:-1]:
            nxt = cur.setdefault(k, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"{where} {key!r}: {k!r} is set to a value and used as a table")
            cur = nxt
        if isinstance(cur.get(keys[-1]), dict) and isinstance(value, dict):
            cur[keys[-1]] = merge(cur[keys[-1]], value)
        else:
            cur[keys[-1]] = value
    return out
