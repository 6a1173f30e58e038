"""`bench tune` end to end on the tiny suite: two workers on one journal share 2 × 3 trials exactly
(acceptance 1); a far too high learning rate is pruned and recorded as `pruned` (acceptance 2);
the tuned overrides file round-trips and `bench suite --tuned` runs with its values (acceptance 3);
a malformed or unreachable storage fails before any run (acceptance 4)."""
import json
import re
from pathlib import Path

import optuna
import polars as pl
import pytest
from optuna.trial import TrialState

import bench.tune
from bench import suite as suites
from bench.cli import main
from bench.tune import settings as tune_settings, study, tuned
from bench.tune.storage import default_url, open_storage
from tune_helpers import write_tiny


def run_records(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / "runs").glob("*/run.json"))]


@pytest.mark.e2e  # `make test-e2e`: tuning workers in subprocesses, many runs
def test_two_workers_share_six_trials_exactly(tiny, tmp_path, capsys):
    root = tmp_path / "results"
    args = ["tune", str(tiny), "--recipe", "grpo", "--trials", "6", "--workers", "2", "--threads", "1",
            "--results", str(root)]
    assert main(args) == 0  # two spawned worker processes, one journal file
    out = capsys.readouterr().out
    assert "0 of 6 trials done, 6 to run" in out and "2 worker(s)" in out

    storage = open_storage(default_url(root, "tiny"))
    trials = optuna.load_study(study_name="tiny/addition/nano/grpo", storage=storage).get_trials()
    assert sorted(t.number for t in trials) == list(range(6))  # none lost, none extra
    assert all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials), [t.state for t in trials]
    runs = run_records(root)
    assert len(runs) == 6  # one run per trial, none run twice
    assert sorted(r["config"]["tags"]["trial"] for r in runs) == list(range(6))
    assert {r["run_id"] for r in runs} == {t.user_attrs["run_id"] for t in trials}
    for r in runs:
        t = trials[r["config"]["tags"]["trial"]]
        assert r["config"]["train"]["lr"] == pytest.approx(t.params["train.lr"])
        assert r["config"]["tags"]["study"] == "tiny/addition/nano/grpo" and r["config"]["seed"] == 1000

    s = bench.tune.summary(tiny, root)
    assert s.select("study", "trials", "finished", "pruned", "failed").row(0) == (
        "tiny/addition/nano/grpo", 6, sum(t.state == TrialState.COMPLETE for t in trials),
        sum(t.state == TrialState.PRUNED for t in trials), 0)
    assert s["flops"][0] == pytest.approx(sum(r["flops_spent"] for r in runs))

    assert main(args) == 0  # again: nothing left to run
    assert "6 of 6 trials done, 0 to run" in capsys.readouterr().out
    assert len(run_records(root)) == 6


GRID = """
[tune.space.rloo]
"train.lr" = {choices = [1e-5, 1e-3, 3e-3]}
"train.group_size" = false
"recipe.updates.minibatches" = false
"recipe.kl.coef" = false
"""


@pytest.mark.e2e  # `make test-e2e`: tuning workers in subprocesses, many runs
def test_a_grid_over_two_tuning_seeds_chooses_alike_with_one_worker_or_two(tmp_path, bench_cache, capsys):
    """Acceptance 3 of issue 23: every trial trains once per tuning seed and scores their mean; a grid
    study is the same runs whoever takes which trial, so two workers write the tuned file one does."""
    text = write_tiny(tmp_path / "t.toml").read_text().replace("trials = 3", 'trials = 3\nseeds = [1000, 1001]\n'
                                                                'sampler = "grid"\npruner = "none"')
    (tmp_path / "grid.toml").write_text(text.split("[tune.space.rloo]")[0] + GRID)
    chosen = {}
    for workers in (1, 2):
        root = tmp_path / f"results{workers}"
        assert main(["tune", str(tmp_path / "grid.toml"), "--recipe", "rloo", "--workers", str(workers), "--threads",
                     "1", "--results", str(root)]) == 0
        runs = run_records(root)
        assert len(runs) == 6  # 3 settings × 2 seeds
        assert sorted((r["config"]["train"]["lr"], r["config"]["seed"]) for r in runs) == [
            (lr, sd) for lr in (1e-5, 1e-3, 3e-3) for sd in (1000, 1001)]
        assert all(r["config"]["tags"]["params"] == {"train.lr": r["config"]["train"]["lr"]} for r in runs)
        t = bench.tune.trial_runs(tmp_path / "grid.toml", root)
        assert t.height == 6 and t["seed"].to_list().count(1000) == 3 and t["objective"].is_not_null().all()
        if workers == 1:  # a trial of a study whose cell the suite no longer has is not the suite's
            import json
            import shutil

            src = next((root / "runs").iterdir())
            shutil.copytree(src, root / "runs" / "0ldce11000000")
            meta = json.loads((root / "runs" / "0ldce11000000" / "run.json").read_text())
            meta["config"]["tags"]["study"], meta["run_id"] = "grid/addition/nano/gone/rloo", "0ldce11000000"
            (root / "runs" / "0ldce11000000" / "run.json").write_text(json.dumps(meta))
            skipped = []
            assert bench.tune.trial_runs(tmp_path / "grid.toml", root, skipped).height == 6 and skipped == []
            shutil.rmtree(root / "runs" / "0ldce11000000")
        per = bench.tune.costs.per_trial(t, 2).sort("params")
        chosen[workers] = ((tmp_path / f"results{workers}" / "tuned" / "grid.toml").read_text().split("\n\n", 1)[1],
                           per.select("params", "value").rows())
        trial = per.sort(["value", "trial"], descending=[True, False]).row(0, named=True)
        storage = open_storage(default_url(root, "grid"))
        study_ = optuna.load_study(study_name="grid/addition/nano/rloo", storage=storage)
        assert study_.best_value == pytest.approx(trial["value"])  # the trial's value is the mean of its seeds'
    assert chosen[1] == chosen[2]
    capsys.readouterr()


