"""The registry of named recipes: `names()`, `get(name)`, `search_space(name)`, and the `recipe`
decorator that fills it (algorithms/recipes/: every module there registers its own)."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable

from .errors import ConfigError, InputError
from .recipe import Recipe

RECIPES: dict[str, Recipe] = {}
SPACES: dict[str, dict[str, dict]] = {}  # name -> the recipe's own search ranges (see search_spaces.py)
FAMILIES: dict[str, str] = {}  # name -> the module that registered it (algorithms/recipes/<family>.py)


class UnknownRecipeError(ConfigError, LookupError):
    """`get` was asked for a name that is not registered (a config error; still a LookupError)."""


def recipe(name: str, *, space: dict[str, dict]) -> Callable[[Callable[[], Recipe]], Callable[[], Recipe]]:
    """Register the recipe a builder returns under `name`, with the builder's docstring as its
    description and `space` as the knobs `bench tune` searches for it beside search_spaces.BASE
    ({} when it has none of its own: lr, group size and mini-batches only). Registering a name twice
    raises."""
    if not isinstance(space, dict):
        raise TypeError(f"recipe {name!r}: space must be a dict of path -> range, got {space!r}")

    def wrap(build: Callable[[], Recipe]) -> Callable[[], Recipe]:
        if name in RECIPES:
            raise ValueError(f"recipe {name!r} is already registered")
        doc = inspect.cleandoc(build.__doc__ or "")
        RECIPES[name] = dataclasses.replace(build(), name=name, description=doc)
        SPACES[name] = dict(space)
        FAMILIES[name] = build.__module__.rsplit(".", 1)[-1]
        return build

    return wrap


def search_space(name: str) -> dict[str, dict]:
    """The default search ranges of a named recipe: search_spaces.BASE, then its own (which win)."""
    from .search_spaces import BASE

    get(name)  # an unknown name: the usual error
    return {**BASE, **SPACES[name]}


def names(family: str | None = None) -> list[str]:
    """Registered recipe names, sorted; with `family`, those its module registers ("family_2025":
    the twelve of early 2025, "family_2026": the family of issue 25)."""
    if family is not None and family not in FAMILIES.values():
        raise InputError(f"unknown recipe family {family!r}; valid: {', '.join(sorted(set(FAMILIES.values())))}")
    return sorted(n for n in RECIPES if family is None or FAMILIES[n] == family)


def get(name: str) -> Recipe:
    """The named recipe. An unknown name raises UnknownRecipeError listing the names and
    suggesting the closest one."""
    if name in RECIPES:
        return RECIPES[name]
    close = difflib.get_close_matches(name, RECIPES, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownRecipeError(f"unknown recipe {name!r}.{hint} Known recipes: {', '.join(names())}")
