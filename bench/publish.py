"""Publishing a report, and checking that a published one reproduces.

    bench publish SUITE               copy the suite's runs from results/ into reports/SUITE/data/runs/
                                      (refused unless every run is from a clean commit and records its
                                      warm start's weights), then write reports/SUITE/ from them
    bench reproduce REPORT_DIR -n 3   train the warm starts from scratch in a private cache, rerun 3 of
                                      the report's runs spread over its cells and recipes, and compare
                                      their tables with the committed ones, column by column

A published run is trusted only as far as it reruns: the same config, code and libraries must give
the same steps and evaluations, bit for bit, timing columns aside (columns newer code adds are named,
not compared). `reproduce` checks exactly that,
from nothing a previous session left behind (no cache, no results directory).
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from algorithms.errors import InputError, MissingInput
from bench import results

TABLES = ("steps", "evals")
TIMING_PREFIX = "time/"  # wall-clock columns: never equal across machines or runs
META_FIELDS = ("status", "steps_done", "flops_spent", "gen_tokens", "train_tokens")


# ------------------------------------------------------------------------------------- publish
def publish(suite, root: Path, reports: Path | None = None, out=None) -> Path:
    """Copy the finished runs of `suite`'s expansion from `root` into REPORTS/NAME/data/runs (a run
    another published report already holds, byte for byte, becomes a relative link to it), then
    write the report from that directory. Refused, before anything is written, when a run is
    missing, came from a modified tree or an unknown commit, or does not record its warm start."""
    from bench import report
    from bench.report.manifest import publish_problems

    out = out or sys.stdout
    reports = Path(reports) if reports is not None else report.default_dir(suite.name).parent
    target = reports / suite.name
    data = target / "data" / "runs"
    cfgs = {c.run_id: c for c in suite.expand()}
    sources = {rid: _source(rid, root, data) for rid in cfgs}
    missing = [rid for rid, src in sources.items() if src is None]
    if missing:
        raise InputError(f"{len(missing)} of the {len(cfgs)} runs of suite {suite.name} have no finished record in "
                         f"{root} (e.g. {', '.join(missing[:3])}); `bench suite {suite.name}` runs them")
    cells = {rid: c.tags["cell"] for rid, c in cfgs.items()}
    if suite.tuned_from is not None:  # the chain that chose the settings, and what they are compared with
        extra = tuning_runs(suite, root, data)
        sources |= extra
        cells |= {rid: json.loads((src / "run.json").read_text())["config"]["tags"]["cell"] for rid, src in extra.items()}
    metas = {rid: json.loads((src / "run.json").read_text()) for rid, src in sources.items()}
    problems = publish_problems(metas, cells)
    if problems:
        raise InputError(f"not publishable: {'; '.join(problems)}. Publish runs trained from a clean commit "
                         "(commit, then rerun them into an empty results directory)")
    reports.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".publish.", dir=reports))
    stage.chmod(0o755)  # mkdtemp makes it private; a published directory is not
    try:
        (stage / "runs").mkdir()
        linked = 0
        for rid, src in sorted(sources.items()):
            twin = _published_twin(rid, src, reports, suite.name)
            if twin is not None:
                os.symlink(os.path.relpath(twin, data), stage / "runs" / rid)
                linked += 1
            else:
                shutil.copytree(src.resolve(), stage / "runs" / rid)
        old = target / "data"
        target.mkdir(parents=True, exist_ok=True)
        kept = _keep_dependents(old / "runs", reports, suite.name)
        if kept:
            print(f"copied {kept} run(s) that other reports linked in {data} into those reports", file=out)
        if old.exists():
            shutil.rmtree(old)
        os.replace(stage, old)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    more = f" and {len(sources) - len(cfgs)} tuning and default-settings runs" if len(sources) > len(cfgs) else ""
    print(f"published {len(cfgs)} runs{more} into {data} ({linked} linked to another report's copy)", file=out)
    path = report.build(suite, target / "data", target)
    print(f"report: {path / 'index.html'} and {path / 'report.md'}", file=out)
    return path


def tuning_runs(suite, root: Path, published: Path) -> dict[str, Path]:
    """A suite at tuned settings publishes the runs that chose them and those they are compared with:
    every recorded trial of its studies (finished, pruned or diverged: the whole tuning spend), from
    the results directory or the report's own data, and every run of its defaults expansion (all
    required: the report sets the leaderboard at defaults beside the tuned one). run_id -> record."""
    from bench.suite import load
    from bench.tune.costs import trial_runs

    out = {}
    for base in (Path(published).parent, Path(root)):  # the results directory's records win
        if (base / "runs").is_dir():
            t = trial_runs(suite, base)
            out |= {rid: base / "runs" / rid for rid in t.filter(pl.col("status") != "failed")["run_id"]}
    if not out:
        raise InputError(f"suite {suite.name} runs at the tuned settings of {suite.tuned_from}, but no `bench tune` "
                         f"trial of it is recorded in {root}: publish the tuning runs with the report "
                         f"(`bench tune {suite.name} --all --results {root}`), or publish at defaults (--defaults)")
    defaults = load(suite.path, tuned=False).expand()
    missing = []
    for c in defaults:
        src = _source(c.run_id, root, published)
        if src is None:
            missing.append(c.run_id)
        else:
            out[c.run_id] = src
    if missing:
        raise InputError(f"{len(missing)} of the {len(defaults)} runs of suite {suite.name} at default settings have "
                         f"no finished record in {root} (e.g. {', '.join(missing[:3])}); the report compares the tuned "
                         f"leaderboard with them: `bench suite {suite.name} --defaults` runs them")
    return out


def _source(rid: str, root: Path, published: Path) -> Path | None:
    """Where run `rid`'s finished record is: the results directory, else the report's own data."""
    for base in (Path(root) / "runs", published):
        if (base / rid / "run.json").is_file() and results.is_finished(base.parent, rid):
            return base / rid
    return None


def _keep_dependents(runs: Path, reports: Path, name: str) -> int:
    """Before `runs` (report NAME's data) is replaced: every other report's link into it becomes a
    real copy of the record it points at, so republishing one report never breaks another's data
    (a report published later may link runs of one published earlier). Returns how many."""
    if not runs.is_dir():
        return 0
    mine = runs.resolve()
    copied = 0
    for link in sorted(reports.glob("*/data/runs/*")):
        if link.parts[-4] == name or not link.is_symlink():
            continue
        real = link.resolve()
        if real.parent != mine or not real.is_dir():
            continue
        tmp = link.with_name(f".{link.name}.copy")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(real, tmp)
        link.unlink()
        os.replace(tmp, link)
        copied += 1
    return copied


def _published_twin(rid: str, src: Path, reports: Path, name: str) -> Path | None:
    """Another report's real (not linked) copy of the same record, byte for byte."""
    for other in sorted(reports.glob(f"*/data/runs/{rid}")):
        if other.parts[-4] == name or other.is_symlink():
            continue
        if all((other / f).is_file() and (other / f).read_bytes() == (src / f).read_bytes()
               for f in ("run.json", "steps.parquet", "evals.parquet")):
            return other
    return None


# ----------------------------------------------------------------------------------- reproduce
@dataclass
class Outcome:
    run_id: str
    cell: str
    recipe: str
    seed: int
    differences: list[str] = field(default_factory=list)
    error: str = ""
    added: list[str] = field(default_factory=list)  # columns the rerun logs that the committed run predates
    hint: str | None = None  # a likely cause of the differences (isa_hint)

    @property
    def identical(self) -> bool:
        return not self.differences and not self.error


def published_runs(report_dir: Path) -> dict[str, dict]:
    """run_id -> run.json of every finished or diverged run under REPORT_DIR/data/runs."""
    runs = Path(report_dir) / "data" / "runs"
    if not runs.is_dir():
        known = ", ".join(sorted(p.parent.parent.name for p in Path("reports").glob("*/data/runs"))) or "none"
        raise MissingInput(f"{report_dir} has no data/runs/ (a published report keeps its runs there; "
                           f"published reports: {known})")
    metas = {}
    for d in sorted(runs.iterdir()):
        f = d / "run.json"
        if f.is_file():
            m = results.read_meta(d)  # a corrupt record: CorruptRun naming the file
            if m.get("status") in ("finished", "diverged"):  # a divergence must reproduce too
                metas[d.name] = m
    if not metas:
        raise InputError(f"{runs} holds no finished or diverged run")
    return metas


def _labels(meta: dict) -> dict[str, str]:
    """What --only matches a published run by (its cell, recipe, seed, task, scale)."""
    cfg = meta["config"]
    return {"cell": cfg.get("tags", {}).get("cell") or f"{cfg['task']}/{cfg['scale']}", "recipe": meta["recipe_name"],
            "seed": str(cfg["seed"]), "task": cfg["task"], "scale": cfg["scale"]}


def _outcome(rid: str, meta: dict) -> Outcome:
    lab = _labels(meta)
    return Outcome(rid, lab["cell"], lab["recipe"], int(lab["seed"]))


def select(metas: dict[str, dict], n: int, only: dict[str, list[str]] | None = None) -> list[str]:
    """n run ids spread over cells and recipes: cells take turns, each giving its next recipe not
    yet taken (in name order), at its lowest seed. `only`: keep runs whose cell / recipe / task /
    scale / seed is among the given values."""
    only = only or {}
    groups: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for rid, m in metas.items():
        values = _labels(m)
        if any(values[k] not in v for k, v in only.items()):
            continue
        groups.setdefault(values["cell"], {}).setdefault(values["recipe"], []).append((int(values["seed"]), rid))
    queues = {c: [min(runs)[1] for _, runs in sorted(recipes.items())] for c, recipes in sorted(groups.items())}
    picked: list[str] = []
    while len(picked) < n and any(queues.values()):
        for c in list(queues):
            if queues[c] and len(picked) < n:
                picked.append(queues[c].pop(0))
    return picked


def _equal(a: pl.Series, b: pl.Series) -> pl.Series:
    """Elementwise equality where NaN equals NaN and null equals null."""
    both_null = a.is_null() & b.is_null()
    if a.dtype.is_float() and b.dtype.is_float():
        both_nan = a.is_nan().fill_null(False) & b.is_nan().fill_null(False)
        return (a == b).fill_null(False) | both_nan | both_null
    return (a == b).fill_null(False) | both_null


def compare_tables(name: str, old: pl.DataFrame, new: pl.DataFrame) -> list[str]:
    """One line per difference between a committed table and its rerun (timing columns aside). Every
    committed column must be reproduced; a column only the rerun has (a metric newer code logs, e.g.
    eval/format_rate) is not a difference: `added_columns` names them."""
    out = []
    cols_old = [c for c in old.columns if not c.startswith(TIMING_PREFIX)]
    cols_new = [c for c in new.columns if not c.startswith(TIMING_PREFIX)]
    for c in cols_old:
        if c not in cols_new:
            out.append(f"{name}: column {c} is missing from the rerun")
    if old.height != new.height:
        out.append(f"{name}: {old.height} rows committed, {new.height} in the rerun")
    n = min(old.height, new.height)
    for c in (c for c in cols_old if c in cols_new):
        a, b = old[c][:n], new[c][:n]
        if a.dtype != b.dtype and not (a.dtype.is_numeric() and b.dtype.is_numeric()):
            out.append(f"{name}: column {c} is {a.dtype} committed, {b.dtype} in the rerun")
            continue
        same = _equal(a, b)
        if bool(same.all()):
            continue
        first = int(same.arg_min())
        where = f"row {first}" + (f" (step {old['step'][first]})" if "step" in old.columns else "")
        text = f"{name}: column {c} differs in {int((~same).sum())} of {n} rows, first at {where}: {a[first]!r} vs {b[first]!r}"
        if a.dtype.is_numeric() and b.dtype.is_numeric():
            delta = (a.cast(pl.Float64) - b.cast(pl.Float64)).abs().filter(~same).drop_nans().drop_nulls()
            if delta.len():
                text += f"; max |difference| {delta.max():.3g}"
        out.append(text)
    return out


def added_columns(old_dir: Path, new_dir: Path) -> list[str]:
    """The columns of the rerun's tables that the committed run does not have (newer metrics)."""
    out = []
    for t in TABLES:
        old_cols = set(pl.read_parquet_schema(old_dir / f"{t}.parquet"))
        out += [f"{t}.parquet:{c}" for c in pl.read_parquet_schema(new_dir / f"{t}.parquet") if c not in old_cols]
    return out


def compare_runs(old_dir: Path, new_dir: Path) -> list[str]:
    """Differences between a committed run and its rerun: the warm start's weights, the record's
    counts, and every column of steps.parquet and evals.parquet but timing."""
    out = []
    old_m = json.loads((old_dir / "run.json").read_text())
    new_m = json.loads((new_dir / "run.json").read_text())
    old_sha = (old_m.get("warmstart") or {}).get("sha256")
    new_sha = (new_m.get("warmstart") or {}).get("sha256")
    if not old_sha:
        out.append("run.json: the committed run does not record its warm start's weights (SHA-256)")
    elif old_sha != new_sha:
        out.append(f"run.json: warm start weights differ: SHA-256 {old_sha[:12]} committed, {(new_sha or '?')[:12]} "
                   f"rerun (held-out greedy accuracy {(old_m.get('warmstart') or {}).get('accuracy')} vs "
                   f"{(new_m.get('warmstart') or {}).get('accuracy')})")
    for k in META_FIELDS:
        if old_m.get(k) != new_m.get(k):
            out.append(f"run.json: {k} is {old_m.get(k)!r} committed, {new_m.get(k)!r} in the rerun")
    for t in TABLES:
        old_t, new_t = pl.read_parquet(old_dir / f"{t}.parquet"), pl.read_parquet(new_dir / f"{t}.parquet")
        out.extend(compare_tables(f"{t}.parquet", old_t, new_t))
    return out


def reproduce(report_dir: Path, n: int, only: Iterable[str] = (), cache: Path | None = None,
              workers: int = 1, keep: Path | None = None, out=None) -> list[Outcome]:
    """Rerun n of a published report's runs from scratch and compare them with the committed ones.

    only: --only specs (KEY=V1,V2 with KEY cell, recipe, seed, task or scale), checked against the
    report's runs.
    cache: the warm-start cache to train into (default: a new empty directory, deleted after; give
    an empty one, or one that only earlier reproductions from this tree trained into). keep: an
    empty results directory for the reruns (default: a temporary one, deleted after)."""
    from bench.suite import parse_filters

    out = out or sys.stdout
    report_dir = Path(report_dir)
    metas = published_runs(report_dir)
    valid: dict[str, list[str]] = {}
    for m in metas.values():
        for k, v in _labels(m).items():
            valid.setdefault(k, []).append(v)
    filters = parse_filters(list(only), {k: sorted(set(v)) for k, v in valid.items()}, f"in {report_dir}")
    ids = select(metas, n, filters)
    if not ids:
        raise InputError(f"--only {' '.join(only)} selects none of the {len(metas)} finished runs in {report_dir / 'data' / 'runs'}")
    with tempfile.TemporaryDirectory(prefix="bench-reproduce-") as tmp:
        cache_dir = Path(cache) if cache else Path(tmp) / "cache"
        root = Path(keep) if keep else Path(tmp) / "results"
        if keep and any(root.glob("runs/*")):
            raise InputError(f"--keep {root} is not empty: reruns go into an empty results directory")
        cache_dir.mkdir(parents=True, exist_ok=True)
        root.mkdir(parents=True, exist_ok=True)
        print(f"reproduce {report_dir}: {len(ids)} of {len(metas)} runs, warm starts trained from scratch in "
              f"{cache_dir}, reruns in {root}", file=out)
        print_hardware(report_dir, metas, ids, out)
        t0 = time.monotonic()
        outcomes, by_new_id = rerun(ids, metas, root, cache_dir, workers, out)
        for new_id, rid in by_new_id.items():
            o = outcomes[rid]
            new_dir = results.run_dir(root, new_id)
            if o.error or not (new_dir / "run.json").is_file():
                o.error = o.error or "the rerun left no record"
                continue
            o.differences.extend(compare_runs(report_dir / "data" / "runs" / rid, new_dir))
            o.added = added_columns(report_dir / "data" / "runs" / rid, new_dir)
            if o.differences:
                o.hint = isa_hint(report_dir / "data" / "runs" / rid, new_dir)
        print(f"reran {len(ids)} run(s) in {_secs(time.monotonic() - t0)}", file=out)
    for o in outcomes.values():
        head = f"{o.run_id} {o.cell} {o.recipe} seed {o.seed}: "
        if o.identical:
            newer = f"; the rerun also logs {len(o.added)} newer column(s), not compared: {', '.join(o.added)}" if o.added else ""
            print(head + "identical (steps and evaluation tables, timing aside; warm-start weights)" + newer, file=out)
        else:
            print(head + ("FAILED: " + o.error if o.error else f"DIFFERS in {len(o.differences)} place(s)"), file=out)
            for d in o.differences:
                print(f"    {d}", file=out)
            if o.hint:
                print(f"    ({o.hint})", file=out)
    bad = [o for o in outcomes.values() if not o.identical]
    print(f"{len(outcomes) - len(bad)} of {len(outcomes)} reruns identical" +
          ("" if not bad else f"; {len(bad)} differ: the report does not reproduce from this tree"), file=out)
    return list(outcomes.values())


def rerun(ids: list[str], metas: dict[str, dict], root: Path, cache_dir: Path, workers: int,
          out) -> tuple[dict[str, Outcome], dict[str, str]]:
    """Rerun the published runs `ids` into results `root`, warm starts trained into `cache_dir`, each
    as a job of one run (as it ran alone). Returns their outcomes (an error where a rerun did not
    finish) and today's run id -> the published one."""
    from bench.config import RunConfig
    from bench.harness.executors import LocalExecutor
    from bench.harness.plan import set_env

    outcomes = {rid: _outcome(rid, metas[rid]) for rid in ids}
    for o in outcomes.values():
        print(f"  {o.run_id}  {o.cell}  {o.recipe}  seed {o.seed}", file=out)
    jobs, by_new_id = [], {}
    for rid in ids:
        cfg = RunConfig.from_dict(metas[rid]["config"])
        if cfg.run_id != rid:
            outcomes[rid].differences.append(f"config: the recorded config hashes to run id {cfg.run_id} today "
                                             f"(config hashing changed); rerun under that id")
        jobs.append(([cfg.to_dict()], str(root), False, None))
        by_new_id[cfg.run_id] = rid

    def done(res: dict) -> None:
        rid = by_new_id.get(res["run_id"], res["run_id"])
        if res["status"] not in ("finished", "diverged"):
            outcomes[rid].error = f"rerun {res['status']}: {res.get('reason')}"
        print(f"  rerun {rid}: {res['status']} ({_secs(res.get('wall_s'))})", file=out, flush=True)

    with set_env("BENCH_CACHE", str(cache_dir)), LocalExecutor(workers) as ex:  # spawned workers inherit it
        ex.run(jobs, done)
    return outcomes, by_new_id


def print_hardware(report_dir: Path, metas: dict[str, dict], ids: list[str], out) -> None:
    """Where the published runs were made (each distinct machine once) and where the reruns run now."""
    from bench.results import describe_hardware, environment

    seen = list(dict.fromkeys(describe_hardware(metas[rid].get("hardware") or {}) for rid in ids))
    for h in seen:
        print(f"  published on: {h}", file=out)
    print(f"  rerun on:     {describe_hardware(environment()['hardware'])}", file=out)


def hardware_matches(report_dir: Path) -> bool:
    """Whether every published run of REPORT_DIR was made on hardware like this machine's (vendor,
    model, torch kernels, BLAS and its settings all recorded and equal): where the bitwise check
    can hold. Records from before the fields existed never match."""
    from bench.results import environment, same_hardware

    here = environment()["hardware"]
    return all(same_hardware(m.get("hardware") or {}, here) for m in published_runs(report_dir).values())


def isa_hint(old_dir: Path, new_dir: Path) -> str | None:
    """Why a rerun may differ: the CPU kernels' ISA of the published run and of the rerun
    (run.json hardware.cpu_capability, recorded since 2026-12-05), when they differ."""
    old, new = ((json.loads((d / "run.json").read_text()).get("hardware") or {}).get("cpu_capability") for d in (old_dir, new_dir))
    if new is None or old == new:
        return None
    where = f"at {old}" if old else "before runs recorded their ISA"
    return (f"the published run was trained {where}, the rerun at {new}: kernels of another width round otherwise "
            "(bench/numerics.py pins AVX2 on x86-64 unless ATEN_CPU_CAPABILITY is set)")


def _secs(s) -> str:
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "?"
    return f"{s:.0f} s"