def test_tune_cell_tunes_one_cell_and_applies_it_to_every_cell(tmp_path, bench_cache, capsys):
    text = write_tiny(tmp_path / "t.toml").read_text().replace("trials = 3", 'trials = 1\ncell = "addition/nano/b"')
    text = text.replace("[tune]", "[regimes.a]\n[regimes.b]\nminibatches = 2\n\n[tune]")
    (tmp_path / "two.toml").write_text(text)
    root = tmp_path / "results"
    assert main(["tune", str(tmp_path / "two.toml"), "--recipe", "grpo", "--workers", "1", "--threads", "1",
                 "--results", str(root)]) == 0
    assert {r["config"]["tags"]["cell"] for r in run_records(root)} == {"addition/nano/b"}
    tuned_text = (root / "tuned" / "two.toml").read_text()
    assert "[overrides.grpo]" in tuned_text and "addition/nano/b" in tuned_text  # the note names the study
    s = tuned.apply(suites.load(tmp_path / "two.toml"), root / "tuned" / "two.toml")
    assert set(s.cell_overrides) == {("addition/nano/a", "grpo"), ("addition/nano/b", "grpo")}
    capsys.readouterr()


def test_pruning_stops_a_far_too_high_learning_rate(tmp_path, bench_cache):
    path = write_tiny(tmp_path / "tiny.toml", steps=4, n_examples=32).read_text()
    (tmp_path / "prune.toml").write_text(path + '[tune.space.topr.train]\nlr = {low = 1e-7, high = 10.0, log = true}\n')
    s = suites.load(tmp_path / "prune.toml")
    (spec,) = study.plan(s, ["topr"], list(s.cells), tune_settings.from_suite(s, trials=4))
    url, root = str(tmp_path / "t.journal"), tmp_path / "results"
    st = study.create(open_storage(url), spec)
    for lr in (1e-7, 1e-7, 5.0, 1e-7):  # two good trials set the median, then a bad one, then a good one
        st.enqueue_trial({"train.lr": lr})
    study.work(url, [spec], [4], str(root), 1, 0)

    trials = optuna.load_study(study_name=spec.name, storage=open_storage(url)).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.PRUNED, TrialState.COMPLETE]
    assert trials[0].value > 0  # the warm start solves some problems: there is something to lose
    assert trials[2].intermediate_values[1] < trials[0].intermediate_values[1]
    rec = {r["config"]["tags"]["trial"]: r for r in run_records(root)}
    assert rec[2]["status"] == "pruned" and "pruned (median) at evaluation 1" in rec[2]["reason"]
    assert rec[2]["steps_done"] == 2 < rec[0]["steps_done"] == 4  # stopped at the 50% checkpoint
    assert pl.read_parquet(root / "runs" / rec[2]["run_id"] / "evals.parquet").height == 2
    assert all(rec[i]["status"] == "finished" for i in (0, 1, 3))
    row = bench.tune.summary(s, root).row(0, named=True)
    assert (row["trials"], row["finished"], row["pruned"]) == (4, 3, 1)


