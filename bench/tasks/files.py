"""Reading a data task's rows into a `datasets.Dataset`: local files, a `save_to_disk`
directory, or a hub name when the machine is online.

    table = files.load("train.jsonl", columns=["question", "answer"])   # or .json .parquet .csv, a dir
    table.rows                                    # datasets.Dataset of those columns, all strings
    table.where(i)                                # "train.jsonl:12" (JSON lines), "data.csv row 12"
    table.sha256                                  # of the bytes read (a hub dataset: its fingerprint)

Text files (JSON lines, JSON, CSV) are checked line by line before parsing, so a byte that is
not UTF-8 or a line over MAX_LINE_BYTES is an error naming the file and the line, not a decoder
traceback or an hour spent on a runaway line. JSON lines are parsed here (each error names its
line) and handed to `datasets.Dataset.from_list`; Parquet, CSV, directories and hub names go
through `datasets`' own readers. Nothing is written to the `datasets` cache. Every row of the
asked-for columns must be a non-empty string (CSV columns are read as strings); the error names
the row.
"""
from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import errors

MAX_LINE_BYTES = 1 << 20  # one record; GSM8K's longest line is ~1.5 kB, MATH's ~8 kB
MAX_FILE_BYTES = 4 << 30
FORMATS = (".jsonl", ".json", ".parquet", ".csv")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@dataclass(frozen=True)
class Table:
    rows: object  # datasets.Dataset
    where: Callable[[int], str]
    sha256: str
    source: str


def load(path: str, split: str | None = None, columns: list[str] | None = None) -> Table:
    """Rows of `path` (only `columns`, each checked to be a non-empty string in every row);
    `split` picks a split of a DatasetDict directory or a hub dataset (default "train"); it is an
    error for a single file."""
    p = Path(path).expanduser()
    if p.is_dir():
        table = _load_dir(p, split)
    elif p.is_file():
        if split is not None:
            raise errors.InputError(f"{path}: a split ({split!r}) applies to a save_to_disk directory or a hub "
                                    "dataset, not to a single file; give the test file as test_path instead")
        table = _load_file(p)
    else:
        table = _missing_or_hub(path, p, split)
    return table if columns is None else _checked(table, columns)


def _checked(table: Table, columns: list[str]) -> Table:
    rows = table.rows
    if len(rows) == 0:
        raise errors.InputError(f"{table.source}: no examples (no rows)")
    for col in columns:
        if col not in rows.column_names:
            raise errors.InputError(f"{table.source}: no column {col!r} (columns: {', '.join(rows.column_names)})")
    rows = rows.select_columns(list(dict.fromkeys(columns)))
    for i, row in enumerate(rows):
        for col in columns:
            v = row[col]
            if v is None:
                raise errors.InputError(f"{table.where(i)}: missing key {col!r}")
            if not isinstance(v, str) or not v.strip() or v.startswith(_NOT_TEXT):
                got = v[len(_NOT_TEXT):] if isinstance(v, str) and v.startswith(_NOT_TEXT) else repr(v)
                raise errors.InputError(f"{table.where(i)}: {col!r} must be a non-empty string, got {got}")
    return Table(rows, table.where, table.sha256, table.source)


def _missing_or_hub(path: str, p: Path, split: str | None) -> Table:
    if p.suffix in FORMATS or "/" not in path or path.startswith((".", "/", "~")):
        raise errors.MissingInput(f"dataset file not found: {path} (expected a local {', '.join(FORMATS)} file, "
                                  "a datasets save_to_disk directory, or a hub name like openai/gsm8k)")
    return _load_hub(path, split)


