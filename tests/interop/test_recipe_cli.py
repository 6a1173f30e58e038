"""`bench recipe`: imports name every unmodelled field on stderr and still succeed, bad input is one line
naming the file and the field, exports name the part a library cannot express, and an import written
with --write runs as `--recipe file:PATH`. No TRL or verl needed: the mapping is ours."""
import json
from pathlib import Path

import pytest
import yaml

import algorithms
from bench import cli
from bench.interop import load_variant_file
from bench.interop.trl import from_trl, to_trl
from bench.interop.verl import from_verl, to_verl


def run(capsys, *argv):
    rc = cli.main(["recipe", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_unmodelled_field_is_named_on_stderr_and_the_import_succeeds(tmp_path, capsys):
    f = tmp_path / "grpo.yaml"
    f.write_text("loss_type: grpo\nbeta: 0.04\nsync_ref_model: true\nvllm_gpu_memory_utilization: 0.5\n"
                 "output_dir: out\nnum_generations: 4\n")
    rc, out, err = run(capsys, "--from-trl", str(f))
    assert rc == 0
    lines = err.strip().splitlines()
    assert lines == [f"bench recipe: unmodelled: {f}: sync_ref_model = True: no part or setting of ours expresses it"]
    assert "vllm_gpu_memory_utilization: throughput" in out and "output_dir" in out  # ignored, listed
    assert "train.group_size=4" in out and "kl(coef=0.04, estimator='k3', placement='loss', importance=True)" in out


@pytest.mark.parametrize("text, field, valid", [
    ("loss_type: grpoo\n", "loss_type", "valid: grpo, bnpo, dr_grpo, dapo, luspo, cispo, sapo, vespo"),
    ("beta: lots\n", "beta", "expected a number"),
    ("importance_sampling_level: seq\n", "importance_sampling_level", "valid: token, sequence"),
    ("loss_type: cispo\nimportance_sampling_level: sequence\n", "importance_sampling_level", "modelled for loss_type"),
    ("scale_rewards: maybe\n", "scale_rewards", "valid: group, batch, none"),
    ("loss_type: dapo\ndelta: 1.1\n", "delta", "must be > 1 + epsilon_high"),
])
def test_bad_trl_field_is_one_line_naming_file_field_and_choices(tmp_path, capsys, text, field, valid):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    rc, out, err = run(capsys, "--from-trl", str(f))
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"{f}: {field}:" in err and valid in err


@pytest.mark.parametrize("name, text, what", [
    ("c.yaml", "loss_type: [grpo\n", "not valid YAML"),
    ("c.json", '{"loss_type": "grpo",}', "not valid JSON"),
    ("c.yaml", "- loss_type\n- grpo\n", "expected a table"),
])
def test_malformed_file_is_one_line(tmp_path, capsys, name, text, what):
    f = tmp_path / name
    f.write_text(text)
    rc, _, err = run(capsys, "--from-trl", str(f))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and str(f) in err and what in err
    rc, _, err = run(capsys, "--from-trl", str(tmp_path / "absent.yaml"))
    assert rc == 2 and "no such file" in err


def test_trl_args_and_file_agree(tmp_path, capsys):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"loss_type": "dr_grpo", "scale_rewards": False, "beta": 0, "max_completion_length": 64}))
    a = from_trl(json.loads(f.read_text()), "f").recipe
    b = from_trl(cli_args := __import__("bench.interop", fromlist=["parse_cli_args"]).parse_cli_args(
        "--loss_type dr_grpo --scale_rewards false --beta 0 --max_completion_length=64"), "args").recipe
    assert cli_args["max_completion_length"] == 64 and a == b
    assert a.aggregation.mode == "seq_mean_token_sum_norm" and a.advantage.scale == "none"
    rc, _, err = run(capsys, "--from-trl-args", "loss_type dapo")
    assert rc == 2 and "--from-trl-args: 'loss_type': expected --field value" in err


def test_write_gives_a_variant_that_runs_as_file_recipe(tmp_path, capsys):
    f = tmp_path / "run.yaml"
    f.write_text("loss_type: dapo\nepsilon_high: 0.28\nmask_truncated_completions: true\n")
    out_file = tmp_path / "my_trl_run.toml"
    rc, out, _ = run(capsys, "--from-trl", str(f), "--write", str(out_file))
    assert rc == 0 and "[variants.my_trl_run]" in out_file.read_text()
    expected = from_trl(yaml.safe_load(f.read_text()), "f").recipe
    assert load_variant_file(out_file) == expected
    from bench.config import Budget, RunConfig

    cfg = RunConfig(recipe=load_variant_file(out_file), task="addition", scale="nano", budget=Budget.parse("2steps"))
    assert cfg.recipe.id == expected.id
    bad = tmp_path / "bad.toml"
    bad.write_text('[variants.x]\nbase = "grpo"\n"objective.eps_hihg" = 0.3\n')
    with pytest.raises(algorithms.InputError, match=r"bad.toml: .*eps_hihg"):
        load_variant_file(bad)


