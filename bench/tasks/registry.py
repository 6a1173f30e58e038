"""The task registry: a name -> Task class map filled by the `@register` decorator."""

from __future__ import annotations

import difflib
from dataclasses import MISSING, fields
from typing import Any

from bench import errors
from .base import Task

_TASKS: dict[str, type[Task]] = {}


def register(cls: type[Task]) -> type[Task]:
    """Class decorator: make `cls` available as `tasks.get(cls.name)`. Raises on a duplicate."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__qualname__} needs a class attribute `name` to be registered")
    if name in _TASKS:
        raise ValueError(f"task {name!r} is already registered by "
                         f"{_TASKS[name].__module__}.{_TASKS[name].__qualname__}")
    if cls.default_difficulty not in cls.presets:
        raise ValueError(f"task {name!r}: default_difficulty {cls.default_difficulty!r} "
                         f"is not one of its presets {sorted(cls.presets)}")
    if "*" not in cls.warm_start_steps:
        raise ValueError(f"task {name!r}: warm_start_steps needs a '*' entry (any other scale), got {cls.warm_start_steps}")
    for difficulty, params in cls.presets.items():
        _check_params(name, cls, params, f"preset {difficulty!r}: ")
    _TASKS[name] = cls
    return cls


def names() -> list[str]:
    """Registered task names, sorted."""
    return sorted(_TASKS)


def task_class(name: str) -> type[Task]:
    """The registered class for `name`; unknown -> ConfigError listing names and the closest."""
    try:
        return _TASKS[name]
    except (KeyError, TypeError):
        raise errors.ConfigError(_unknown("task", name, names())) from None


def difficulties(name: str) -> dict[str, dict[str, Any]]:
    """A task's difficulty presets: {difficulty: {param: value}}."""
    return {d: dict(p) for d, p in task_class(name).presets.items()}


def warm_start_steps(name: str, scale: str) -> int:
    """SFT steps of the task's default warm start at `scale` (Task.warm_start_steps); an unknown task
    name gets the base class's, and is refused where the run's config is checked."""
    table = _TASKS[name].warm_start_steps if name in _TASKS else Task.warm_start_steps
    return table.get(scale, table["*"])


def get(name: str, difficulty: str | None = None, **params: Any) -> Task:
    """A task instance. Its config is the difficulty preset (the task's default when None)
    overridden by `params`; unknown names, difficulties and params raise ConfigError."""
    cls = task_class(name)
    difficulty = cls.default_difficulty if difficulty is None else difficulty
    if difficulty not in cls.presets:
        raise errors.ConfigError(_unknown(f"difficulty for task {name!r}", difficulty, list(cls.presets)))
    _check_params(name, cls, params, "")
    merged = {**cls.presets[difficulty], **params}
    missing = [f.name for f in fields(cls.Config) if f.init and f.name not in merged
               and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        how = (f" (a local data file: --data FILE on the command line, path = \"FILE\" under [task_params.{name}] "
               "in a suite)") if "path" in missing else (
            f" (--param KEY=VALUE on the command line, under [task_params.{name}] in a suite)")
        raise errors.ConfigError(f"task {name!r} needs the parameter(s) {', '.join(missing)}{how}")
    return cls(cls.Config(**merged))


def _check_params(name: str, cls: type[Task], params: dict[str, Any], where: str) -> None:
    valid = [f.name for f in fields(cls.Config) if f.init]
    for key in params:
        if key not in valid:
            raise errors.ConfigError(where + _unknown(f"parameter for task {name!r}", key, valid))


def _unknown(what: str, value: object, choices: list[str]) -> str:
    msg = f"unknown {what}: {value!r}; choose one of: {', '.join(choices)}"
    close = difflib.get_close_matches(str(value), choices, n=1)
    return msg + (f" (did you mean {close[0]!r}?)" if close else "")
