"""What reproduces a report: the command, the suite file's hash, the runs and where they ran.

Everything in `manifest` comes from the suite file and the runs' run.json records (versions, git
commits, hardware at training time), plus the versions of the libraries that compute the report,
so report.md stays a pure function of results/. The report's own git commit and the time of
generation go to index.html only (`generator`), where they cannot break byte-identical output.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from importlib import metadata
from pathlib import Path

from bench.report import stats
from bench.suite import Suite

REPORT_PACKAGES = ("numpy", "scipy", "polars", "matplotlib", "seaborn")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def display_path(path: Path) -> str:
    """A path relative to the working directory when it lies below it, else absolute."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def command(suite: Suite, root: Path) -> str:
    """`bench report NAME`, with --results when root is not the default `results` (and a suite path
    when the suite is not one of suites/)."""
    from bench import suite as suites

    name = suite.name if suite.name in suites.names() and Path(suite.path).resolve() == (
        suites.SUITES_DIR / f"{suite.name}.toml").resolve() else display_path(suite.path)
    root_s = display_path(root)
    return f"bench report {name}" + ("" if root_s == "results" else f" --results {root_s}")


def versions(names) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            pass
    return out


def _counted(values: list[str]) -> str:
    c = Counter(values)
    return "; ".join(f"{v} ({n} run{'s' if n != 1 else ''})" for v, n in sorted(c.items()))


def warm_starts(cells: dict[str, str], metas: dict[str, dict]) -> dict[str, Counter]:
    """Per cell (in the order of `cells`, run_id -> cell), how many recorded runs start from each
    warm start's weights (SHA-256; None where run.json does not record it). A cell whose runs are
    configured with several warm starts (a regime's `warmstarts = N`: different warmstart.seed)
    counts each apart, as "CELL (warm start seed S)", so only runs meant to share one are compared."""
    several = set(several_warm_starts(cells, metas))
    order = list(dict.fromkeys(cells.values()))
    groups: dict[tuple, Counter] = {}
    for rid, cell in cells.items():
        if rid in metas:
            seed = _warmstart_seed(metas[rid]) if cell in several else None
            groups.setdefault((cell, seed), Counter())[(metas[rid].get("warmstart") or {}).get("sha256") or None] += 1
    return {(f"{cell} (warm start seed {seed})" if cell in several else cell): n
            for (cell, seed), n in sorted(groups.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1] or 0))}


def several_warm_starts(cells: dict[str, str], metas: dict[str, dict]) -> list[str]:
    """The cells (in order) whose recorded runs are configured with more than one warm start."""
    seeds: dict[str, set] = {}
    for rid, cell in cells.items():
        if rid in metas:
            seeds.setdefault(cell, set()).add(_warmstart_seed(metas[rid]))
    return [cell for cell, s in seeds.items() if len(s) > 1]


def _warmstart_seed(meta: dict):
    return ((meta.get("config") or {}).get("warmstart") or {}).get("seed")


def mixed(counts: Counter) -> bool:
    """Whether a cell's runs start from more than one recorded warm start."""
    return sum(1 for sha in counts if sha) > 1


def warm_start_text(counts: Counter) -> str:
    return "; ".join(f"{(sha[:12] if sha else 'not recorded')} ({n} run{'s' if n != 1 else ''})"
                     for sha, n in sorted(counts.items(), key=lambda kv: (kv[0] is None, kv[0] or "")))


def publish_problems(metas: dict[str, dict], cells: dict[str, str]) -> list[str]:
    """Why these runs may not be published: a run trained from a modified tree, one that does not
    record its warm start's weights, a cell whose runs start from different weights."""
    out = []
    dirty = sorted(rid for rid, m in metas.items() if m.get("git_dirty") or not m.get("git_commit"))
    if dirty:
        out.append(f"{len(dirty)} run(s) were trained from a modified or unknown tree (git_dirty, no commit): "
                   + ", ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else ""))
    unhashed = sorted(rid for rid, m in metas.items() if not (m.get("warmstart") or {}).get("sha256"))
    if unhashed:
        out.append(f"{len(unhashed)} run(s) do not record their warm start's weights (SHA-256): "
                   + ", ".join(unhashed[:5]) + (" ..." if len(unhashed) > 5 else ""))
    for cell, counts in warm_starts(cells, metas).items():
        if mixed(counts):
            out.append(f"cell {cell} mixes {len(counts)} warm starts: {warm_start_text(counts)}")
    return out


def manifest(suite: Suite, root: Path, metas: dict[str, dict], n_expected: int,
             cells: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(key, value) rows, in a fixed order."""
    rows = [("command", command(suite, root)),
            ("suite file", f"{display_path(suite.path)} (sha256 {file_sha256(suite.path)})"),
            ("runs", f"{len(metas)} recorded of {n_expected} expected; ids, status and cells in runs.csv"),
            ("bootstrap", f"seed {stats.SEED}, {stats.N_BOOT} resamples, {int(stats.LEVEL * 100)}% percentile intervals")]
    commits = [f"{m.get('git_commit') or 'unknown'}{' (dirty)' if m.get('git_dirty') else ''}" for m in metas.values()]
    rows.append(("runs' git commits", _counted(commits) or "-"))
    pkgs: dict[str, list[str]] = {}
    for m in metas.values():
        for k, v in (m.get("packages") or {}).items():
            pkgs.setdefault(k, []).append(str(v))
    for k in sorted(pkgs):
        rows.append((f"runs: {k}", _counted(pkgs[k])))
    hw = []
    for m in metas.values():
        h = m.get("hardware") or {}
        parts = [f"{h.get('machine', '?')}", f"{h.get('cpus', '?')} CPUs", f"python {h.get('python', '?')}",
                 f"torch threads {h.get('torch_threads', '?')}"] + ([f"GPU {h['gpu']}"] if h.get("gpu") else [])
        if "cpu_vendor" in h:  # recorded since 2026-12-05 (issue 45); older records render as they did
            parts[:1] = [f"{h.get('cpu_vendor') or 'vendor not recorded'} {h.get('cpu_model') or ''}".strip(),
                         f"{h.get('machine', '?')} ({h.get('isa') or 'ISA not recorded'})",
                         f"torch kernels {h.get('cpu_capability') or '?'}", f"BLAS {h.get('blas') or '?'}",
                         f"MKL_CBWR {(h.get('kernel_env') or {}).get('MKL_CBWR', 'unset')}"]
        hw.append(", ".join(parts))
    rows.append(("runs' hardware", _counted(hw) or "-"))
    devices = [str(m.get("config", {}).get("device", "?")) for m in metas.values()]
    rows.append(("runs' device", _counted(devices) or "-"))
    for cell, counts in warm_starts(cells or {}, metas).items():
        rows.append((f"warm start weights (SHA-256): {cell}", warm_start_text(counts)))
    rows.append(("report libraries", ", ".join(f"{k} {v}" for k, v in versions(REPORT_PACKAGES).items())))
    return rows


def generator() -> list[tuple[str, str]]:
    """The environment that wrote the report (index.html only: it changes with every commit)."""
    import datetime

    from bench import results

    env = results.environment()
    return [("report written", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")),
            ("report code commit", f"{env['git_commit'] or 'unknown'}{' (dirty)' if env['git_dirty'] else ''}"),
            ("report host", results.describe_hardware(env["hardware"]))]
