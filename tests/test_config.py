"""The typed config layer (issue 15 items 1-2): ranges, one-line errors, deep-merge overrides,
canonical hashing, run.json round trips, and checks that fail before any work."""
import json
from pathlib import Path

import pytest

import algorithms
from bench import suite as suites
from bench.config import Budget, ConfigError, RunConfig, TrainConfig
from bench.typed import merge, unflatten

REPORTS = Path(__file__).resolve().parent.parent / "reports"
RUNS = REPORTS / "addition-format" / "data" / "runs"
BASE = RunConfig(recipe=algorithms.get("grpo"), task="addition", scale="nano", budget=Budget.parse("2e9"))
RUN = ["run", "--recipe", "grpo", "--task", "addition", "--scale", "nano", "--budget", "2e9"]


@pytest.mark.parametrize("patch, line", [
    ({"train.lr": float("inf")}, "train.lr: got inf; expected a finite number > 0"),
    ({"train.lr": "abc"}, "train.lr: got 'abc'; expected a finite number > 0"),
    ({"train.group_size": 1}, "train.group_size: got 1; expected an integer >= 2"),
    ({"train.group_size": 2.5}, "train.group_size: got 2.5; expected an integer >= 2"),
    ({"train.top_p": 1.5}, "train.top_p: got 1.5; expected a finite number in (0, 1]"),
    ({"train.max_new_tokens": 0}, "train.max_new_tokens: got 0; expected an integer >= 1 or null"),
    ({"train.precision": "fp16"}, "train.precision: got 'fp16'; expected one of 'fp32', 'bf16'"),
    ({"threads": -3}, "threads: got -3; expected an integer >= 0"),
    ({"seed": 2**64}, "seed: got 18446744073709551616; expected an integer in [0, 9223372036854775807]"),
    ({"budget": 1e999}, "budget.value: got inf; expected a finite number > 0"),
    ({"budget": "0.5steps"}, "budget: a steps budget must be a whole number of steps, got 0.5steps"),
    ({"eval.every": 0.3}, "eval.every: got 0.3; expected 1/n for an integer n >= 1 (e.g. 0.1, 0.25)"),
    ({"rollout.lag": -1}, "rollout.lag: got -1; expected an integer >= 0"),
    ({"warmstart.direct_frac": 1.0}, "warmstart.direct_frac: got 1.0; expected a finite number in [0, 1)"),
    ({"recipe.objective.eps_high": "abc"}, "recipe.objective.eps_high: expected float, got 'abc' (str)"),
    ({"recipe.objective.eps_hgh": 0.3}, "recipe.objective.eps_hgh: ppo_clip has no field 'eps_hgh'; fields: "
                                        "eps_low, eps_high, dual_clip"),
    ({"train.tis_cap": 2.0}, "train.tis_cap: got 2.0 with rollout 'native'"),
])
def test_bad_values_fail_in_one_line_naming_field_value_and_range(patch, line):
    with pytest.raises(ConfigError) as e:
        BASE.with_values(patch)
    assert str(e.value).startswith(line) and "\n" not in str(e.value)


def test_unknown_fields_list_the_valid_ones_and_suggest():
    with pytest.raises(ConfigError, match=r"^train\.lrr: unknown field 'lrr'; valid: prompts_per_step, .*\(did you mean 'lr'\?\)$"):
        BASE.with_values({"train.lrr": 1e-3})
    with pytest.raises(ConfigError, match=r"^recipe: got 'foo'; expected a table of recipe fields"):
        BASE.with_overrides(["recipe=foo"])
    with pytest.raises(ConfigError, match=r"^--set 'train\.lr': expected PATH=VALUE"):
        BASE.with_overrides(["train.lr"])


def test_sections_built_alone_name_their_section():
    with pytest.raises(ConfigError, match=r"^train\.group_size: got 0; expected an integer >= 2$"):
        TrainConfig(group_size=0)
    with pytest.raises(ConfigError, match=r"^budget: got '2e9 flop'; expected a number with an optional unit"):
        Budget.parse("2e9 flop")


def test_overrides_are_deep_merges_and_int_and_float_hash_alike():
    a = BASE.with_overrides(["train.lr=1"])
    b = BASE.with_values({"train": {"lr": 1.0}})
    assert a.train.lr == 1.0 and isinstance(a.train.lr, float) and a.run_id == b.run_id
    assert a.run_id != BASE.run_id
    # a merge keeps the siblings of what it sets; a new part type replaces the part whole
    c = BASE.with_values({"recipe": {"objective": {"eps_high": 0.3}}})
    assert c.recipe.objective.eps_high == 0.3 and c.recipe.objective.eps_low == BASE.recipe.objective.eps_low
    d = BASE.with_values({"recipe.objective": {"type": "cispo", "ratio_max": 5.0}})
    assert type(d.recipe.objective).__name__ == "CISPO" and d.recipe.objective.ratio_max == 5.0
    assert merge({"a": {"b": 1, "c": 2}}, {"a": {"b": 3}}) == {"a": {"b": 3, "c": 2}}
    assert unflatten({"a.b": 1, "a": {"c": 2}}) == {"a": {"b": 1, "c": 2}}


