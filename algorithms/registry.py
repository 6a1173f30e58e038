"""The registry of named recipes: `names()`, `get(name)`, and the `recipe` decorator that fills it."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable

from .recipe import Recipe

RECIPES: dict[str, Recipe] = {}


class UnknownRecipeError(LookupError):
    """`get` was asked for a name that is not registered."""


def recipe(name: str) -> Callable[[Callable[[], Recipe]], Callable[[], Recipe]]:
    """Register the recipe a builder returns under `name`, with the builder's docstring as its
    description. Registering a name twice raises."""

    def wrap(build: Callable[[], Recipe]) -> Callable[[], Recipe]:
        if name in RECIPES:
            raise ValueError(f"recipe {name!r} is already registered")
        doc = inspect.cleandoc(build.__doc__ or "")
        RECIPES[name] = dataclasses.replace(build(), name=name, description=doc)
        return build

    return wrap


def names() -> list[str]:
    """Registered recipe names, sorted."""
    return sorted(RECIPES)


def get(name: str) -> Recipe:
    """The named recipe. An unknown name raises UnknownRecipeError listing the names and
    suggesting the closest one."""
    if name in RECIPES:
        return RECIPES[name]
    close = difflib.get_close_matches(name, RECIPES, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownRecipeError(f"unknown recipe {name!r}.{hint} Known recipes: {', '.join(names())}")
