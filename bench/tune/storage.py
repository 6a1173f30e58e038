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

from algorithms.errors import InputError

JOURNAL_SUFFIXES = (".journal", ".log", ".jsonl")
_URL_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# query parameters that carry credentials (libpq's password/sslpassword, driver tokens)
_SECRET_KEYS = {"password", "passwd", "pwd", "pass", "sslpassword", "secret", "token", "access_token",
                "api_key", "apikey", "auth"}
HIDDEN = "***"


def default_url(root: Path, suite: str) -> str:
    return str(Path(root) / "tune" / f"{suite}.journal")


def _split(url: str) -> tuple[str, str, str | None, str, list[str]] | None:
    """(scheme, user, password or None, host-and-path, query parts) of a URL; None for a file path.

    Parsed by hand rather than with urllib or SQLAlchemy's make_url, because both cut the
    userinfo at the first '@' and a password with an unencoded '@' then leaks its tail into the
    host. Here the userinfo ends at the *last* '@' before the query: over-hiding an '@' in a path
    is harmless, printing part of a password is not."""
    m = _URL_RE.match(url)
    if m is None:
        return None
    head, _, query = url[m.end():].partition("?")
    user, password = "", None
    if "@" in head:
        userinfo, head = head.rsplit("@", 1)
        user, colon, pw = userinfo.partition(":")
        password = pw if colon else None
        user = user if colon else userinfo
    return m.group(1), user, password, head, query.split("&") if query else []


def _secrets(url: str) -> list[str]:
    """The secret substrings of url (the password, credential query values), longest first."""
    parts = _split(url)
    if parts is None:
        return []
    _, _, password, _, query = parts
    found = [password] if password else []
    found += [kv.partition("=")[2] for kv in query if kv.partition("=")[0].lower() in _SECRET_KEYS]
    return sorted({f for f in found if f}, key=len, reverse=True)


def redact(url: str) -> str:
    """url with its password and credential query values replaced by ***, for printing.
    Journal file paths are returned as they are (they hold no credentials)."""
    parts = _split(url)
    if parts is None:  # a path; but "user:pw@host/db" with the scheme forgotten still hides its password
        userinfo, at, rest = url.rpartition("@")
        return f"{userinfo.partition(':')[0]}:{HIDDEN}@{rest}" if at and ":" in userinfo else url
    scheme, user, password, head, query = parts
    auth = f"{user}:{HIDDEN}@" if password is not None else (f"{user}@" if user else "")
    q = [f"{kv.partition('=')[0]}={HIDDEN}" if kv.partition("=")[0].lower() in _SECRET_KEYS else kv for kv in query]
    return f"{scheme}://{auth}{head}" + ("?" + "&".join(q) if q else "")


def scrub(text: str, url: str) -> str:
    """text (a driver's error message) with url's secrets hidden. A secret under 3 characters
    cannot be replaced without mangling the text: then the whole message is withheld."""
    for secret in _secrets(url):
        if len(secret) < 3:
            return "(details withheld: they may contain the password)"
        text = text.replace(secret, HIDDEN)
    return text


def open_storage(url: str):
    """An Optuna storage for `url`, connected now: ValueError (one line) if malformed or unreachable."""
    import optuna

    m = _URL_RE.match(url)
    if m is None:
        if not url.endswith(JOURNAL_SUFFIXES):
            raise InputError(f"storage {redact(url)!r}: expected a database URL (sqlite:///path.db, postgresql://user@host/db, "
                             f"mysql://...) or a journal file path ending in {', '.join(JOURNAL_SUFFIXES)}")
        path = Path(url)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            backend = optuna.storages.journal.JournalFileBackend(str(path))
        except OSError as e:
            raise InputError(f"storage {url!r}: cannot open the journal file: {e}") from None
        return optuna.storages.JournalStorage(backend)
    url = m.group(1).lower() + url[len(m.group(1)):]  # schemes are case-insensitive (RFC 3986); SQLAlchemy's are not
    dialect = m.group(1).lower().split("+")[0]
    if dialect == "sqlite":
        db = url.split(":///", 1)[1] if ":///" in url else ""
        if db and db != ":memory:":
            try:
                Path(db).parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise InputError(f"storage {redact(url)!r}: cannot create the database's directory "
                                 f"{Path(db).parent}: {e.strerror or e}") from None
    try:
        import sqlalchemy.dialects

        sqlalchemy.dialects.registry.load(dialect)
    except ImportError:
        raise InputError(f"storage {redact(url)!r}: database URLs need SQLAlchemy (pip install sqlalchemy)") from None
    except Exception:  # noqa: BLE001  (sqlalchemy.exc.NoSuchModuleError)
        raise InputError(f"storage {redact(url)!r}: unknown database dialect {dialect!r}; e.g. sqlite, postgresql, "
                         "mysql (or give a journal file path ending in .journal)") from None
    try:
        return optuna.storages.RDBStorage(url)
    except ImportError:  # optuna re-raises the driver's ModuleNotFoundError as a generic ImportError
        hint = {"postgresql": "psycopg2-binary", "mysql": "pymysql"}.get(dialect, "its DB-API driver")
        raise InputError(f"storage {redact(url)!r}: the {dialect} driver is not installed (pip install {hint})") from None
    except Exception as e:  # noqa: BLE001  (sqlalchemy OperationalError, ArgumentError, ...)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"storage {redact(url)!r}: cannot connect: {scrub(first, url)}") from None
