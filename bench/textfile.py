"""Reading user-written text files (suites, tuned overrides, JSONL data) with errors that name the
file and line: not UTF-8, too large, a line too long. The size caps keep a stray 10 MB line or a
binary file from hanging a parser with no output; they are far above any real suite or example.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from bench import errors

MAX_FILE_BYTES = 4 << 20  # a suite or tuned file: ~100 kB at most in practice
MAX_LINE_CHARS = 20_000  # a TOML line; a JSONL example (one worked solution) is ~1 kB


def _not_utf8(path: Path, data: bytes, pos: int, first_line: int = 1) -> Exception:
    line = first_line + data.count(b"\n", 0, pos)
    col = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
    return errors.InputError(f"{path}:{line}:{col}: not UTF-8 text (byte 0x{data[pos]:02x}); save the file as UTF-8")


def read_text(path: Path | str, max_bytes: int = MAX_FILE_BYTES, max_line: int = MAX_LINE_CHARS) -> str:
    """The file's text; InputError naming file:line for a non-UTF-8 byte, a size over max_bytes
    (checked before reading) or a line over max_line characters, or naming the file when it cannot be
    read (missing: MissingInput). A UTF-8 BOM is dropped."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise errors.InputError(f"{path}: {size:,} bytes, over the {max_bytes:,}-byte limit for this file")
        data = path.read_bytes()
    except FileNotFoundError:
        raise errors.MissingInput(f"{path}: no such file") from None
    except OSError as e:  # unreadable, a directory
        raise errors.InputError(f"{path}: cannot read it ({e.strerror or e})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _not_utf8(path, data, e.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)) from None
    for i, line in enumerate(text.splitlines(), 1):
        if len(line) > max_line:
            raise errors.InputError(f"{path}:{i}: a line of {len(line):,} characters, over the {max_line:,}-character limit")
    return text


def iter_lines(path: Path | str, max_line_bytes: int = 1 << 20) -> Iterator[tuple[int, str]]:
    """(line number, text) for each line of a large file (JSONL), streamed: memory stays bounded by
    max_line_bytes, and a longer line is an InputError naming file:line before it is read whole."""
    path = Path(path)
    with open(path, "rb") as f:
        n = 0
        while True:
            raw = f.readline(max_line_bytes + 1)
            if not raw:
                return
            n += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n") or len(raw) > max_line_bytes + 1:
                raise errors.InputError(f"{path}:{n}: a line over {max_line_bytes:,} bytes; one JSON record per line, "
                                        "each under the limit")
            try:
                yield n, raw.decode("utf-8-sig" if n == 1 else "utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise _not_utf8(path, raw, e.start, n) from None
