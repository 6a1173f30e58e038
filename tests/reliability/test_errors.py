"""One error type for what a user can fix (issue 26, item 1): algorithms.errors.InputError, and
ConfigError for a config field. The CLI turns those, and only those, into one line with exit 2; any
other exception (a ValueError from a bug included) keeps its traceback."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import algorithms
from algorithms import metrics
from algorithms.errors import ConfigError, InputError, MissingInput
from bench import cli, results
from bench.engine.vllm_backend import VLLMNotInstalled
from bench.suite import SuiteError

REPO = Path(__file__).resolve().parents[2]


def _raising(exc: BaseException):
    def cmd(args):
        raise exc
    return cmd


@pytest.mark.parametrize("exc, line", [
    (InputError("--only recipe=nope: unknown recipe 'nope'"), "bench list: error: --only recipe=nope: unknown recipe 'nope'"),
    (ConfigError("train.lr: got 0; expected a finite number > 0"), "bench list: error: train.lr: got 0; expected a finite number > 0"),
    (MissingInput("suite file x.toml does not exist"), "bench list: error: suite file x.toml does not exist"),
    (SuiteError("s.toml", "seeds", "duplicates in [0, 0]"), "bench list: error: s.toml: seeds: duplicates in [0, 0]"),
])
def test_an_input_error_is_one_line_and_exit_2(monkeypatch, capsys, exc, line):
    monkeypatch.setattr(cli, "_cmd_list", _raising(exc))
    assert cli.main(["list", "recipes"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == line and "Traceback" not in err


@pytest.mark.parametrize("exc", [ValueError("boom"), LookupError("boom"), KeyError("boom"), FileNotFoundError("boom"),
                                 RuntimeError("boom")])
def test_any_other_error_propagates_with_its_traceback(monkeypatch, capsys, exc):
    monkeypatch.setattr(cli, "_cmd_list", _raising(exc))
    with pytest.raises(type(exc), match="boom"):
        cli.main(["list", "recipes"])
    assert "error: boom" not in capsys.readouterr().err  # not reworded into a one-liner


def test_a_bug_prints_its_traceback_and_exits_1():
    """As a user sees it: `bench` with a command that hits a bug (a plain ValueError)."""
    code = ("import sys\nfrom bench import cli\n"
            "def boom(args):\n    raise ValueError('boom: an internal invariant')\n"
            "cli._cmd_list = boom\nsys.exit(cli.main(['list', 'suites']))\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert "Traceback (most recent call last)" in p.stderr and "ValueError: boom: an internal invariant" in p.stderr


def test_run_refused_and_interrupt_keep_their_handling(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_cmd_list", _raising(cli.RunRefused("run abc failed: RuntimeError: x", code=1)))
    assert cli.main(["list", "recipes"]) == 1
    assert capsys.readouterr().err.strip() == "bench list: error: run abc failed: RuntimeError: x"
    monkeypatch.setattr(cli, "_cmd_list", _raising(KeyboardInterrupt()))
    assert cli.main(["list", "recipes"]) == 130


def test_expected_is_input_error_only():
    """A failed training run's exit status: 2 when its error is bad input, else 1 (cli._run_locked)."""
    assert cli._expected(ConfigError("x")) and cli._expected(results.CorruptRun("x"))
    assert not cli._expected(ValueError("x")) and not cli._expected(LookupError("x")) and not cli._expected(OSError("x"))


@pytest.mark.parametrize("cls", [InputError, ConfigError, MissingInput, SuiteError, algorithms.UnknownRecipeError,
                                 results.CorruptRun, results.UndeclaredMetric, metrics.MetricError,
                                 metrics.UnknownMetricError, VLLMNotInstalled])
def test_every_user_fixable_error_class_is_an_input_error(cls):
    assert issubclass(cls, InputError) and issubclass(cls, ValueError)  # pytest.raises(ValueError) still catches it


def test_error_classes_keep_their_other_bases():
    assert issubclass(algorithms.UnknownRecipeError, ConfigError) and issubclass(algorithms.UnknownRecipeError, LookupError)
    assert issubclass(metrics.UnknownMetricError, LookupError)
    assert issubclass(MissingInput, FileNotFoundError)
    assert issubclass(SuiteError, ConfigError)


