"""algorithms/errors.py's classes (InputError, ConfigError, MissingInput) for modules that stay light.

    from bench import errors
    raise errors.ConfigError(f"max_value: got {v}; expected an int > min_value ({lo})")

The same classes, imported on first use: importing `algorithms` imports torch (~2 s), which
`bench list tasks` and `bench list calibrations` never need. Modules that import torch anyway import
`algorithms.errors` directly.
"""
from __future__ import annotations


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    from algorithms import errors

    return getattr(errors, name)
