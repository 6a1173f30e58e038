"""`bench publish` (refuses runs that cannot be reproduced) and `bench reproduce` (reruns a sample
of a published report from scratch and names every column that differs), on the smoke suite."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from bench import publish, suite as suites
from bench.report.manifest import publish_problems, warm_start_text, warm_starts

SMOKE = suites.load("smoke")


def bench(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "bench.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


def _set(run_dir: Path, **fields) -> None:
    f = run_dir / "run.json"
    meta = json.loads(f.read_text())
    for k, v in fields.items():
        if k == "sha256":
            meta["warmstart"]["sha256"] = v
        else:
            meta[k] = v
    f.write_text(json.dumps(meta))


@pytest.fixture(scope="module")
def smoke_results(bench_cache, tmp_path_factory):
    """The smoke suite's 4 runs, marked as trained from a clean commit (this checkout may be dirty
    while tests run; the refusal of dirty runs is tested on a copy)."""
    root = tmp_path_factory.mktemp("pub") / "results"
    p = bench("suite", "smoke", "--workers", "2", "--threads", "1", "--results", str(root), "--no-report", cwd=root.parent)
    assert p.returncode == 0, p.stdout + p.stderr
    for d in (root / "runs").iterdir():
        meta = json.loads((d / "run.json").read_text())
        assert len(meta["warmstart"]["sha256"]) == 64  # every run records the weights it started from
        _set(d, git_dirty=False, git_commit=meta["git_commit"] or "0" * 40)
    return root


def test_a_differing_rerun_names_the_isa_when_it_changed(tmp_path):
    def run(name: str, isa: str | None) -> Path:
        d = tmp_path / name
        d.mkdir()
        hw = {"machine": "x86_64"} | ({"cpu_capability": isa} if isa else {})
        (d / "run.json").write_text(json.dumps({"hardware": hw}))
        return d

    assert publish.isa_hint(run("a", "AVX2"), run("b", "AVX2")) is None
    hint = publish.isa_hint(run("c", "AVX512"), run("d", "AVX2"))
    assert "trained at AVX512, the rerun at AVX2" in hint and "numerics.py" in hint
    assert "before runs recorded their ISA" in publish.isa_hint(run("e", None), run("f", "AVX512"))
    assert publish.isa_hint(run("g", "AVX2"), run("h", None)) is None


@pytest.mark.e2e  # `make test-e2e`: trains the smoke suite (and reruns it from scratch)
def test_publish_refuses_dirty_unhashed_missing_and_mixed_runs(smoke_results, tmp_path):
    root = tmp_path / "results"
    shutil.copytree(smoke_results, root)
    runs = sorted((root / "runs").iterdir())
    _set(runs[0], git_dirty=True)
    _set(runs[1], sha256=None)
    reports = tmp_path / "reports"
    with pytest.raises(ValueError, match=r"not publishable: 1 run\(s\) were trained from a modified.*"
                                         rf"{runs[0].name}.*1 run\(s\) do not record.*{runs[1].name}"):
        publish.publish(SMOKE, root, reports)
    assert not (reports / "smoke").exists()  # nothing written
    _set(runs[0], git_dirty=False)
    _set(runs[1], sha256="f" * 64)
    with pytest.raises(ValueError, match=r"cell addition/nano mixes 2 warm starts: .* \(3 runs\); ffffffffffff \(1 run\)"):
        publish.publish(SMOKE, root, reports)
    shutil.rmtree(runs[2])
    with pytest.raises(ValueError, match=rf"1 of the 4 runs of suite smoke have no finished record.*{runs[2].name}"):
        publish.publish(SMOKE, root, reports)


def test_report_names_each_cells_warm_start_and_flags_a_mixed_cell():
    metas = {"a": {"warmstart": {"sha256": "1" * 64}}, "b": {"warmstart": {"sha256": "1" * 64}},
             "c": {"warmstart": {"sha256": "2" * 64}}, "d": {"warmstart": {}}, "e": {"git_dirty": True}}
    counts = warm_starts({"a": "x", "b": "x", "c": "y", "d": "y"}, metas)
    assert warm_start_text(counts["x"]) == "111111111111 (2 runs)"
    assert warm_start_text(counts["y"]) == "222222222222 (1 run); not recorded (1 run)"
    problems = publish_problems(metas, {"a": "x", "b": "x", "c": "x", "d": "y", "e": "y"})
    assert any("e" in p and "modified" in p for p in problems)
    assert any("do not record" in p and "d, e" in p for p in problems)
    assert any(p.startswith("cell x mixes 2 warm starts") for p in problems)
    # a cell configured with several warm starts (warmstart.seed differs by design) is checked per
    # warm start: each must be one checkpoint, and two of them are not a mix
    def run(sha, seed):
        return {"git_commit": "c" * 40, "warmstart": {"sha256": sha * 64}, "config": {"warmstart": {"seed": seed}}}
    several = {"p": run("1", 0), "q": run("1", 0), "r": run("2", 1), "s": run("3", 1), "t": run("4", 0)}
    cells = {"p": "w", "q": "w", "r": "w", "s": "w", "t": "z"}
    counts = warm_starts(cells, several)
    assert list(counts) == ["w (warm start seed 0)", "w (warm start seed 1)", "z"]
    assert publish_problems(several, cells) == ["cell w (warm start seed 1) mixes 2 warm starts: "
                                                "222222222222 (1 run); 333333333333 (1 run)"]
    several["s"] = run("2", 1)
    assert publish_problems(several, cells) == []


@pytest.fixture(scope="module")
def published(smoke_results, tmp_path_factory):
    reports = tmp_path_factory.mktemp("reports")
    out = publish.publish(SMOKE, smoke_results, reports)
    return reports, out


@pytest.mark.e2e  # `make test-e2e`: trains the smoke suite (and reruns it from scratch)
def test_publish_copies_the_runs_and_writes_the_report_from_them(published, smoke_results):
    reports, out = published
    assert out == reports / "smoke"
    runs = sorted(p.name for p in (out / "data" / "runs").iterdir())
    assert runs == sorted(c.run_id for c in SMOKE.expand())
    md = (out / "report.md").read_text()
    assert "the runs of each cell start from one warm start" in md
    sha = json.loads((smoke_results / "runs" / runs[0] / "run.json").read_text())["warmstart"]["sha256"]
    assert f"| warm start weights (SHA-256): addition/nano | {sha[:12]} (4 runs) |" in md
    assert f"--results {reports / 'smoke' / 'data'}" in md or "smoke/data" in md
    # a second suite sharing these runs links them instead of holding a second copy
    other = SMOKE.replace(name="smoke-twin")
    twin = publish.publish(other, smoke_results, reports)
    linked = twin / "data" / "runs" / runs[0]
    assert linked.is_symlink() and linked.resolve() == (out / "data" / "runs" / runs[0]).resolve()
    # republishing the first report (here from two of its runs) keeps the twin's data whole: its
    # links into the replaced data become real copies, and its report still builds from them
    smaller = SMOKE.replace(name="smoke", seeds=SMOKE.seeds[:1])
    before = {p.name: (p / "run.json").read_bytes() for p in (twin / "data" / "runs").iterdir()}
    publish.publish(smaller, smoke_results, reports)
    after = twin / "data" / "runs"
    assert {p.name: (p / "run.json").read_bytes() for p in after.iterdir()} == before
    assert not any(p.is_symlink() for p in after.iterdir())
    assert not any(p.name.startswith(".") for p in after.iterdir())


def test_select_spreads_over_cells_and_recipes():
    def meta(cell, recipe, seed):
        return {"config": {"tags": {"cell": cell}, "seed": seed, "task": "t", "scale": cell[-1]}, "recipe_name": recipe}

    metas = {f"{c}{r}{s}": meta(c, r, s) for c in ("A", "B") for r in ("p", "q", "r") for s in (1, 0)}
    assert publish.select(metas, 4) == ["Ap0", "Bp0", "Aq0", "Bq0"]
    assert publish.select(metas, 100) == ["Ap0", "Bp0", "Aq0", "Bq0", "Ar0", "Br0"]
    assert publish.select(metas, 2, {"cell": ["B"], "recipe": ["q", "r"]}) == ["Bq0", "Br0"]
    assert publish.select(metas, 3, {"seed": ["1"]}) == ["Ap1", "Bp1", "Aq1"]


def test_compare_tables_names_every_differing_column_and_ignores_timing():
    old = pl.DataFrame({"step": [0, 1, 2], "a": [1.0, float("nan"), 3.0], "b": [1.0, 2.0, 3.0],
                        "time/step_s": [0.1, 0.2, 0.3], "gone": [1, 1, 1]})
    new = pl.DataFrame({"step": [0, 1, 2], "a": [1.0, float("nan"), 3.0], "b": [1.0, 2.5, 3.0],
                        "time/step_s": [9.0, 9.0, 9.0], "extra": [0, 0, 0]})
    diffs = publish.compare_tables("steps.parquet", old, new)
    assert len(diffs) == 2, diffs  # a column only the rerun logs (newer code's metric) is not a difference
    assert "steps.parquet: column gone is missing from the rerun" in diffs
    assert any(d.startswith("steps.parquet: column b differs in 1 of 3 rows, first at row 1 (step 1)") and "0.5" in d
               for d in diffs)
    assert publish.compare_tables("evals.parquet", old, old) == []
    assert "3 rows committed, 2 in the rerun" in publish.compare_tables("evals.parquet", old, old[:2])[0]


@pytest.mark.e2e  # `make test-e2e`: trains the smoke suite (and reruns it from scratch)
def test_reproduce_reruns_from_scratch_and_names_what_differs(published, tmp_path):
    reports, out = published
    cache = tmp_path / "cache"
    p = bench("reproduce", str(out), "--runs", "1", "--cache", str(cache), "--keep", str(tmp_path / "reruns"),
              cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 of 1 reruns identical" in p.stdout
    assert list((cache / "warmstart").glob("*/warmstart.json"))  # trained here, in the private cache
    rid = re.search(r"^  (\S+)  \S+  \S+  seed \d+$", p.stdout, re.M).group(1)  # the listed run (hardware lines come first)
    # a committed table that no longer matches its rerun: the column and the step are named
    steps = out / "data" / "runs" / rid / "steps.parquet"
    frame = pl.read_parquet(steps)
    second = frame["step"][1]
    frame.with_columns(pl.when(pl.col("step") == second).then(pl.col("compute/flops") + 1.0)
                       .otherwise(pl.col("compute/flops")).alias("compute/flops")).write_parquet(steps)
    p = bench("reproduce", str(out), "--runs", "1", "--cache", str(cache), cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "DIFFERS" in p.stdout and "steps.parquet: column compute/flops differs in 1 of" in p.stdout
    assert f"first at row 1 (step {second})" in p.stdout and "does not reproduce" in p.stdout
    frame.write_parquet(steps)


@pytest.mark.e2e  # `make test-e2e`: reruns the smoke report's cell from scratch
def test_reproduce_verdicts_reruns_the_cell_and_checks_its_conclusions(smoke_results, tmp_path):
    """On the machine that made the runs the verdict level agrees trivially: the point is the whole
    path (every recipe and seed rerun, both sides' statistics, hardware printed, exit 0). Its own
    copy of the report: another test republishes `published` from fewer seeds."""
    out = publish.publish(SMOKE, smoke_results, tmp_path / "reports")
    p = bench("reproduce", str(out), "--verdicts", "--cache", str(tmp_path / "cache"), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{len(SMOKE.expand())} runs of addition/nano" in p.stdout
    assert "published on:" in p.stdout and "rerun on:" in p.stdout and "torch kernels" in p.stdout
    assert "dapo vs baseline" in p.stdout and "level depends on the warm start" in p.stdout
    assert "the verdicts of 1 cell(s) reproduce" in p.stdout


@pytest.mark.parametrize("argv, needle", [
    (["reproduce", "nowhere/at-all"], "has no data/runs/"),
    (["reproduce", "reports/math-small", "--only", "colour=red"], "KEY one of cell, recipe, seed, task, scale"),
    (["reproduce", "reports/math-small", "--runs", "0"], "expected an integer >= 1"),
    (["publish", "no-such-suite"], "no-such-suite"),
    (["reproduce", "reports/math-small", "--verdicts", "--only", "recipe=dapo"], "every recipe and seed of a cell"),
    (["reproduce", "reports/math-small", "--verdicts", "--only", "cell=nope"], "valid: addition/nano/on_policy"),
])
def test_bad_input_is_one_clear_line(argv, needle):
    root = Path(__file__).resolve().parents[1]
    p = bench(*argv, cwd=root)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr, p.stderr