def test_tuned_file_round_trips_and_tuned_runs_use_it(tiny, tmp_path, capsys):
    root = tmp_path / "results"
    tables = {("addition/nano", "grpo"): {"train.lr": 1.2345678901234567e-05, "recipe.updates.minibatches": 2,
                                         "recipe.kl.coef": 0.0031},
              ("", "rloo"): {"train.lr": 3e-4}}
    path = tuned.write(tuned.default_path(root, "tiny"), "tiny", tables, {("", "rloo"): "a note"})
    assert tuned.read(path) == tables  # exact floats, ints stay ints
    tuned.write(path, "tiny", {("addition/nano", "rloo"): {"train.lr": 1e-4}})  # merged into the file
    assert tuned.read(path) == {**tables, ("addition/nano", "rloo"): {"train.lr": 1e-4}}
    assert "# a note" in path.read_text().split("[overrides.rloo]")[1].splitlines()[1]  # a kept table keeps its note

    s = suites.load(tiny)
    t = tuned.apply(s, path)
    cell = s.cells[0]
    cfg = t.run_config(cell, "grpo", 0)
    assert (cfg.train.lr, cfg.recipe.updates.minibatches, cfg.recipe.kl.coef) == (1.2345678901234567e-05, 2, 0.0031)
    assert cfg.tags["tuned"] is True and cfg.run_id != s.run_config(cell, "grpo", 0).run_id
    assert t.run_config(cell, "rloo", 0).train.lr == 1e-4  # the cell's table wins over the all-cells one

    rc = main(["suite", str(tiny), "--tuned", "--only", "recipe=grpo", "--only", "seed=0", "--workers", "1",
               "--threads", "1", "--results", str(root), "--no-report"])
    assert rc == 0, capsys.readouterr()
    (rec,) = run_records(root)
    assert rec["run_id"] == cfg.run_id and rec["status"] == "finished"
    assert rec["config"]["train"]["lr"] == 1.2345678901234567e-05 and rec["config"]["tags"]["tuned"] is True
    assert rec["config"]["recipe"]["updates"]["minibatches"] == 2 and rec["config"]["recipe"]["kl"]["coef"] == 0.0031