def test_suite_lr_1_0_and_set_lr_1_give_one_run_id(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('recipes = ["grpo"]\nseeds = 1\ntasks = ["addition"]\nscales = ["nano"]\nbudget = 2e9\n'
                 "[train]\nlr = 1.0\n")
    from_suite = suites.load(p).expand()[0]
    from_cli = RunConfig(recipe=algorithms.get("grpo"), task="addition", scale="nano", budget=Budget.parse("2e9"),
                         tags=from_suite.tags).with_overrides(["train.lr=1"])
    assert from_suite.run_id == from_cli.run_id


def test_new_fields_at_their_default_leave_run_ids_alone():
    """Golden ids: a change to the canonical form (a new field, a renamed key) fails here."""
    assert BASE.run_id == "1c22f95325ea" and BASE.config_id == "c3fded9ff826"
    d = BASE.to_dict()
    assert d["rollout"] == "native" and "tis_cap" not in d["train"]
    lagged = BASE.with_values({"rollout.lag": 2})
    assert lagged.to_dict()["rollout"] == {"backend": "native", "lag": 2} and lagged.run_id != BASE.run_id
    assert RunConfig.from_dict(lagged.to_dict()) == lagged


def test_every_committed_run_json_round_trips_exactly():
    files = sorted({f.resolve() for f in REPORTS.glob("*/data/runs/*/run.json")})  # every published run, once
    # addition-format 180, claims' own 130 (its data/ links addition-format's for the rest), the pilot's 49, ...
    assert len(list(RUNS.glob("*/run.json"))) == 180 and len(files) >= 180 + 130 + 49
    for f in files:
        rec = json.loads(f.read_text())
        cfg = RunConfig.from_dict(rec["config"])
        assert cfg.to_dict() == rec["config"], f
        assert cfg.run_id == rec["run_id"] == f.parent.name


def test_every_published_run_is_from_a_clean_commit_and_names_its_warm_start():
    """Published runs can be rerun: a clean commit (git_dirty false) and the SHA-256 of the warm
    start's weights (`bench reproduce` checks both against a rerun from scratch)."""
    files = sorted({f.resolve() for f in REPORTS.glob("*/data/runs/*/run.json")})
    assert files
    for f in files:
        rec = json.loads(f.read_text())
        assert rec["git_dirty"] is False and len(rec["git_commit"]) == 40, f
        assert len((rec.get("warmstart") or {}).get("sha256") or "") == 64, f


# -- the CLI: one line, exit 2, before any work ---------------------------------------------------
@pytest.fixture
def no_work(monkeypatch):
    """Training or warm-starting would fail the test: every check must come first."""
    def boom(*a, **k):
        raise AssertionError("work started before the input was checked")
    monkeypatch.setattr("bench.warmstart.warm_start", boom)
    monkeypatch.setattr("bench.engine.trainer.Trainer.run", boom)


@pytest.mark.parametrize("extra, fragment", [
    (["--budget", "1e999"], "budget.value: got inf"),
    (["--budget", "0.5steps"], "whole number of steps"),
    (["--threads", "-3"], "argument --threads: got -3; expected an integer >= 0"),
    (["--set", "train.lr=inf"], "train.lr: got 'inf'"),
    (["--set", "train.lr=abc"], "train.lr: got 'abc'"),
    (["--set", "recipe=foo"], "recipe: got 'foo'"),
    (["--set", "recipe.objective.eps_high=abc"], "recipe.objective.eps_high: expected float"),
    (["--set", "train.group_size=2.5"], "train.group_size: got 2.5"),
    (["--set", "train.group_size=1"], "train.group_size: got 1"),
    (["--set", "task_params.difficulty=extreme"], "unknown difficulty for task 'addition': 'extreme'"),
    (["--seed", str(2**64)], "seed: got 18446744073709551616"),
    (["--device", "cuda"], "device 'cuda'"),
])
def test_bench_run_refuses_bad_input_in_one_line(extra, fragment, no_work, capsys, tmp_path):
    from bench.cli import main

    argv = RUN + ["--results", str(tmp_path)] + extra
    if extra[:2] == ["--budget", extra[1]]:
        argv = RUN[:-1] + [extra[1], "--results", str(tmp_path)]
    import torch

    if extra == ["--device", "cuda"] and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(argv) == 2 if extra[0] != "--threads" else _exits_2(main, argv)
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err, err


def _exits_2(main, argv) -> bool:
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code == 2


def test_results_that_cannot_be_written_fail_before_training(no_work, capsys, tmp_path):
    from bench.cli import main

    a_file = tmp_path / "results.txt"
    a_file.write_text("")
    for root, fragment in ((a_file, "is a file"), (a_file / "sub", "is a file"), (Path("/proc/bench"), "not writable")):
        assert main(RUN + ["--results", str(root)]) == 2
        err = capsys.readouterr().err
        assert f"results directory {root}" in err and fragment in err and err.count("\n") == 1, err
    assert main(["suite", "smoke", "--results", str(a_file)]) == 2
    assert "results directory" in capsys.readouterr().err
    assert main(["warmstart", "--task", "addition", "--scale", "nano", "--cache", str(a_file)]) == 2
    assert "cache directory" in capsys.readouterr().err


def test_suite_checks_the_report_directory(no_work, capsys, tmp_path, monkeypatch):
    from bench.cli import main

    blocker = tmp_path / "reports"
    blocker.write_text("")
    monkeypatch.setenv("BENCH_REPORTS", str(blocker))
    assert main(["suite", "smoke", "--results", str(tmp_path / "r")]) == 2
    assert "report directory" in capsys.readouterr().err


SUITE = 'recipes = ["grpo", "ppo"]\nseeds = 2\ntasks = ["addition"]\nscales = ["nano"]\nbudget = "4steps"\n'


def test_regimes_make_cells_that_match_the_off_policy_degree(tmp_path):
    p = tmp_path / "r.toml"
    p.write_text(SUITE + "[regimes.on]\nlag = 0\n[regimes.stale]\nlag = 2\nepochs = 2\nminibatches = 2\n")
    s = suites.load(p)
    assert [c.name for c in s.cells] == ["addition/nano/on", "addition/nano/stale"]
    cfgs = s.expand(s.parse_only(["regime=stale"]))
    assert len(cfgs) == 4 and {c.tags["regime"] for c in cfgs} == {"stale"}
    for c in cfgs:  # every recipe, ppo included (its own default is 4 minibatches), gets the regime
        assert (c.rollout.lag, c.recipe.updates.epochs, c.recipe.updates.minibatches) == (2, 2, 2)
    on = s.expand(s.parse_only(["regime=on", "recipe=grpo"]))[0]
    assert on.rollout.lag == 0 and on.recipe.updates.epochs == 1
    p.write_text(SUITE + "[regimes.stale]\nlag = 2\n[overrides.ppo]\n\"recipe.updates.epochs\" = 3\n")
    with pytest.raises(ValueError, match=r"overrides\.ppo\.recipe\.updates: set by the suite's \[regimes\]"):
        suites.load(p)


def test_report_table_and_resources_are_not_hashed(tmp_path):
    p = tmp_path / "a.toml"
    p.write_text(SUITE)
    plain = [c.run_id for c in suites.load(p).expand()]
    p.write_text(SUITE + '[report]\nprimary = "compute_to:0.5"\nbaseline = "grpo"\n[resources]\nthreads = 1\n')
    s = suites.load(p)
    assert s.report.primary == "compute_to:0.5" and [c.run_id for c in s.expand()] == plain


def test_rollout_backend_string_and_lag(tmp_path, no_work, capsys):

    p = tmp_path / "v.toml"
    p.write_text(SUITE + 'rollout = "vllm"\n')
    assert {c.rollout.backend for c in suites.load(p).expand()} == {"vllm"}
    lagged = suites.load(p).expand()[0].with_overrides(["rollout.lag=2"])  # the off-policy engine reads it
    assert (lagged.rollout.backend, lagged.rollout.lag) == ("vllm", 2)


def test_regime_lr_name_and_record(tmp_path):
    p = tmp_path / "r.toml"
    p.write_text(SUITE + "[regimes.mb4]\nminibatches = 4\nlr = 5e-5\n")
    (cell,) = suites.load(p).cells
    cfg = suites.load(p).run_config(cell, "grpo", 0)
    assert cell.name == "addition/nano/mb4" and cfg.train.lr == 5e-5 and cfg.recipe.updates.minibatches == 4
    from bench.config import Regime

    assert Regime.of(cfg).record() == {"name": "mb4", "lag": 0, "epochs": 1, "minibatches": 4, "updates_per_batch": 4}
    p.write_text(SUITE + "[regimes.mb4]\nlr = 5e-5\n[overrides.grpo]\n\"train.lr\" = 1e-3\n")
    with pytest.raises(ValueError, match=r"overrides\.grpo\.train\.lr: set by the suite's \[regimes\]"):
        suites.load(p)
    p.write_text(SUITE + "[regimes.noclip]\ngrad_clip = 0\n[overrides.grpo]\n\"train.lr\" = 3e-4\n")
    (cell,) = suites.load(p).cells
    cfg = suites.load(p).run_config(cell, "grpo", 0)
    assert cfg.train.grad_clip == 0 and cfg.train.lr == 3e-4  # the clip off; the recipe's (or tuned) lr kept
    p.write_text(SUITE + '[regimes."a b"]\nlag = 1\n')
    with pytest.raises(ValueError, match=r"regimes\.a b\.name: got 'a b'; expected a string"):
        suites.load(p)
