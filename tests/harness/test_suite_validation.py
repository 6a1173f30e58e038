"""Bad suite files fail with the file, the key and the valid choices (acceptance 5)."""
from pathlib import Path

import pytest

from bench import suite as suites

GOOD = """\
recipes = ["grpo", "dapo"]
seeds = [0, 1]
tasks = ["addition"]
scales = ["nano"]

[budget]
"addition/nano" = 2e9
"""


def write(tmp_path: Path, text: str, name: str = "bad.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def error(tmp_path: Path, text: str) -> str:
    p = write(tmp_path, text)
    with pytest.raises(ValueError) as e:
        suites.load(p)
    msg = str(e.value)
    assert msg.startswith(str(p)), msg  # every error names the file first
    return msg


def test_good_suite_loads(tmp_path):
    s = suites.load(write(tmp_path, GOOD, "good.toml"))
    assert s.name == "good" and s.recipes == ("grpo", "dapo") and s.seeds == (0, 1)
    assert [c.name for c in s.cells] == ["addition/nano"] and s.cells[0].budget.value == 2e9


def test_unknown_recipe_lists_choices_and_suggests(tmp_path):
    msg = error(tmp_path, GOOD.replace('"dapo"]', '"dapoo"]'))
    assert "recipes" in msg and "'dapoo'" in msg and "did you mean 'dapo'" in msg
    assert "grpo" in msg and "vapo" in msg  # the valid names


def test_negative_budget(tmp_path):
    msg = error(tmp_path, GOOD.replace("2e9", "-5"))
    assert "budget.addition/nano" in msg and "> 0" in msg


def test_missing_required_key(tmp_path):
    msg = error(tmp_path, GOOD.replace('seeds = [0, 1]\n', ""))
    assert "seeds" in msg and "missing required key" in msg


def test_missing_cell_budget_names_the_cell(tmp_path):
    msg = error(tmp_path, GOOD.replace('tasks = ["addition"]', 'tasks = ["addition", "chain_sum"]'))
    assert "budget.chain_sum/nano" in msg and "missing budget" in msg


def test_invalid_toml_gives_the_line(tmp_path):
    msg = error(tmp_path, GOOD + "[train]\nlr = = 3\n")
    assert "invalid TOML" in msg and "line 9" in msg and "lr = = 3" in msg


@pytest.mark.parametrize("extra, key, fragment", [
    ("[train]\nlrr = 1e-3\n", "train.lrr", "did you mean 'lr'"),
    ("[train]\nlr = \"fast\"\n", "train.lr", "got 'fast'; expected a finite number > 0"),
    ("[train]\nlr = inf\n", "train.lr", "got inf; expected a finite number > 0"),
    ("[train]\ngroup_size = 1\n", "train.group_size", "got 1; expected an integer >= 2"),
    ("[train]\ngroup_size = 2.5\n", "train.group_size", "got 2.5; expected an integer >= 2"),
    ("[resources]\nthreads = -3\n", "resources.threads", "got -3; expected an integer >= 0"),
    ("[warmstart]\nseed = 18446744073709551616\n", "warmstart.seed", "expected an integer in [0, 9223372036854775807]"),
    ("[regimes.stale]\nlag = -1\n", "regimes.stale.lag", "got -1; expected an integer >= 0"),
    ("[regimes.stale]\nepoch = 2\n", "regimes.stale.epoch", "did you mean 'epochs'"),
    ("[report]\nprimary = \"best\"\n", "report.primary", "auc, final, plateau or compute_to:ACC"),
    ("[report]\nbaseline = \"ppo\"\n", "report.baseline", "unknown recipe 'ppo'"),
    ("[train]\nprecision = \"fp16\"\n", "train.precision", "one of 'fp32', 'bf16'"),
    ("[eval]\nevery = 0.3\n", "eval.every", "got 0.3; expected 1/n"),
    ("[task_params.addition]\ndifficulty = \"extreme\"\n", "task_params.addition", "easy"),
    ("[task_params.countdown]\ndifficulty = \"easy\"\n", "task_params.countdown", "suite's tasks"),
    ("[warmstart]\ntask_params = {max_value = 99}\n", "warmstart.task_params",
     "'max_value'; choose one of: seed, test_size, holdout_frac, min_digits, max_digits (they apply to every task"),
    ("[warmstart.task_params.addition]\nmax_digit = 3\n", "warmstart.task_params.addition", "did you mean 'max_digits'"),
    ("[overrides.grpo]\n\"recipe.objective.eps_hgh\" = 0.3\n", "overrides.grpo", "eps_high"),
    ("[overrides.grpo]\n\"budget.value\" = 1e9\n", "overrides.grpo.budget", "stay matched"),
    ("[overrides.ppo]\n\"train.lr\" = 1e-3\n", "overrides.ppo", "suite's recipes"),
    ("colour = 3\n", "colour", "unknown field 'colour'; valid: recipes, seeds"),
    ("device = \"tpu\"\n", "device", "cuda"),
])
def test_bad_values_name_the_key(tmp_path, extra, key, fragment):
    top, budget = GOOD.split("[budget]")
    text = top + extra + "\n[budget]" + budget if not extra.startswith("[") else GOOD + extra
    msg = error(tmp_path, text)
    assert f": {key}:" in msg and fragment in msg, msg


def test_unknown_scale_and_task(tmp_path):
    assert "id you mean 'nano'" in error(tmp_path, GOOD.replace('["nano"]', '["nanoo"]'))
    msg = error(tmp_path, GOOD.replace('["addition"]', '["additon"]'))
    assert "tasks" in msg and "did you mean 'addition'" in msg


def test_unknown_suite_name_suggests():
    with pytest.raises(ValueError, match="did you mean 'smoke'"):
        suites.load("smok")


def test_cli_prints_one_line_error_and_exits_2(tmp_path, capsys):
    from bench.cli import main

    p = write(tmp_path, GOOD.replace("2e9", "-5"))
    assert main(["suite", str(p), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bench suite: error: {p}: budget.addition/nano:") and err.count("\n") == 1
    assert main(["suite", "smoke", "--dry-run", "--only", "recipe=grpoo"]) == 2
    assert "did you mean 'grpo'" in capsys.readouterr().err


@pytest.mark.parametrize("table, expected", [
    ('primary = "acc"', "report.primary: got 'acc'; expected auc, final, plateau or compute_to:ACC with ACC in (0, 1]"),
    ('primary = "compute_to:abc"', "report.primary: got 'compute_to:abc'; expected auc, final, plateau or compute_to:ACC"),
    ('primary = "compute_to:1.5"',
     "report.primary: got 'compute_to:1.5'; expected auc, final, plateau or compute_to:ACC with ACC in (0, 1]"),
    ('baseline = "ppo"', "report.baseline: unknown recipe 'ppo'; valid: grpo, dapo"),
    ("margin = 0", "report.margin: got 0; expected a finite number in (0, 1)"),
    ("plateau_from = 1.0", "report.plateau_from: got 1.0; expected a finite number in [0, 1)"),
    ("primary = 3", "report.primary: got 3; expected a string"),
    ("colour = 1", "report.colour: unknown field 'colour'; valid: primary, baseline, margin, plateau_from, accuracy, declared"),
])
def test_bad_report_table(tmp_path, table, expected):
    assert expected in error(tmp_path, GOOD + "\n[report]\n" + table + "\n")


def test_report_table_is_read_and_not_hashed(tmp_path):
    plain = suites.load(write(tmp_path, GOOD, "plain.toml"))
    assert plain.report.primary == "auc" and not plain.report.declared and plain.report.baseline is None
    s = suites.load(write(tmp_path, GOOD + '\n[report]\nprimary = "plateau"\nbaseline = "dapo"\nmargin = 0.01\n',
                          "declared.toml"))
    assert (s.report.primary, s.report.baseline, s.report.margin, s.report.declared) == ("plateau", "dapo", 0.01, True)
    assert [c.run_id for c in s.expand()] == [c.run_id for c in plain.expand()]


def test_log_spaced_evaluations(tmp_path):
    s = suites.load(write(tmp_path, GOOD + '\n[eval]\nspacing = "log"\npoints = 5\nfirst = 0.02\n', "log.toml"))
    fr = s.eval.fractions
    assert fr[0] == 0.0 and fr[1] == pytest.approx(0.02) and fr[-1] == 1.0 and len(fr) == 6
    assert all(b / a == pytest.approx((1 / 0.02) ** 0.25) for a, b in zip(fr[1:], fr[2:]))  # geometric
    plain = suites.load(write(tmp_path, GOOD, "plain.toml"))
    assert "spacing" not in plain.expand()[0].to_dict()["eval"]  # linear: hashed as before (same run ids)
    logged = s.expand()[0].to_dict()["eval"]
    assert logged["spacing"] == "log" and "every" not in logged and s.expand()[0].run_id != plain.expand()[0].run_id
    from bench.config import RunConfig

    assert RunConfig.from_dict(s.expand()[0].to_dict()).run_id == s.expand()[0].run_id  # round-trips
    assert "eval.spacing: got 'cubic'; expected one of 'linear', 'log'" in error(tmp_path, GOOD + '\n[eval]\nspacing = "cubic"\n')
    assert "eval.points: got 1; expected an integer in [2, 100]" in error(tmp_path, GOOD + '\n[eval]\nspacing = "log"\npoints = 1\n')
    assert "eval.first: got 0; expected a finite number in (0, 1)" in error(tmp_path, GOOD + '\n[eval]\nspacing = "log"\nfirst = 0\n')


def test_per_cell_learning_rates(tmp_path):
    text = GOOD.replace('scales = ["nano"]', 'scales = ["nano", "micro"]').replace(
        '"addition/nano" = 2e9', '"addition/nano" = 2e9\n"addition/micro" = 4e9') + '[train]\nlr = 1e-4\n[lr]\n"addition/micro" = 3e-5\n'
    s = suites.load(write(tmp_path, text, "lrs.toml"))
    assert {(c.scale, c.train.lr) for c in s.expand()} == {("nano", 1e-4), ("micro", 3e-5)}
    assert "lr.addition/mikro" in error(tmp_path, text.replace('"addition/micro" = 3e-5', '"addition/mikro" = 3e-5'))
    msg = error(tmp_path, text.replace('"addition/micro" = 3e-5', '"addition/micro" = 0'))
    assert "lr.addition/micro: got 0; expected a finite number > 0" in msg


def test_warmstart_task_params_per_task(tmp_path):
    """[warmstart.task_params.TASK]: each task's SFT data from its own part (gcd up to 99, addition up to
    3 digits); a task without a table trains on its own task_params."""
    from bench import suite as suites_mod

    text = GOOD.replace('tasks = ["addition"]', 'tasks = ["addition", "gcd", "chain_sum"]').replace(
        '"addition/nano" = 2e9', '"addition/nano" = 2e9\n"gcd/nano" = 2e9\n"chain_sum/nano" = 2e9') + \
        "[task_params.gcd]\nmax_value = 999\n[warmstart.task_params.gcd]\nmax_value = 99\n" \
        "[warmstart.task_params.addition]\nmax_digits = 3\n"
    s = suites_mod.load(write(tmp_path, text))
    ws = {c.task: s.run_config(c, s.recipes[0], 0).warmstart for c in s.cells}
    assert ws["gcd"].task_params == {"max_value": 99} and ws["addition"].task_params == {"max_digits": 3}
    assert ws["chain_sum"].task_params == {}
    assert ws["gcd"].sft_params({"max_value": 999}) == {"max_value": 99}
