"""bench calibrate: the ladder, the choice, the record, and runs that take their warm start from it."""
import json
from pathlib import Path

import pytest

import algorithms
from bench import calibration, ladder
from bench.ladder import Rung, choose
from bench.cli import main
from bench.config import Budget, RunConfig, WarmStartConfig


def rung(steps, fmt, pass1):
    return Rung(3e-3, steps, {"eval/format_rate": fmt, "eval/avg_k": pass1}, 1.0, "k", "s")


def test_choose_takes_the_first_rung_meeting_format_and_pass1():
    rungs = [rung(200, 0.80, 0.10), rung(400, 0.96, 0.12), rung(800, 0.97, 0.30), rung(1600, 0.99, 0.45)]
    assert choose(rungs, 0.95, (0.15, 0.5)) == (rungs[2], "ok")
    assert choose([rung(200, 0.99, 0.7)], 0.95, (0.15, 0.5))[1] == "too easy"
    best, status = choose([rung(200, 0.5, 0.3), rung(400, 0.9, 0.1), rung(800, 0.9, 0.12)], 0.95, (0.15, 0.5))
    assert status == "not met" and best.steps == 800  # highest format rate, then pass@1


def entry(task="addition", scale="nano", steps=123, lr=1e-3, **ws):
    key = calibration.match_key(calibration._task_config(task, {}), scale, WarmStartConfig(**ws))
    return {"match": json.loads(json.dumps(key)), "steps": steps, "lr": lr, "status": "ok"}


def cfg(**ws) -> RunConfig:
    return RunConfig.compose(recipe=algorithms.get("grpo"), task="addition", scale="nano", budget=Budget.parse("2steps"),
                             warmstart=WarmStartConfig(calibrated=True, **ws))


def test_calibrated_runs_take_steps_and_lr_from_the_record(tmp_path, monkeypatch):
    path = tmp_path / "calibration.json"
    monkeypatch.setattr(calibration, "PATH", path)
    calibration.write(entry(steps=123, lr=1e-3))
    calibration.write(entry(steps=456, lr=2e-3, direct_frac=0.6))
    calibration.write(entry(steps=124, lr=1e-3))  # replaces the first: same match
    assert len(calibration.read()) == 2
    c = cfg()
    assert (c.warmstart.steps, c.warmstart.lr, c.warmstart.calibrated) == (124, 1e-3, True)
    assert cfg(direct_frac=0.6).warmstart.steps == 456
    assert cfg(seed=2).warmstart.steps == 124, "warm-start replicas share their calibration"
    assert RunConfig.from_dict(c.to_dict()) == c and RunConfig.from_dict(c.to_dict()).run_id == c.run_id
    calibration.write(entry(steps=200, lr=1e-3))
    assert cfg().run_id != c.run_id, "a new calibration gives new run ids"
    with pytest.raises(ValueError, match="bench calibrate --task addition --scale nano --param difficulty=hard"):
        RunConfig.compose(recipe=algorithms.get("grpo"), task="addition", scale="nano", budget=Budget.parse("2steps"),
                          task_params={"difficulty": "hard"}, warmstart=WarmStartConfig(calibrated=True))
    assert cfg(steps=50).warmstart.steps == 50, "stated steps are kept"


def test_the_committed_calibrations_still_match_and_task_params_take_the_sft_tasks():
    """A warm-start field added later (task_params) must not unmatch every committed entry; with
    warmstart.task_params a calibrated run takes the entry of the task its SFT data comes from."""
    def run(task_params, ws_params):
        return RunConfig.compose(recipe=algorithms.get("grpo"), task="gcd", scale="nano", budget=Budget.parse("2steps"),
                                 task_params=task_params, warmstart=WarmStartConfig(calibrated=True, task_params=ws_params))

    default = run({}, {})
    assert default.warmstart.steps == calibration.lookup("gcd", {}, "nano", WarmStartConfig())["steps"]
    assert run({"max_value": 999}, {"max_value": 199}).warmstart.steps == default.warmstart.steps  # 199: gcd's default
    with pytest.raises(ValueError, match="no calibration of task 'gcd'"):
        run({}, {"max_value": 999})


def test_uncalibrated_configs_keep_their_run_ids():
    c = RunConfig(recipe=algorithms.get("grpo"), task="addition", scale="nano", budget=Budget.parse("2steps"))
    assert "calibrated" not in c.to_dict()["warmstart"]
    assert not {"items", "ood_examples"} & set(c.to_dict()["eval"])


def test_a_damaged_calibration_file_is_named(tmp_path, monkeypatch):
    path = tmp_path / "calibration.json"
    path.write_text("{not json")
    monkeypatch.setattr(calibration, "PATH", path)
    with pytest.raises(ValueError, match="calibration.json: not valid JSON"):
        cfg()


