import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from bench import cli, models, tasks
from bench.warmstart import STEPS, WarmStartConfig, demonstration, warm_start, warmstart_key

CFG = WarmStartConfig(steps=6, eval_examples=10)


def test_second_warm_start_is_a_cache_hit(tmp_path):
    task, scale = tasks.get("addition", difficulty="easy"), models.get("nano")
    first = warm_start(task, scale, CFG, cache=tmp_path)
    second = warm_start(task, scale, CFG, cache=tmp_path)
    assert not first.cache_hit and second.cache_hit
    assert first.path == second.path and first.key == second.key
    assert second.accuracy == first.accuracy and 0.0 <= first.accuracy <= 1.0
    meta = json.loads((first.path / "warmstart.json").read_text())
    assert meta["config"]["steps"] == 6 and meta["task"] == "addition"
    # saved in the standard format: transformers loads model and tokenizer unchanged
    model = AutoModelForCausalLM.from_pretrained(first.path)
    tok = AutoTokenizer.from_pretrained(first.path)
    ids = torch.tensor([tok("<|user|>1+2=\n<|assistant|>", add_special_tokens=False)["input_ids"]])
    assert torch.equal(model(input_ids=ids).logits, first.load().model(input_ids=ids).logits)
    assert not list(tmp_path.glob("warmstart/.*"))  # no temp dirs left behind


def test_key_changes_with_every_input():
    task, scale = tasks.get("addition", difficulty="easy"), models.get("nano")
    base = warmstart_key(task, scale, CFG)
    assert warmstart_key(task, scale, CFG) == base
    assert warmstart_key(task, scale, WarmStartConfig(steps=7, eval_examples=10)) != base
    assert warmstart_key(tasks.get("addition", difficulty="hard"), scale, CFG) != base
    assert warmstart_key(task, models.get("micro"), CFG) != base
    assert warmstart_key(tasks.get("addition", difficulty="easy", seed=1), scale, CFG) != base


def test_direct_frac_mixes_bare_answers_into_the_demonstrations():
    examples = tasks.get("addition").split("train", n=2000)
    assert all(demonstration(e, CFG) == e.solution for e in examples)
    mixed = WarmStartConfig(direct_frac=0.6)
    demos = [demonstration(e, mixed) for e in examples]
    bare = [d for d, e in zip(demos, examples) if d != e.solution]
    assert all(d == f"#### {e.answer}" for d, e in zip(demos, examples) if d in bare)
    assert 0.55 < len(bare) / len(demos) < 0.65  # a seeded hash of the prompt: about the asked share
    assert demos == [demonstration(e, mixed) for e in examples]  # deterministic
    # the same prompts are bare whatever the pool; a different seed picks others
    assert [demonstration(e, mixed) for e in examples[:50]] == demos[:50]
    assert [demonstration(e, WarmStartConfig(direct_frac=0.6, seed=1)) for e in examples] != demos
    # as many worked demonstrations are seen as in the all-worked warm start: steps / (1 - frac)
    assert mixed.resolve("addition", "nano").steps == round(STEPS["addition"]["nano"] / 0.4)
    task, scale = tasks.get("addition", difficulty="easy"), models.get("nano")
    assert warmstart_key(task, scale, WarmStartConfig(steps=6, eval_examples=10, direct_frac=0.5)) != \
        warmstart_key(task, scale, CFG)
    with pytest.raises(ValueError, match="direct_frac"):
        WarmStartConfig(direct_frac=1.0)


def test_default_steps_come_from_the_table():
    from bench.warmstart import STEPS

    resolved = WarmStartConfig().resolve("addition", "nano")
    assert resolved.steps == STEPS["addition"].get("nano", STEPS["addition"].get("*"))
    assert WarmStartConfig(steps=5).resolve("addition", "nano").steps == 5


def test_cli_warmstart_prints_accuracy_time_and_path(tmp_path, capsys):
    rc = cli.main(["warmstart", "--task", "addition", "--scale", "nano", "--steps", "4", "--cache", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "held-out greedy accuracy:" in out and "time:" in out and str(tmp_path) in out


@pytest.mark.parametrize("argv, needle", [
    (["warmstart", "--task", "additon", "--scale", "nano"], "addition"),
    (["warmstart", "--task", "addition", "--scale", "mikro"], "micro"),
    (["run", "--recipe", "grpoo", "--task", "addition", "--scale", "nano", "--budget", "1steps"], "grpo"),
    (["run", "--recipe", "grpo", "--task", "addition", "--scale", "nano", "--budget", "-5"], "budget"),
    (["run", "--recipe", "grpo", "--task", "addition", "--scale", "nano", "--budget", "1steps",
      "--set", "train.lrr=1"], "lr"),
    (["warmstart", "--task", "gsm8k", "--scale", "nano"], "path"),
])
def test_cli_bad_input_one_clear_line(argv, needle, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
