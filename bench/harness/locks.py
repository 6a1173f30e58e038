"""Per-run locks and stale temp directories.

A worker holds an exclusive `fcntl.flock` on results/locks/<run_id>.lock for the whole run, so two
`bench suite` processes on one results directory (or many Ray workers on a shared filesystem)
never run a run twice. The kernel drops the lock when its holder dies, even by SIGKILL, so a
killed run is simply rerun. Lock files are left in place: unlinking a lock file that another
process may have just opened would let two holders exist.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import shutil
from collections.abc import Iterator
from pathlib import Path

from bench import results


def lock_path(root: Path, run_id: str) -> Path:
    return Path(root) / "locks" / f"{run_id}.lock"


@contextlib.contextmanager
def run_lock(root: Path, run_id: str, wait: bool) -> Iterator[bool]:
    """Yields True while this process holds the run's lock; False (at once) if another holds it
    and wait is False. With wait=True, blocks until the holder finishes or dies."""
    path = lock_path(root, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                yield False
                return
            raise
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def is_locked(root: Path, run_id: str) -> bool:
    """Whether some process holds the run's lock right now (a snapshot)."""
    with run_lock(root, run_id, wait=False) as held:
        return not held


def remove_temp(root: Path, run_id: str) -> int:
    """Delete results/.tmp/<run_id>.<pid> left by a killed writer. Call only while holding the
    run's lock: then no live process can be writing them. Returns how many were removed."""
    tmp = Path(root) / ".tmp"
    n = 0
    for d in tmp.glob(f"{run_id}.*"):
        shutil.rmtree(d, ignore_errors=True)
        n += 1
    return n


def clean_stale_temp(root: Path) -> int:
    """Remove temp directories of runs whose lock nobody holds (their writer is dead)."""
    tmp = Path(root) / ".tmp"
    if not tmp.is_dir():
        return 0
    n = 0
    for run_id in sorted({d.name.split(".")[0] for d in tmp.iterdir()}):
        with run_lock(root, run_id, wait=False) as held:
            if held:
                n += remove_temp(root, run_id)
    return n


def clean_stale_live(root: Path) -> int:
    """Remove the live directories (stream and resume checkpoint) of runs that have a whole record
    and whose lock nobody holds: a writer killed between writing its record and removing its
    stream leaves one. A `failed` record keeps its directory: its checkpoint lets `--resume` go on."""
    live = Path(root) / "live"
    if not live.is_dir():
        return 0
    n = 0
    for d in sorted(p for p in live.iterdir() if p.is_dir()):
        with run_lock(root, d.name, wait=False) as held:
            if not held or not results.is_finished(root, d.name):
                continue
            if results.read_meta(results.run_dir(root, d.name)).get("status") == "failed":
                continue
            results.remove_live(root, d.name)
            n += 1
    return n