def test_an_import_equal_to_a_registered_recipe_says_so(capsys, tmp_path):
    fields = {k: v for k, v in _flat(to_verl(algorithms.get("gspo"))[0]).items()}
    f = tmp_path / "v.yaml"
    f.write_text(yaml.safe_dump(fields))
    rc, out, _ = run(capsys, "--from-verl", str(f), "--write", str(tmp_path / "same.toml"))
    assert rc == 0 and "closest registered recipe: gspo (identical)" in out
    assert load_variant_file(tmp_path / "same.toml") == algorithms.get("gspo")


def _flat(tree, prefix=""):
    out = {}
    for k, v in tree.items():
        key = f"{prefix}.{k}" if prefix else k
        out.update(_flat(v, key) if isinstance(v, dict) else {key: v})
    return out


def test_verl_dotted_and_nested_keys_read_alike(tmp_path, capsys):
    nested = tmp_path / "n.yaml"
    nested.write_text("algorithm:\n  adv_estimator: grpo\nactor_rollout_ref:\n  actor:\n    clip_ratio_high: 0.28\n"
                      "    ppo_micro_batch_size_per_gpu: 2\n    policy_loss:\n      loss_mode: cispo\nmystery: 1\n")
    dotted = tmp_path / "d.yaml"
    dotted.write_text("algorithm.adv_estimator: grpo\n+actor_rollout_ref.actor.clip_ratio_high: 0.28\n"
                      "actor_rollout_ref.actor.policy_loss.loss_mode: cispo\n")
    rc, out, err = run(capsys, "--from-verl", str(nested))
    assert rc == 0 and "mystery = 1" in err and "ppo_micro_batch_size_per_gpu: throughput" in out
    assert "cispo(ratio_max=1.28, ratio_min=0.8)" in out
    rc2, out2, _ = run(capsys, "--from-verl", str(dotted))
    assert rc2 == 0 and out2.splitlines()[1:4] == out.splitlines()[1:4]
    bad = tmp_path / "b.yaml"
    bad.write_text("actor_rollout_ref.actor.policy_loss.loss_mode: topr\n")
    rc, _, err = run(capsys, "--from-verl", str(bad))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert f"{bad}: actor_rollout_ref.actor.policy_loss.loss_mode: unknown value 'topr'; valid: vanilla" in err


@pytest.mark.parametrize("lib", ["trl", "verl"])
def test_export_names_the_part_the_library_cannot_express(capsys, lib):
    rc, out, err = run(capsys, "topr", "--to", lib)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "recipe topr: objective = topr(ratio='full'):" in err and "cannot express it" in err


def test_export_prints_a_config_the_import_reads_back(capsys):
    rc, out, _ = run(capsys, "cispo", "--to", "trl")
    assert rc == 0
    fields = yaml.safe_load(out)
    assert fields["loss_type"] == "cispo" and fields["epsilon_high"] == 5.0
    assert from_trl(fields, "t").recipe.objective == algorithms.get("cispo").objective
    rc, out, _ = run(capsys, "dr_grpo", "--to", "verl", "--max-new-tokens", "64")
    tree = yaml.safe_load(out)
    assert tree["actor_rollout_ref"]["actor"]["loss_scale_factor"] == 64
    overrides = next(line for line in out.splitlines() if line.startswith("#   ")).split()[1:]
    assert "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm" in overrides
    back = from_verl(_flat(tree), "v")
    assert back.recipe.replace(name="dr_grpo") == algorithms.get("dr_grpo") and back.settings["train.max_new_tokens"] == 64


def test_every_recipe_exports_or_names_a_part():
    for name in algorithms.names():
        for export in (to_trl, to_verl):
            try:
                export(algorithms.get(name))
            except algorithms.InputError as e:
                assert str(e).startswith(f"recipe {name}: ") and "cannot express" in str(e)


def test_recipe_needs_one_source(capsys):
    rc, _, err = run(capsys)
    assert rc == 2 and "give a recipe NAME" in err
    rc, _, err = run(capsys, "grpo", "--from-trl-args", "--beta 0")
    assert rc == 2 and "give one of" in err
    rc, _, err = run(capsys, "gpro")
    assert rc == 2 and "grpo" in err


def test_a_suite_names_an_imported_recipe_by_file(tmp_path, capsys):
    trl_cfg = tmp_path / "run.yaml"
    trl_cfg.write_text("loss_type: dapo\nepsilon_high: 0.28\n")
    assert run(capsys, "--from-trl", str(trl_cfg), "--write", str(tmp_path / "my_trl_run.toml"))[0] == 0
    from bench import suite as suites

    text = (Path(suites.__file__).parents[1] / "suites" / "smoke.toml").read_text()
    suite_file = tmp_path / "mine.toml"
    suite_file.write_text(text.replace('recipes = ["grpo", "dapo"]', 'recipes = ["grpo", "file:my_trl_run.toml"]'))
    s = suites.load(suite_file)
    assert list(s.recipes) == ["grpo", "my_trl_run"]
    assert s.recipe("my_trl_run") == from_trl({"loss_type": "dapo", "epsilon_high": 0.28}, "f").recipe
    suite_file.write_text(text.replace('recipes = ["grpo", "dapo"]', 'recipes = ["grpo", "file:absent.toml"]'))
    with pytest.raises(algorithms.InputError, match=r"recipes: file:absent.toml: "):
        suites.load(suite_file)