def _load_file(p: Path) -> Table:
    import datasets

    if p.suffix not in FORMATS:
        raise errors.InputError(f"{p}: unknown data file format {p.suffix!r}; valid: {', '.join(FORMATS)} "
                                "or a save_to_disk directory")
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise errors.InputError(f"{p}: {size} bytes, over the {MAX_FILE_BYTES}-byte cap on a data file")
        data = p.read_bytes()
    except OSError as e:  # unreadable (permissions), vanished since load() looked
        raise errors.InputError(f"{p}: cannot read the data file ({e.strerror or e})") from None
    sha = hashlib.sha256(data).hexdigest()
    if p.suffix == ".parquet":
        with tempfile.TemporaryDirectory() as cache:
            rows = _read(lambda: datasets.Dataset.from_parquet(str(p), keep_in_memory=True, cache_dir=cache), p)
        return Table(rows, lambda i: f"{p} row {i + 1}", sha, str(p))
    lines = _text_lines(p, data)
    if p.suffix == ".csv":
        with tempfile.TemporaryDirectory() as cache:  # every column as text: a bare answer 72 is "72"
            rows = _read(lambda: datasets.Dataset.from_csv(str(p), keep_in_memory=True, cache_dir=cache,
                                                           keep_default_na=False), p)
        rows = rows.cast(datasets.Features({c: datasets.Value("string") for c in rows.column_names}))
        return Table(rows, lambda i: f"{p} row {i + 1}", sha, str(p))
    text = data.decode("utf-8")
    if p.suffix == ".json" and text.lstrip().startswith("["):  # one JSON array of objects
        try:
            records = json.loads(text)
        except json.JSONDecodeError as e:
            raise errors.InputError(f"{p}:{e.lineno}: invalid JSON: {e.msg} at column {e.colno}") from None
        for i, r in enumerate(records):
            if not isinstance(r, dict):
                raise errors.InputError(f"{p}: item {i + 1}: expected a JSON object, got {type(r).__name__}")
        return Table(_from_list(records), lambda i: f"{p} item {i + 1}", sha, str(p))
    records, linenos = [], []
    for lineno, line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise errors.InputError(f"{p}:{lineno}: invalid JSON: {e.msg} at column {e.colno}") from None
        if not isinstance(record, dict):
            raise errors.InputError(f"{p}:{lineno}: expected a JSON object, got {type(record).__name__}")
        records.append(record)
        linenos.append(lineno)
    return Table(_from_list(records), lambda i: f"{p}:{linenos[i]}", sha, str(p))


def _text_lines(p: Path, data: bytes) -> list[tuple[int, str]]:
    """(line number, text) per line; a line over the cap or not UTF-8 is an error at that line."""
    out = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if len(raw) > MAX_LINE_BYTES:
            raise errors.InputError(f"{p}:{lineno}: line of {len(raw)} bytes, over the {MAX_LINE_BYTES}-byte cap "
                                    "on one record (is this a data file?)")
        try:
            out.append((lineno, raw.decode("utf-8")))
        except UnicodeDecodeError as e:
            raise errors.InputError(f"{p}:{lineno}: not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                                    "re-encode the file as UTF-8") from None
    return out


def _from_list(records: list[dict]):
    import datasets

    # Arrow needs one type per column; a value of another type (an int answer among strings) is
    # kept as marked JSON text so that `_checked` names its row, instead of pyarrow failing
    # the whole file. Strings and missing keys pass through unchanged.
    keys = list(dict.fromkeys(k for r in records for k in r))
    return datasets.Dataset.from_list([{k: _typed(r.get(k)) for k in keys} for r in records])


def _typed(v):
    return v if v is None or isinstance(v, str) else _NOT_TEXT + json.dumps(v)


_NOT_TEXT = "\x00json:"  # cannot start a real value: JSON text never holds a raw NUL


def _read(fn, p: Path):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - datasets/pyarrow errors vary by format and version
        raise errors.InputError(f"{p}: datasets could not read it: {type(e).__name__}: {str(e).splitlines()[0][:300]}") from None


def _load_dir(p: Path, split: str | None) -> Table:
    import datasets

    if not ((p / "dataset_dict.json").is_file() or (p / "state.json").is_file()):
        raise errors.InputError(f"{p}: a directory but not a datasets save_to_disk directory (no dataset_dict.json "
                                "or state.json)")
    ds = _read(lambda: datasets.load_from_disk(str(p), keep_in_memory=True), p)
    if isinstance(ds, datasets.DatasetDict):
        split = split or "train"
        if split not in ds:
            raise errors.InputError(f"{p}: no split {split!r}; splits: {', '.join(ds)}")
        ds = ds[split]
    elif split is not None:
        raise errors.InputError(f"{p}: a single Dataset (no splits), but split {split!r} was given")
    sha = hashlib.sha256()
    for f in sorted(q for q in p.rglob("*") if q.is_file()):
        sha.update(f.relative_to(p).as_posix().encode() + b"\x00" + f.read_bytes())
    return Table(ds, lambda i: f"{p}{'' if split is None else '[' + split + ']'} row {i + 1}", sha.hexdigest(), str(p))


def _load_hub(name: str, split: str | None) -> Table:
    import datasets

    if not _HUB_NAME.match(name):
        raise errors.InputError(f"dataset {name!r}: not a local file or directory, nor a hub name like openai/gsm8k")
    try:
        ds = datasets.load_dataset(name, split=split or "train")
    except Exception as e:  # noqa: BLE001 - offline, unknown repo, unknown split: one line
        raise errors.InputError(f"dataset {name!r} is not a local path and the hub could not load it "
                                f"({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None
    return Table(ds, lambda i: f"{name}[{split or 'train'}] row {i + 1}", ds._fingerprint, name)
