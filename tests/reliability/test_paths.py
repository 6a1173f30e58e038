"""Every path a command reads or writes is checked before any work, and refused in one line naming
it (issue 26, item 4): --results of the reading commands, --out of report and calibrate, --reports,
--cache and --keep; a dataset task without its data says how to give it."""
import os

import pytest

from bench.cli import main

FORMAT_RUNS = "reports/addition-format/data"


@pytest.fixture
def places(tmp_path):
    (tmp_path / "afile").write_text("x")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    yield tmp_path
    ro.chmod(0o755)


CASES = [
    (["report", "smoke", "--results", FORMAT_RUNS, "--out", "{t}/afile"], "report directory {t}/afile is a file"),
    (["report", "smoke", "--results", FORMAT_RUNS, "--out", "{t}/afile/sub"], "cannot be created: {t}/afile is a file"),
    (["report", "smoke", "--results", FORMAT_RUNS, "--out", "{t}/ro/rep"], "report directory {t}/ro/rep is not writable"),
    (["report", "smoke", "--results", "{t}/afile"], "results directory {t}/afile is a file"),
    (["report", "smoke", "--results", "{t}/nothing"], "results directory {t}/nothing does not exist"),
    (["results", "smoke", "--results", "{t}/afile"], "results directory {t}/afile is a file"),
    (["results", "smoke", "--results", "{t}/nothing"], "results directory {t}/nothing does not exist"),
    (["suite", "smoke", "--results", "{t}/afile", "--dry-run"], "results directory {t}/afile is a file"),
    (["suite", "smoke", "--results", "{t}/afile"], "results directory {t}/afile is a file"),
    (["publish", "smoke", "--results", "{t}/afile"], "results directory {t}/afile is a file"),
    (["publish", "smoke", "--results", FORMAT_RUNS, "--reports", "{t}/afile"], "reports directory {t}/afile is a file"),
    (["reproduce", "reports/addition-format", "--cache", "{t}/afile"], "--cache {t}/afile is a file"),
    (["reproduce", "reports/addition-format", "--keep", "{t}/afile/x"], "--keep {t}/afile/x cannot be created"),
    (["calibrate", "--task", "addition", "--scale", "nano", "--out", "{t}"], "--out {t} is a directory; give a file"),
    (["calibrate", "--task", "addition", "--scale", "nano", "--out", "{t}/ro/c.json"], "is not writable"),
    (["warmstart", "--task", "addition", "--scale", "nano", "--cache", "{t}/afile"], "cache directory {t}/afile is a file"),
    (["run", "--recipe", "grpo", "--task", "gsm8k", "--scale", "nano", "--budget", "1steps"],
     "needs the parameter(s) path (a local data file: --data FILE on the command line, path = \"FILE\" under "
     "[task_params.gsm8k] in a suite)"),
]


@pytest.mark.parametrize("argv, expected", CASES, ids=[" ".join(c[0][:2]) + f" {i}" for i, c in enumerate(CASES)])
def test_bad_paths_are_refused_before_any_work_in_one_line(places, capsys, argv, expected):
    if os.geteuid() == 0 and "/ro/" in expected + " ".join(argv):
        pytest.skip("root writes into read-only directories")
    t = str(places)
    before = sorted(p.name for p in places.iterdir())
    assert main([a.format(t=t) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert expected.format(t=t) in err, err
    assert sorted(p.name for p in places.iterdir()) == before  # nothing created, nothing lost


def test_stacks_refuse_checkpoints(capsys, tmp_path):
    assert main(["suite", "smoke", "--stack", "2", "--checkpoint-every", "1", "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "stacks keep no resume checkpoints; use --stack 1" in err and not (tmp_path / "r").exists()


def test_a_report_over_corrupt_records_names_each_and_finishes(tmp_path, capsys):
    import shutil
    from pathlib import Path

    runs = sorted((Path(FORMAT_RUNS) / "runs").iterdir())[:2]  # real copies (claims links into them)
    root = tmp_path / "res"
    for r in runs:
        shutil.copytree(r, root / "runs" / r.name)
    (root / "runs" / runs[0].name / "run.json").write_text("{bad")
    (root / "runs" / runs[1].name / "steps.parquet").write_text("garbage")
    assert main(["report", "addition-format", "--results", str(root), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert f"{runs[0].name}/run.json: unreadable run record" in text
    assert f"{runs[1].name}/steps.parquet: unreadable table" in text