def test_calibrate_command_trains_the_ladder_and_records_the_choice(bench_cache, tmp_path, capsys):
    out = tmp_path / "cal.json"
    rc = main(["calibrate", "--task", "addition", "--scale", "nano", "--param", "difficulty=easy", "--steps", "5,10",
               "--n", "8", "--k", "2", "--out", str(out)])
    assert rc == 3  # ten SFT steps are far from the targets: recorded as not met, exit 3
    e = calibration.read(out)[0]
    assert e["status"] == "not met" and [r["steps"] for r in e["rungs"]] == [5, 10]
    assert e["match"]["task"]["max_digits"] == 2 and e["criteria"]["k"] == 2
    assert "not met" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--target", "0.5"], "--target"),
    (["--min-format", "2"], "--min-format"),
    (["--set", "train.lr=1"], "warm-start settings only"),
    (["--steps", "400,200"], "ascending"),
    (["--lrs", "0"], "finite numbers > 0"),
])
def test_calibrate_bad_input(argv, message, capsys):
    with pytest.raises(SystemExit) if argv[0] in ("--steps", "--lrs") else _nothing():
        rc = main(["calibrate", "--task", "addition", "--scale", "nano", *argv])
        assert rc == 2
    assert message in capsys.readouterr().err


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_a_ladder_that_steps_over_the_range_is_refined_between_the_rungs(monkeypatch, tmp_path):
    import types

    from bench import models, tasks

    def pass1(steps):
        return 0.0 if steps <= 400 else 0.1 if steps <= 800 else 0.3 if steps <= 1200 else 0.8

    class Fake:
        def __init__(self, steps):
            self.steps, self.seconds, self.key, self.sha256, self.cache_hit = steps, 1.0, f"k{steps}", "s", False

        def load(self, device):
            return types.SimpleNamespace(steps=self.steps)

    monkeypatch.setattr(ladder, "warm_start", lambda task, scale, cfg, **kw: Fake(cfg.steps))
    monkeypatch.setattr(ladder, "evaluate", lambda policy, task, test, cfg, seed=0: {
        "eval/format_rate": 0.99, "eval/format_greedy": 1.0, "eval/avg_k": pass1(policy.steps), "eval/pass_k": 0.9,
        "eval/acc_greedy": 0.5, "eval/acc_formatted": pass1(policy.steps)})
    entry = ladder.calibrate(tasks.get("addition"), models.get("nano"), WarmStartConfig(), lrs=(3e-3,),
                             ladder=(200, 400, 800, 1600), n=4, k=2, log=lambda m: None)
    assert (entry["steps"], entry["status"]) == (1130, "ok")  # the geometric midpoint of 800 and 1600
    assert [r["steps"] for r in entry["rungs"]] == [200, 400, 800, 1600, 1130]


def test_list_calibrations(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(calibration, "PATH", tmp_path / "calibration.json")
    calibration.write({**entry(steps=800, lr=3e-3), "measured": {"eval/format_rate": 0.98, "eval/avg_k": 0.35,
                                                               "eval/pass_k": 0.66, "eval/acc_greedy": 0.54},
                       "criteria": {"k": 4, "target_pass1": [0.15, 0.5]}})
    assert main(["list", "calibrations"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("addition/nano {'max_digits': 4, 'min_digits': 2} direct_frac=0.0: chosen: lr 0.003, 800 steps")


def test_a_calibration_that_met_no_target_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration, "PATH", tmp_path / "calibration.json")
    calibration.write({**entry(steps=10, lr=3e-3), "status": "not met",
                       "measured": {"eval/format_rate": 0.5, "eval/avg_k": 0.0, "eval/pass_k": 0.0, "eval/acc_greedy": 0.0},
                       "criteria": {"k": 4, "target_pass1": [0.15, 0.5]}})
    with pytest.raises(ValueError, match="met no target"):
        cfg()


def test_a_calibrated_run_reuses_the_warm_start_its_calibration_trained():
    from bench import models, tasks
    from bench.warmstart import warmstart_key

    task, scale = tasks.get("addition"), models.get("nano")
    assert (warmstart_key(task, scale, WarmStartConfig(steps=800, lr=3e-3, calibrated=True))
            == warmstart_key(task, scale, WarmStartConfig(steps=800, lr=3e-3)))


def test_the_cli_default_ladder_is_the_ladder_module_s():
    from bench.cli import LADDER_DEFAULT  # a copy, so that `bench --help` never imports torch

    assert LADDER_DEFAULT == ladder.LADDER


def test_validation_never_reads_the_calibration_and_a_process_reads_it_once(tmp_path, monkeypatch):
    """steps and lr are filled in on the config's tree when it is built (RunConfig.compose, from_dict,
    with_values); validating a config reads no file, and the record is read once while unchanged."""
    path = tmp_path / "calibration.json"
    monkeypatch.setattr(calibration, "PATH", path)
    calibration.write(entry(steps=123, lr=1e-3))
    reads = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: (reads.append(self) if self == path else None,
                                                                  real(self, *a, **k))[1])
    c = cfg()
    assert [cfg().warmstart.steps for _ in range(3)] == [123] * 3 and reads == [path], "read once, then remembered"
    calibration.write(entry(steps=124, lr=1e-3))
    assert cfg().warmstart.steps == 124 and len(reads) == 2, "a rewritten record is read again"

    def no_read(*a, **k):
        raise AssertionError("calibration.json read while validating a config that states its steps")

    monkeypatch.setattr(calibration, "read", no_read)
    assert RunConfig.from_dict(c.to_dict()) == c  # a stored config (run.json) states its steps
    assert c.replace(seed=3).warmstart.steps == 123 and c.with_values({"train.lr": 1e-4}).warmstart.steps == 123
    with pytest.raises(ValueError, match=r"warmstart.calibrated: .*RunConfig.compose"):
        RunConfig(recipe=algorithms.get("grpo"), task="addition", scale="nano", budget=Budget.parse("2steps"),
                  warmstart=WarmStartConfig(calibrated=True))
