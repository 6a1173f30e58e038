"""A suite's committed tuned settings (suites/tuned/NAME.toml) are its settings: loading the suite
applies them, `--defaults` ignores them, and the report's Summary says which it ran (issue 23)."""
import pytest

from bench import suite as suites
from bench.report.sections.summary import settings_text

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
    text = settings_text(s)
    assert "**tuned**" in text and "suites/tuned/mine.toml, committed beside the suite" in text and "grpo" in text
    assert "untuned" in settings_text(plain)


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


def test_a_tuned_value_the_cells_regime_sets_is_refused(suite_dir):
    """A regime's settings are applied last, so a tuned recipe.updates.* (or a regime's grad_clip) in a
    regime cell would never act: the file is refused at load, naming the path, the cell and what the
    regime sets."""
    (suite_dir / "mine.toml").write_text(SUITE + "[regimes.mb4]\nminibatches = 4\n[regimes.noclip]\ngrad_clip = 0\n")
    tuned = suite_dir / "tuned" / "mine.toml"
    tuned.write_text('[overrides."addition/nano/mb4".grpo]\n"recipe.updates.minibatches" = 2\n')
    with pytest.raises(ValueError, match=r"tuned/mine.toml: addition/nano/mb4 grpo: 'recipe.updates.minibatches' is "
                                         r"set by the cell's regime \(mb4\).*never act.*recipe.updates.epochs"):
        suites.load(suite_dir / "mine.toml")
    tuned.write_text('[overrides.dapo]\n"train.grad_clip" = 0.5\n')
    with pytest.raises(ValueError, match=r"'train.grad_clip' is set by the cell's regime \(noclip\)"):
        suites.load(suite_dir / "mine.toml")
    tuned.write_text('[overrides.dapo]\n"train.lr" = 2e-4\n')  # not a regime's: applied in every cell
    s = suites.load(suite_dir / "mine.toml")
    assert {s.run_config(c, "dapo", 0).train.lr for c in s.cells} == {2e-4}


def test_the_tuning_summary_breaks_ties_as_bench_tune_does():
    """`bench tune --summary` names the trial `bench tune` chose: on a tie of the objective, the smaller
    setting (study.tie_order), not the earlier trial; best_value is the objective, best_acc its final accuracy."""
    import polars as pl

    from bench.tune import costs

    trials = pl.DataFrame({"study": ["s/a"] * 3 + ["s/b"], "trial": [0, 1, 2, 0],
                           "params": ['{"train.lr": 0.0004}', '{"train.lr": 0.0001}', '{"train.lr": 5e-05}',
                                      '{"train.lr": 0.0001}'],
                           "value": [0.52, 0.52, 0.50, 0.40], "acc": [0.60, 0.58, 0.55, 0.45],
                           "complete": [True, True, True, True]})
    best = costs.best_trials(trials).sort("study")
    assert best["best_trial"].to_list() == [1, 0] and best["best_value"].to_list() == [0.52, 0.40]
    assert best["best_acc"].to_list() == [0.58, 0.45]
    incomplete = trials.with_columns(pl.Series("complete", [False, True, True, True]))
    assert costs.best_trials(incomplete).sort("study")["best_trial"].to_list() == [1, 0]
