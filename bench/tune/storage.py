"""Optuna storage from one string, opened (and so checked) before any run starts.

    results/tune/math-small.journal     a journal file (the default; nothing to start, safe for
                                        many processes on one machine or a shared filesystem)
    sqlite:///results/tune/x.db         SQLite (one machine)
    postgresql://user:pw@host/db        any SQLAlchemy URL Optuna accepts: many workers, many machines

All are standard Optuna storages: `optuna-dashboard results/tune/math-small.journal` or
`optuna-dashboard sqlite:///results/tune/x.db` shows the studies as they run.
"""
from __future__ import annotations

import re
from pathlib import Path

JOURNAL_SUFFIXES = (".journal", ".log", ".jsonl")
_URL_RE = re.compile(r"^([a-z][a-z0-9+]*)://")


def default_url(root: Path, suite: str) -> str:
    return str(Path(root) / "tune" / f"{suite}.journal")


def redact(url: str) -> str:
    """Hide a password in a database URL before printing it."""
    return re.sub(r"^([a-z][a-z0-9+]*://[^:/@]+):[^@]*@", r"\1:***@", url)


def open_storage(url: str):
    """An Optuna storage for `url`, connected now: ValueError (one line) if malformed or unreachable."""
    import optuna

    m = _URL_RE.match(url)
    if m is None:
        if not url.endswith(JOURNAL_SUFFIXES):
            raise ValueError(f"storage {url!r}: expected a database URL (sqlite:///path.db, postgresql://user@host/db, "
                             f"mysql://...) or a journal file path ending in {', '.join(JOURNAL_SUFFIXES)}")
        path = Path(url)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            backend = optuna.storages.journal.JournalFileBackend(str(path))
        except OSError as e:
            raise ValueError(f"storage {url!r}: cannot open the journal file: {e}") from None
        return optuna.storages.JournalStorage(backend)
    dialect = m.group(1).split("+")[0]
    if dialect == "sqlite":
        db = url.split(":///", 1)[1] if ":///" in url else ""
        if db and db != ":memory:":
            Path(db).parent.mkdir(parents=True, exist_ok=True)
    try:
        import sqlalchemy.dialects

        sqlalchemy.dialects.registry.load(dialect)
    except ImportError:
        raise ValueError(f"storage {redact(url)!r}: database URLs need SQLAlchemy (pip install sqlalchemy)") from None
    except Exception:  # noqa: BLE001  (sqlalchemy.exc.NoSuchModuleError)
        raise ValueError(f"storage {redact(url)!r}: unknown database dialect {dialect!r}; e.g. sqlite, postgresql, "
                         "mysql (or give a journal file path ending in .journal)") from None
    try:
        return optuna.storages.RDBStorage(url)
    except ImportError:  # optuna re-raises the driver's ModuleNotFoundError as a generic ImportError
        hint = {"postgresql": "psycopg2-binary", "mysql": "pymysql"}.get(dialect, "its DB-API driver")
        raise ValueError(f"storage {redact(url)!r}: the {dialect} driver is not installed (pip install {hint})") from None
    except Exception as e:  # noqa: BLE001  (sqlalchemy OperationalError, ArgumentError, ...)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"storage {redact(url)!r}: cannot connect: {first}") from None
