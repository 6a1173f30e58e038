"""A bad-input battery, run as a new user would: kill points, concurrency, corrupt files, odd URLs,
planted files (issue 15). Every case runs the `bench` CLI in a subprocess and checks:

    rc     the exit status the case expects (2 for bad input; 0 where the right answer is "skip");
    line   stderr holds at most one non-empty line (progress bars and warm-start logs excepted);
    clean  no Python traceback, no secret printed, nothing lost (fingerprints of prepared files).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bad_inputs.py [--keep DIR] [-k SUBSTRING]

Prints one line per case and a total. Takes a few minutes (each case imports torch); it trains one
tiny warm start (5 SFT steps, cached in DIR/cache), nothing else to completion.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SECRET = "s3cretPW"
TINY = ["--recipe", "grpo", "--task", "addition", "--scale", "nano", "--budget", "1steps", "--quiet", "--threads", "1",
        "--set", "warmstart.steps=5", "--set", "warmstart.batch_size=8", "--set", "warmstart.eval_examples=8",
        "--set", "eval.n_examples=8", "--set", "eval.k=0", "--set", "train.prompts_per_step=2",
        "--set", "train.group_size=2"]
NOISE = re.compile(r"^(Writing model shards|Loading weights|warm start|\s*$|.*it/s\]|.*%\|)")


@dataclass
class Case:
    name: str
    kind: str
    argv: list[str]
    rc: int = 2
    must: str = ""  # a substring the output must contain
    prepare: object = None  # callable(env) before the run
    during: object = None  # callable(env) -> context manager around the run
    check: object = None  # callable(env) -> problem or None, after the run
    notes: list = field(default_factory=list)


def bench(argv: list[str], env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.cli", *argv], cwd=env["cwd"], capture_output=True, text=True,
                          timeout=timeout, env=env["env"])


def fingerprint(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "locks" not in p.parts and ".tmp" not in p.parts}


def fake_runs(root: Path) -> list[str]:
    """Two finished records of the smoke suite's runs (fabricated tables: scan/report read them)."""
    sys.path.insert(0, str(REPO))
    from bench import results, suite as suites

    ids = []
    for c in suites.load("smoke").expand()[:3]:
        meta = {"run_id": c.run_id, "config_id": c.config_id, "recipe_name": c.recipe.name, "status": "finished",
                "config": c.to_dict(), "steps_done": 1}
        results.write_run(root, c.run_id, meta, [{"step": 1, "reward/mean": 0.5}],
                          [{"step": 1, "fraction": 1.0, "eval/acc_greedy": 0.25}])
        ids.append(c.run_id)
    return ids


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", default=None, help="work directory (default: a temp dir, removed)")
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    a = ap.parse_args()
    work = Path(a.keep or tempfile.mkdtemp(prefix="bench-battery-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = {"cwd": str(work), "env": {**os.environ, "OMP_NUM_THREADS": "1", "BENCH_CACHE": str(work / "cache"),
                                     "BENCH_REPORTS": str(work / "reports"), "PYTHONPATH": str(REPO),
                                     "TOKENIZERS_PARALLELISM": "false"}}
    res = work / "results"
    ids = fake_runs(res)
    smoke = (REPO / "suites" / "smoke.toml").read_text()

    def write(rel: str, data: bytes | str):
        p = work / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return p

    def corrupt(run: int, name: str, how):
        def f(_):
            p = res / "runs" / ids[run] / name
            p.write_bytes(how(p.read_bytes()))
        return f

    def held_lock(run_argv):
        """Hold the run's lock (as another process training it would) while the case runs."""
        import contextlib

        @contextlib.contextmanager
        def cm(_):
            from bench.harness.locks import run_lock
            rid = run_id_of(run_argv)
            with run_lock(res, rid, wait=False) as held:
                assert held
                yield
        return cm

    def run_id_of(argv):
        """The id `bench run argv` would train (built as the CLI builds it)."""
        import algorithms
        from bench.cli import build_parser
        from bench.config import Budget, RunConfig

        x = build_parser().parse_args(["run", *argv])
        cfg = RunConfig(recipe=algorithms.get(x.recipe), task=x.task, scale=x.scale, budget=Budget.parse(x.budget),
                        seed=x.seed, device=x.device, threads=x.threads, rollout=x.rollout)
        return cfg.with_overrides(x.set).run_id

    def no_marker(_):
        return "planted code ran" if (work / "EXECUTED").exists() else None

    plant = ("task: {n}\ndataset_path: json\noutput_type: generate_until\ndoc_to_text: q\ndoc_to_target: a\n"
             "process_results: !function evil.process_results\nmetric_list:\n  - {{metric: exact_match}}\n"
             "metadata: {m}\n")

    def plant_files(_):
        t = res / "lmeval_tasks"
        t.mkdir(parents=True, exist_ok=True)
        (t / "evil.py").write_text(f"open({str(work / 'EXECUTED')!r}, 'w').write('x')\n"
                                   "def process_results(d, r):\n    return {'exact_match': 1.0}\n")
        (t / "bench_addition.yaml").write_text(plant.format(n="bench_addition", m='{"version": 1}'))
        (t / "bench_evil.yaml").write_text(plant.format(n="bench_evil", m='{"version": 1}'))
        (t / "evil_task.yaml").write_text(plant.format(n="evil_task", m='{"version": 1}'))
        forged = '{"version": 1, "bench_task": "addition", "bench_params": {"difficulty": "easy"}}'
        (t / "bench_addition_deadbeef.yaml").write_text(plant.format(n="bench_addition_deadbeef", m=forged))

    ws_dir = []

    def warm(_):
        if not ws_dir:
            out = bench(["warmstart", "--task", "addition", "--scale", "nano", "--steps", "5"], env)
            ws_dir.append(out.stdout.strip().splitlines()[-1].split("checkpoint: ")[-1])

    def ckpt():
        return ws_dir[0] if ws_dir else "missing"

    url = lambda u: ["tune", "smoke", "--recipe", "grpo", "--trials", "1", "--storage", u,  # noqa: E731
                     "--results", str(res)]
    R = ["--results", str(res)]
    cases = [
        # ---- corrupt files
        Case("results: truncated run.json", "corrupt", ["results", "smoke", *R], rc=0, must="skipped corrupt run",
             prepare=corrupt(0, "run.json", lambda b: b[:50])),
        Case("results: garbage steps.parquet", "corrupt", ["results", "smoke", *R], rc=0, must="steps.parquet",
             prepare=corrupt(1, "steps.parquet", lambda b: b"PAR1" + os.urandom(200))),
        Case("results: evals.parquet footer cut", "corrupt", ["results", "smoke", *R], rc=0, must="evals.parquet",
             prepare=corrupt(2, "evals.parquet", lambda b: b[:-20])),
        Case("report: with a corrupt run", "corrupt", ["report", "smoke", *R], rc=0, must="report:",
             prepare=corrupt(1, "evals.parquet", lambda b: b[:-20]),
             check=lambda _: None if "corrupt record" in (work / "reports/smoke/report.md").read_text() else
             "corrupt run not listed in the report"),
        Case("suite --dry-run: corrupt counted pending", "corrupt", ["suite", "smoke", "--dry-run", "--no-calibrate", *R],
             rc=0),
        Case("results: run.json is a JSON list", "corrupt", ["results", "smoke", *R], rc=0, must="lacks",
             prepare=lambda _: (res / "runs" / ids[0] / "run.json").write_text("[1, 2]")),
        Case("results: empty run.json", "corrupt", ["results", "smoke", *R], rc=0, must="unreadable run record",
             prepare=lambda _: (res / "runs" / ids[0] / "run.json").write_text("")),
        Case("suite file: not UTF-8", "corrupt", ["suite", str(work / "s/latin1.toml"), "--dry-run", *R],
             must="latin1.toml:2:", prepare=lambda _: write("s/latin1.toml", smoke.encode().replace(b"\n", b"\n#\xe9\n", 1))),
        Case("suite file: 100k-char line", "corrupt", ["suite", str(work / "s/long.toml"), "--dry-run", *R],
             must="long.toml:", prepare=lambda _: write("s/long.toml", smoke + "#" + "x" * 100_000 + "\n")),
        Case("suite file: 6 MB", "corrupt", ["suite", str(work / "s/huge.toml"), "--dry-run", *R],
             must="byte limit", prepare=lambda _: write("s/huge.toml", smoke + "#\n" * (3 << 20))),
        Case("suite file: binary", "corrupt", ["suite", str(work / "s/bin.toml"), "--dry-run", *R],
             must="not UTF-8", prepare=lambda _: write("s/bin.toml", os.urandom(4000))),
        Case("suite file: invalid TOML", "corrupt", ["suite", str(work / "s/bad.toml"), "--dry-run", *R],
             must="invalid TOML", prepare=lambda _: write("s/bad.toml", smoke + "\n[[[\n")),
        Case("suite file: empty", "corrupt", ["suite", str(work / "s/empty.toml"), "--dry-run", *R],
             prepare=lambda _: write("s/empty.toml", "")),
        Case("tuned file: not UTF-8", "corrupt", ["suite", "smoke", "--tuned", "--tuned-file", str(work / "s/t.toml"),
                                                  "--dry-run", "--no-calibrate", *R],
             must="t.toml:1:", prepare=lambda _: write("s/t.toml", b"\xff\xfe[overrides]\n")),
        # a JSON file in a directory the user named: one line naming it (issue 26: only expected errors are one line)
        Case("eval: checkpoint with a garbage config.json", "corrupt", ["eval", str(work / "m/bad"), *R],
             must="bad/config.json", prepare=lambda _: write("m/bad/config.json", "{not json")),
        Case("eval: warm start with a garbage warmstart.json", "corrupt", ["eval", str(work / "m/ws"), *R],
             must="warmstart.json", prepare=lambda _: (write("m/ws/config.json", '{"model_type": "qwen2"}'),
                                                       write("m/ws/warmstart.json", "garbage"))),
        Case("reproduce: a published run.json is garbage", "corrupt", ["reproduce", str(work / "rep")],
             must="abc123def456/run.json", prepare=lambda _: write("rep/data/runs/abc123def456/run.json", "{oops")),
        # ---- odd URLs (no password may be printed)
        *[Case(f"tune storage {i}: {u.split('://')[0] if '://' in u else 'no scheme'}", "url", url(u)) for i, u in enumerate([
            f"POSTGRESQL://u:{SECRET}@127.0.0.1:1/db", f"postgresql://:{SECRET}@127.0.0.1:1/db",
            f"postgresql://u:p@ss@{SECRET}@127.0.0.1:1/db", f"mysql://u:{SECRET}@127.0.0.1:1/db",
            f"nosuchdb://u:{SECRET}@h/db", f"u:{SECRET}@host/db", f"redis://:{SECRET}@127.0.0.1:1/0",
            f"postgresql://127.0.0.1:1/db?password={SECRET}", "sqlite:////proc/nope/x.db"])],
        # ---- planted files
        Case("eval: planted bench_addition.yaml with !function", "planted",
             ["eval", "CKPT", "--tasks", "bench_addition", "--limit", "2", "--batch-size", "2", *R], rc=0,
             prepare=lambda e: (plant_files(e), warm(e)), check=no_marker),
        Case("eval: planted bench_evil.yaml", "planted", ["eval", "CKPT", "--tasks", "bench_evil", *R],
             must="not a task file bench exported", check=no_marker),
        Case("eval: planted evil_task.yaml (lm-eval namespace)", "planted", ["eval", "CKPT", "--tasks", "evil_task", *R],
             must="unknown lm-eval task", check=no_marker),
        Case("eval: forged bench_addition_deadbeef.yaml", "planted",
             ["eval", "CKPT", "--tasks", "bench_addition_deadbeef", *R], must="edited", check=no_marker),
        Case("eval: run.json planted as garbage", "planted", ["eval", ids[1], *R],
             prepare=lambda _: ((res / "runs" / ids[1] / "checkpoint").mkdir(exist_ok=True),
                                (res / "runs" / ids[1] / "checkpoint" / "config.json").write_text("{}"),
                                (res / "runs" / ids[1] / "run.json").write_text("{not json"))),
        # ---- set-up failures (a `failed` record with the real cause, one line)
        Case("run: unknown task difficulty", "setup", ["run", *TINY, "--set", "task_params.difficulty=impossible", *R],
             must="difficulty"),
        Case("run: seed overflow", "setup", ["run", *TINY, "--seed", str(2**70), *R], must="seed"),
        Case("run: --device cuda on CPU torch", "setup", ["run", *TINY, "--device", "cuda", *R], must="cuda"),
        Case("run: --results is a file", "setup", ["run", *TINY, "--results", str(work / "afile")],
             prepare=lambda _: write("afile", "x")),
        Case("run: --results under /proc", "setup", ["run", *TINY, "--results", "/proc/nope/results"]),
        # ---- concurrency and kill points
        Case("run: lock held by another process", "concurrency", ["run", *TINY, *R], must="another process",
             during=held_lock(TINY)),
        Case("run --force: lock held", "concurrency", ["run", *TINY, "--force", *R], must="another process",
             during=held_lock(TINY)),
        Case("tune: --workers 0", "concurrency", ["tune", "smoke", "--recipe", "grpo", "--workers", "0", *R]),
        Case("run: SIGKILL during set-up, then rerun is not blocked", "kill", ["run", *TINY, "--results", str(work / "k")],
             must="", prepare=lambda e: _kill_after(e, ["run", *TINY, "--results", str(work / "k")], 4, signal.SIGKILL),
             rc=0, check=lambda _: None if list((work / "k" / "runs").glob("*/run.json")) else "no record after rerun"),
        Case("run: SIGINT during set-up", "kill", [], rc=130,
             prepare=None, check=None),
        Case("run: finished run is skipped, not retrained", "kill", ["run", *TINY, "--results", str(work / "k")], rc=0,
             must="skipped"),
    ]
    cases = [c for c in cases if a.k in c.name]
    ok = 0
    for c in cases:
        if c.prepare:
            c.prepare(env)
        argv = [ckpt() if x == "CKPT" else x for x in c.argv]
        before = fingerprint(res)
        t0 = time.monotonic()
        if c.name == "run: SIGINT during set-up":
            p = _start(["run", *TINY, "--results", str(work / "i")], env)
            time.sleep(4)
            p.send_signal(signal.SIGINT)
            out_, err_ = p.communicate(timeout=120)
            proc = subprocess.CompletedProcess(p.args, p.returncode, out_, err_)
        elif c.during:
            with c.during(env):
                proc = bench(argv, env)
        else:
            proc = bench(argv, env)
        dt = time.monotonic() - t0
        after = fingerprint(res)
        err = [line for line in proc.stderr.splitlines() if not NOISE.match(line)]
        problems = []
        if proc.returncode != c.rc:
            problems.append(f"rc {proc.returncode} (want {c.rc})")
        if "Traceback" in proc.stderr + proc.stdout:
            problems.append("traceback")
        if c.rc == 2 and len(err) != 1:
            problems.append(f"{len(err)} stderr lines")
        if SECRET in proc.stderr + proc.stdout:
            problems.append("SECRET PRINTED")
        if c.must and c.must.lower() not in (proc.stderr + proc.stdout).lower():
            problems.append(f"no {c.must!r}")
        lost = [k for k in before if k not in after or (before[k] != after[k] and "lmeval" not in k)]
        if lost and c.kind != "corrupt" or (lost and c.kind == "corrupt" and c.rc == 0 and "report" in c.name):
            problems.append(f"changed {lost[:2]}")
        if c.check and (m := c.check(env)):
            problems.append(m)
        ok += not problems
        shown = (err[-1] if err else proc.stdout.strip().splitlines()[-1:] or [""])
        shown = shown if isinstance(shown, str) else shown[0]
        print(f"{'ok  ' if not problems else 'BAD '} [{c.kind:<11}] {c.name:<52} rc={proc.returncode:<3} {dt:5.1f}s  "
              f"{'; '.join(problems) or shown[:150]}", flush=True)
        # restore the fabricated records for the next case
        if c.kind == "corrupt":
            shutil.rmtree(res / "runs", ignore_errors=True)
            fake_runs(res)
    print(f"\n{ok} of {len(cases)} cases handled as expected (one line, the expected exit status, no traceback, "
          f"no secret, nothing lost); work dir {work}")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok == len(cases) else 1


def _start(argv, env):
    return subprocess.Popen([sys.executable, "-m", "bench.cli", *argv], cwd=env["cwd"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env["env"])


def _kill_after(env, argv, seconds, sig):
    p = _start(argv, env)
    time.sleep(seconds)
    p.send_signal(sig)
    p.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