def test_tuned_file_errors(tiny, tmp_path):
    s = suites.load(tiny)
    with pytest.raises(FileNotFoundError, match="run `bench tune tiny --all` first"):
        tuned.apply(s, tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    for text, msg in [('[overrides."addition/nano".dapo]\n"train.lr" = 1e-4\n', "unknown recipe 'dapo'"),
                      ('[overrides."addition/micro".grpo]\n"train.lr" = 1e-4\n', "unknown cell 'addition/micro'"),
                      ('[overrides.grpo]\n"eval.every" = 0.5\n', "only recipe.\\* and train.\\* paths"),
                      ('[overrides.grpo]\n"train.lr" = -1.0\n', "train.lr: got -1.0; expected a finite number > 0")]:
        bad.write_text(text)
        with pytest.raises(ValueError, match=msg):
            tuned.apply(s, bad)


@pytest.mark.parametrize("url, msg", [
    ("notaurl", "storage 'notaurl': expected a database URL"),
    ("postgresql://nobody@127.0.0.1:1/x", "storage 'postgresql://nobody@127.0.0.1:1/x': (the postgresql driver is not "
                                          "installed|cannot connect)"),
    ("nosuchdb://a/b", "unknown database dialect 'nosuchdb'"),
])
def test_bad_storage_fails_before_any_run(tiny, tmp_path, capsys, url, msg):
    root = tmp_path / "results"
    rc = main(["tune", str(tiny), "--recipe", "grpo", "--storage", url, "--results", str(root)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("bench tune: error: ") and re.search(msg, err), err
    assert not root.exists()  # nothing ran, nothing written


def test_recipe_or_all_required(tiny, capsys):
    assert main(["tune", str(tiny)]) == 2
    assert "give --recipe R" in capsys.readouterr().err
    assert main(["tune", str(tiny), "--recipe", "dapo"]) == 2
    assert "unknown recipe 'dapo'" in capsys.readouterr().err


@pytest.mark.e2e  # `make test-e2e`: tuning workers in subprocesses, many runs
def test_the_report_states_tuning_cost_and_tuned_against_default(tiny, tmp_path, capsys):
    from bench import report

    root, out = tmp_path / "results", tmp_path / "report"
    common = ["--threads", "1", "--results", str(root)]
    assert main(["suite", str(tiny), "--only", "recipe=grpo", "--only", "seed=0", "--workers", "1", "--no-report",
                 *common]) == 0
    report.build(suites.load(tiny), root, out)
    assert "No `bench tune` trials are recorded for this suite" in (out / "report.md").read_text()

    assert main(["tune", str(tiny), "--recipe", "grpo", "--trials", "2", "--workers", "1", *common]) == 0
    assert main(["suite", str(tiny), "--tuned", "--only", "recipe=grpo", "--only", "seed=0", "--workers", "1",
                 "--no-report", *common]) == 0
    capsys.readouterr()
    report.build(suites.load(tiny), root, out)
    md = (out / "report.md").read_text()
    assert "Tuning cost: 2 trials in all" in md and "## Tuning" in md
    assert "other recorded run" not in md  # the --tuned runs are reported there, not as stale runs
    cost = pl.read_csv(out / "tuning_cost.csv")
    assert cost["trials"].to_list() == [2] and cost["recipe"].to_list() == ["grpo"]
    vs = pl.read_csv(out / "tuned_vs_default.csv")
    assert vs.select("recipe", "n_default", "n_tuned").rows() == [("grpo", 1, 1)]


class _Killed(BaseException):
    """Stands for a SIGKILL: not an Exception, so nothing on the way catches it."""


@pytest.mark.e2e  # `make test-e2e`: trains six tiny runs
def test_an_interrupted_trial_is_taken_up_again_under_its_own_number(tmp_path, bench_cache, monkeypatch, capsys):
    """A worker killed mid-trial leaves the trial RUNNING with some of its seeds recorded. The next
    `bench tune` on that storage sees that the trial's process (on this machine) is gone, finishes
    that trial under its own number, training only the seeds without a record, then runs the rest:
    every grid point once, no half-run trial left in the results (which the report would count as a
    trial of its own)."""
    import io
    import subprocess

    text = write_tiny(tmp_path / "t.toml").read_text().replace("trials = 3", 'trials = 3\nseeds = [1000, 1001]\n'
                                                                'sampler = "grid"\npruner = "none"')
    (tmp_path / "grid.toml").write_text(text.split("[tune.space.rloo]")[0] + GRID)
    s = suites.load(tmp_path / "grid.toml")
    settings = tune_settings.from_suite(s)
    (spec,) = study.plan(s, ["rloo"], s.cells, settings)
    root, url = tmp_path / "results", default_url(tmp_path / "results", "grid")
    study.create(open_storage(url), spec)
    st = optuna.load_study(study_name=spec.name, storage=open_storage(url), sampler=study.make_sampler(spec))
    t = st.ask()  # as a worker asks: the grid's sampler assigns the trial its grid point
    real, calls = study._train, []

    def dies_on_the_second_seed(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise _Killed()
        return real(*a, **kw)

    monkeypatch.setattr(study, "_train", dies_on_the_second_seed)
    with pytest.raises(_Killed):
        study.run_trial(t, spec, root, 1)
    monkeypatch.setattr(study, "_train", real)
    gone = subprocess.Popen(["true"])
    gone.wait()
    t.set_user_attr("worker", f"{study._worker_id().rsplit(':', 1)[0]}:{gone.pid}")
    first = run_records(root)
    assert len(first) == 1 and st.get_trials()[0].state == TrialState.RUNNING
    assert study.stale_trials(st) == [st.get_trials()[0]._trial_id]
    t.set_user_attr("worker", study._worker_id())  # this process: alive, so not interrupted
    assert study.stale_trials(st) == [] and study.stale_trials(st, every_running=True) == [st.get_trials()[0]._trial_id]
    t.set_user_attr("worker", f"{study._worker_id().rsplit(':', 1)[0]}:{gone.pid}")

    out = io.StringIO()
    study.run(url, [spec], root, workers=1, threads=1, out=out)
    assert "3 to run (1 interrupted, taken up again)" in out.getvalue()
    assert "trial   0: interrupted, taken up again" in capsys.readouterr().out  # the worker's own lines
    trials = optuna.load_study(study_name=spec.name, storage=open_storage(url)).get_trials()
    assert [x.number for x in trials] == [0, 1, 2] and all(x.state == TrialState.COMPLETE for x in trials)
    runs = run_records(root)
    assert sorted((r["config"]["tags"]["trial"], r["config"]["seed"]) for r in runs) == [
        (n, sd) for n in range(3) for sd in (1000, 1001)]
    assert sorted(r["config"]["train"]["lr"] for r in runs) == sorted([1e-5, 1e-3, 3e-3] * 2)
    kept = next(r for r in runs if r["run_id"] == first[0]["run_id"])
    assert kept == first[0]  # the recorded seed was scored from its record, not trained again
    per = bench.tune.costs.per_trial(bench.tune.trial_runs(tmp_path / "grid.toml", root), 2)
    assert per["complete"].all() and per.height == 3
    assert trials[0].value == pytest.approx(per.filter(pl.col("trial") == 0)["value"][0])
    capsys.readouterr()