def test_config_error_moved_and_re_exported():
    from bench.config import TrainConfig
    from bench.typed import ConfigError as TypedConfigError

    assert TypedConfigError is ConfigError is algorithms.ConfigError
    with pytest.raises(ConfigError, match="train.lr: got 0") as e:
        TrainConfig(lr=0)
    err, model = e.value.source  # pydantic's report, for re-wording a nested section with its full path
    assert model is TrainConfig and err.errors()


def _rollouts(B=2, T=3, mask_T=3):
    return algorithms.Rollouts(rewards=torch.zeros(B), group=torch.zeros(B, dtype=torch.long),
                               mask=torch.ones(B, mask_T), logp_old=torch.zeros(B, T), max_new_tokens=T)


def _sites():
    """(what, callable) for user-input raise sites across the layers: each must raise an InputError."""
    from bench import preflight, rewards, suite as suites, tasks
    from bench.config import Budget, check_device
    from bench.engine import trackers
    from bench.tasks import files
    from bench.tune.settings import TuneSettings
    from bench.tune.storage import open_storage

    return [
        ("unknown recipe", lambda: algorithms.get("grop")),
        ("part range", lambda: algorithms.PPOClip(eps_low=-1.0)),
        ("unknown part type", lambda: algorithms.serialize.from_dict({"type": "nope"}, "recipe")),
        ("unknown task", lambda: tasks.get("nope")),
        ("unknown difficulty", lambda: tasks.get("addition", difficulty="impossible")),
        ("unknown task parameter", lambda: tasks.get("addition", nope=1)),
        ("task parameter range", lambda: tasks.get("gcd", min_value=5, max_value=5)),
        ("task needs data", lambda: tasks.get("gsm8k")),
        ("missing data file", lambda: files.load("/nonexistent/train.jsonl")),
        ("budget", lambda: Budget.parse("lots")),
        ("device", lambda: check_device("gpu")),
        ("reward", lambda: rewards.check({"nope": 1.0})),
        ("unknown suite", lambda: suites.load("no-such-suite")),
        ("missing suite file", lambda: suites.load("/nonexistent/s.toml")),
        ("--only", lambda: suites.parse_filters(["recipe=nope"], {"recipe": ["grpo"]}, "in suite x")),
        ("results directory", lambda: preflight.check_readable("/nonexistent/results", "results directory")),
        ("tracker", lambda: trackers.check("wandb-nope")),
        ("tune settings", lambda: TuneSettings(trials=0)),
        ("storage", lambda: open_storage("nosuchdb://u@h/db")),
        ("undeclared metric", lambda: metrics.get("policy/never_declared")),
    ]


@pytest.mark.parametrize("what", [w for w, _ in _sites()])
def test_user_input_sites_raise_input_errors(what):
    fn = dict(_sites())[what]
    with pytest.raises(InputError) as e:
        fn()
    assert str(e.value) and "\n" not in str(e.value).strip()


def test_a_garbage_json_file_the_user_named_is_an_input_error_naming_it(tmp_path):
    """A corrupt file is named (JSONDecodeError is a plain ValueError: left alone it would be a traceback)."""
    from bench import lmeval, publish

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{not json")
    with pytest.raises(InputError, match=r"m/config.json: unreadable model config"):
        lmeval.resolve(str(tmp_path / "m"), root=tmp_path)
    run = tmp_path / "rep" / "data" / "runs" / "abc123def456"
    run.mkdir(parents=True)
    (run / "run.json").write_text("{oops")
    with pytest.raises(results.CorruptRun, match=r"abc123def456/run.json: unreadable run record"):
        publish.published_runs(tmp_path / "rep")


@pytest.mark.parametrize("what, fn", [
    ("a shape mismatch", lambda: _rollouts(mask_T=4)),
    ("a part registered twice", lambda: algorithms.parts.part("ppo_clip")(type("Dup", (algorithms.Part,), {}))),
    ("an engine contract: a KL term without reference log-probs", lambda: algorithms.kl.require_reference(None)),
])
def test_internal_invariants_stay_plain_value_errors(what, fn):
    with pytest.raises(ValueError) as e:
        fn()
    assert not isinstance(e.value, InputError), what
