"""A suite's committed tuned settings (suites/tuned/NAME.toml) are its settings: loading the suite
applies them, `--defaults` ignores them, and the report's Summary says which it ran (issue 23)."""
import pytest

from bench import suite as suites
from bench.report.sections import _settings_text

SUITE = """recipes = ["grpo", "dapo"]
seeds = 2
tasks = ["addition"]
scales = ["nano"]
budget = "2steps"
"""


@pytest.fixture
def suite_dir(tmp_path):
    (tmp_path / "mine.toml").write_text(SUITE)
    (tmp_path / "tuned").mkdir()
    return tmp_path


def test_the_committed_tuned_file_is_applied_by_load(suite_dir):
    (suite_dir / "tuned" / "mine.toml").write_text('[overrides."addition/nano".grpo]\n"train.lr" = 3e-4\n')
    s = suites.load(suite_dir / "mine.toml")
    assert s.tuned_from == suite_dir / "tuned" / "mine.toml"
    cfg = s.run_config(s.cells[0], "grpo", 0)
    assert cfg.train.lr == 3e-4 and cfg.tags["tuned"] is True
    plain = suites.load(suite_dir / "mine.toml", tuned=False)
    default_lr = plain.run_config(plain.cells[0], "grpo", 0).train.lr
    assert default_lr != 3e-4 and plain.tuned_from is None
    dapo = s.run_config(s.cells[0], "dapo", 0)
    assert dapo.train.lr == default_lr and "tuned" not in dapo.tags
    text = _settings_text(s)
    assert "**tuned**" in text and "suites/tuned/mine.toml, committed beside the suite" in text and "grpo" in text
    assert "untuned" in _settings_text(plain)


def test_a_bad_committed_tuned_file_names_itself(suite_dir):
    (suite_dir / "tuned" / "mine.toml").write_text('[overrides."addition/nano".grpoo]\n"train.lr" = 3e-4\n')
    with pytest.raises(ValueError, match=r"tuned/mine.toml: unknown recipe 'grpoo'.*did you mean 'grpo'"):
        suites.load(suite_dir / "mine.toml")
    (suite_dir / "tuned" / "mine.toml").write_text('[overrides.grpo]\n"eval.every" = 0.5\n')
    with pytest.raises(ValueError, match=r"only recipe\.\* and train\.\* paths"):
        suites.load(suite_dir / "mine.toml")


def test_math_small_ships_its_tuned_lrs_and_defaults_ignore_them():
    """suites/tuned/math-small.toml (issue 23) is applied on load; --defaults (tuned=False) runs at the
    suite's own lr. Only the recipes whose tuned lr differs from 1e-4 get new run ids."""
    path = suites.tuned_beside(suites.resolve("math-small"))
    assert path.is_file()
    tuned, default = suites.load("math-small"), suites.load("math-small", tuned=False)
    assert tuned.tuned_from == path and default.tuned_from is None
    lrs = {c.recipe.name: c.train.lr for c in tuned.expand()}
    assert lrs == {"grpo": 1e-4, "dr_grpo": 2e-4, "dapo": 4e-4, "gspo": 1e-4}
    assert {c.train.lr for c in default.expand()} == {1e-4}
    same = {c.recipe.name for c, d in zip(tuned.expand(), default.expand()) if c.run_id == d.run_id}
    assert same == {"grpo", "gspo"}
