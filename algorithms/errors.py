"""The errors a user can fix, and only those.

    InputError    bad input a user can fix: a config value, a suite file, a CLI flag, task data, a path,
                  an unpublishable run. `bench` prints it as one line (exit 2), no traceback.
    ConfigError   an InputError in a config field, worded `field: value: why` (or pydantic's
                  `field: got VALUE; expected SPEC`, see bench/typed.py).
    MissingInput  an InputError for a file or directory the user named that does not exist; still a
                  FileNotFoundError, for callers that fall back on a missing file.

Anything else (a shape mismatch, a contract between our own modules, a bug in torch or polars) is
not one of these and keeps its traceback. Raise `ConfigError`/`InputError` where the input is
checked; never catch a broad ValueError to re-raise it as one (that would hide a bug).

This module is the lowest layer: `algorithms` and `bench` both import it, it imports nothing of theirs.
"""
from __future__ import annotations

from typing import Any


class InputError(ValueError):
    """Bad input a user can fix; the CLI prints it as one line and exits 2."""


class ConfigError(InputError):
    """A bad config value: one line naming the field, the value and why (or the allowed range).

    `source` is pydantic's report and the model it validated, (ValidationError, model class), when the
    error comes from a config section (bench/typed.py): a section validated inside another is then
    re-worded with its full path."""

    def __init__(self, msg: str, source: tuple[Any, type] | None = None):
        super().__init__(msg)
        self.source = source


class MissingInput(InputError, FileNotFoundError):
    """A file or directory the user named does not exist (also a FileNotFoundError)."""
