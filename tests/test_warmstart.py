import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import algorithms
from bench import cli, models, tasks
from bench.warmstart import WarmStartConfig, demonstration, warm_start, warmstart_key

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
    assert mixed.resolve("addition", "nano").steps == round(800 / 0.4)
    task, scale = tasks.get("addition", difficulty="easy"), models.get("nano")
    assert warmstart_key(task, scale, WarmStartConfig(steps=6, eval_examples=10, direct_frac=0.5)) != \
        warmstart_key(task, scale, CFG)
    with pytest.raises(ValueError, match="direct_frac"):
        WarmStartConfig(direct_frac=1.0)


def test_default_steps_come_from_the_tasks_table():
    # the values the published suites' warm starts were trained with (Task.warm_start_steps)
    assert WarmStartConfig().resolve("addition", "nano").steps == 800
    assert WarmStartConfig().resolve("addition", "small").steps == 450  # its "*" entry
    assert WarmStartConfig().resolve("chain_sum", "micro").steps == 800
    assert WarmStartConfig().resolve("gcd", "nano").steps == 300  # no table: the base class's
    assert WarmStartConfig(steps=5).resolve("addition", "nano").steps == 5


def test_a_task_without_a_default_steps_entry_is_refused():
    from bench.tasks import registry
    from bench.tasks.addition import Addition

    class NoDefault(Addition):
        name = "no_default_steps"
        warm_start_steps = {"nano": 10}

    with pytest.raises(ValueError, match="warm_start_steps needs a '\\*' entry"):
        registry.register(NoDefault)
    assert "no_default_steps" not in tasks.names()


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


# ---------------------------------------------------------------- warm starts identified by what they are
def test_source_digest_ignores_comments_and_docstrings_but_not_code():
    from bench.warmstart import source_digest

    base = 'def f(x):\n    """Doc."""\n    return x * 1.0  # scale\n'
    assert source_digest(base) == source_digest('def f(x):\n    """Other doc."""\n\n    return x*1.0\n')
    assert source_digest(base) == source_digest('def f(x):\n    return x * 1.0\n')
    assert source_digest(base) != source_digest('def f(x):\n    """Doc."""\n    return x * 0.5\n')


def test_a_change_to_the_sft_numerics_gives_a_new_key(monkeypatch):
    """Acceptance: code that would train other weights cannot reuse a cached checkpoint. The edit
    is one constant of the SFT loop (the gradient-clipping norm); a comment leaves the key alone."""
    from bench import warmstart

    task, scale = tasks.get("addition", difficulty="easy"), models.get("nano")
    sources, versions = warmstart.sft_sources(), warmstart.sft_versions()
    assert warmstart.fingerprint(sources, versions) == warmstart.code_fingerprint()
    base = warmstart_key(task, scale, CFG)
    line = "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"
    assert sources["bench/warmstart.py"].count(line) == 1
    numerics = {**sources, "bench/warmstart.py": sources["bench/warmstart.py"].replace(line, line.replace("1.0", "0.5"))}
    comment = {**sources, "bench/warmstart.py": sources["bench/warmstart.py"].replace(line, line + "  # clip")}
    for variant, same in ((numerics, False), (comment, True)):
        monkeypatch.setattr(warmstart, "code_fingerprint", lambda v=variant: warmstart.fingerprint(v, versions))
        assert (warmstart_key(task, scale, CFG) == base) is same
    # a library upgrade is a change of numerics too, and so is the kind of device
    monkeypatch.setattr(warmstart, "code_fingerprint", lambda: warmstart.fingerprint(sources, {**versions, "torch": "9.9"}))
    assert warmstart_key(task, scale, CFG) != base
    monkeypatch.undo()
    assert warmstart_key(task, scale, CFG, device="cuda") != base == warmstart_key(task, scale, CFG, device="cpu")


def test_the_fingerprint_covers_every_file_a_warm_start_executes(tmp_path):
    """Trace a warm start (SFT, evaluation, save): every file of ours that runs is fingerprinted."""
    import sys
    from pathlib import Path

    import bench
    from bench import warmstart

    repo = Path(bench.__file__).resolve().parents[1]
    ours = (repo / "bench", repo / "algorithms")
    ran: set[str] = set()

    def profile(frame, event, arg):
        ran.add(frame.f_code.co_filename)

    task = tasks.get("addition", difficulty="easy")
    sys.setprofile(profile)
    try:
        warm_start(task, models.get("nano"), WarmStartConfig(steps=2, eval_examples=4, direct_frac=0.5), cache=tmp_path)
    finally:
        sys.setprofile(None)
    executed = {Path(f).resolve() for f in ran if Path(f).resolve().is_relative_to(ours[0])
                or Path(f).resolve().is_relative_to(ours[1])}
    assert Path(warmstart.__file__).resolve() in executed  # the trace saw our code at all
    missing = executed - set(warmstart.sft_files())
    assert not missing, f"on the SFT path but not in SFT_MODULES: {sorted(str(m.relative_to(repo)) for m in missing)}"


def test_weights_hash_is_recorded_and_checked_on_every_cache_hit(tmp_path):
    from bench.warmstart import weights_sha256

    task, scale = tasks.get("addition", difficulty="easy"), models.get("nano")
    first = warm_start(task, scale, CFG, cache=tmp_path)
    meta = json.loads((first.path / "warmstart.json").read_text())
    assert first.sha256 == meta["sha256"] == weights_sha256(first.path) and len(first.sha256) == 64
    assert meta["code"] and meta["device"] == "cpu"
    assert warm_start(task, scale, CFG, cache=tmp_path).sha256 == first.sha256
    weights = next(first.path.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit in the last weight
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"{first.path}.*modified or damaged.*delete that directory"):
        warm_start(task, scale, CFG, cache=tmp_path)


def test_warmstart_task_params_draw_the_sft_data_from_part_of_the_task(tmp_path):
    """warmstart.task_params: the SFT demonstrations come from the task with these parameters over the
    run's (gcd up to 99 for a run up to 999). The warm start is the one a run of that smaller task
    trains (one cache key: the same data, the same checkpoint); the run id stays where it is unset
    (a LATER field); the trainer and the suite planner both ask for that warm start."""
    from bench.config import RunConfig
    from bench.engine.trainer import Trainer
    from bench.harness.plan import cfg_warmstart_key

    def cfg(task_params, ws_params=None):
        ws = {"steps": 6, "eval_examples": 10, **({"task_params": ws_params} if ws_params is not None else {})}
        return RunConfig(recipe=algorithms.get("grpo"), task="gcd", scale="nano", budget="2steps",
                         task_params=task_params, warmstart=ws)

    big, small = cfg({"max_value": 999}), cfg({"max_value": 99})
    part = cfg({"max_value": 999}, {"max_value": 99})
    assert cfg({"max_value": 999}, {}).run_id == big.run_id  # unset: the earlier id
    assert part.run_id != big.run_id and "task_params" in part.to_dict()["warmstart"]
    assert cfg_warmstart_key(part) == cfg_warmstart_key(small) != cfg_warmstart_key(big)
    asked = []

    def fake_warm_start(task, scale, ws_cfg, **kw):
        asked.append(task.config.max_value)
        raise RuntimeError("stop after the warm start is asked for")

    with pytest.raises(RuntimeError, match="stop after"):
        Trainer(part, start=fake_warm_start, root=tmp_path)._setup()
    assert asked == [99]
    with pytest.raises(ValueError, match="max_value"):  # a bad SFT parameter names the task's field
        Trainer(cfg({"max_value": 999}, {"max_valu": 99}), start=fake_warm_start, root=tmp_path)._setup()


def test_stop_at_stops_at_the_first_check_that_reaches_the_level(tmp_path, monkeypatch):
    """warmstart.stop_at: every check_every steps a check on train problems outside the pool; the
    first one with pass@1 >= stop_at and format rate >= 0.95 ends SFT there (checks scripted here:
    pass@1 0.1, then 0.3 at step 10 of 40; a check that reaches pass@1 with too few well-formed
    answers does not stop it)."""
    import bench.warmstart as ws_mod

    real = ws_mod.evaluate
    script = iter([(0.1, 1.0), (0.6, 0.9), (0.3, 0.96), (0.9, 1.0)])
    seen = []

    def fake(policy, task, problems, cfg, seed=0):
        if cfg.k == ws_mod.CHECK_K and len(problems) == 8:
            seen.append([p.prompt for p in problems])
            p1, fmt = next(script)
            return {"eval/avg_k": p1, "eval/format_rate": fmt}
        return real(policy, task, problems, cfg, seed=seed)

    monkeypatch.setattr(ws_mod, "evaluate", fake)
    task, scale = tasks.get("addition", difficulty="easy"), models.get("nano")
    cfg = WarmStartConfig(steps=40, eval_examples=10, pool=64, stop_at=0.25, check_every=4, check_examples=8)
    w = warm_start(task, scale, cfg, cache=tmp_path)
    meta = json.loads((w.path / "warmstart.json").read_text())
    assert meta["stop"]["reached"] and meta["stop"]["step"] == 12
    assert [c["step"] for c in meta["stop"]["checks"]] == [4, 8, 12]
    pool = {e.prompt for e in task.split("train", n=64)}
    test = {e.prompt for e in task.split("test")}
    assert len(set(seen[0])) == 8 and not set(seen[0]) & (pool | test)  # unseen train problems only
    assert warm_start(task, scale, cfg, cache=tmp_path).cache_hit
    # the key names the level asked for: another stop_at is another warm start
    assert warmstart_key(task, scale, cfg) != warmstart_key(task, scale, cfg.replace(stop_at=0.3))


def test_checks_leave_training_alone_and_an_unreached_level_is_an_error(tmp_path):
    """The checks sample in no-grad eval mode with their own generator: a stop_at warm start that never
    stops trains bit for bit the weights of a plain one of the same steps. Not reaching the level is
    an error naming the seed, the best check and what to change (the checkpoint kept, every request
    for it refused alike), never a silent warm start of another level."""
    task, scale = tasks.get("addition", difficulty="easy"), models.get("nano")
    plain = warm_start(task, scale, WarmStartConfig(steps=12, eval_examples=10, pool=64), cache=tmp_path)
    cfg = WarmStartConfig(steps=12, eval_examples=10, pool=64, stop_at=1.0, check_every=4, check_examples=8)
    for _ in range(2):
        with pytest.raises(algorithms.errors.InputError, match=r"SFT seed 0 did not reach warmstart.stop_at = 1.0 .*"
                           r"best check: pass@1 .* raise warmstart.steps"):
            warm_start(task, scale, cfg, cache=tmp_path)
    stopped = tmp_path / "warmstart" / warmstart_key(task, scale, cfg)
    meta = json.loads((stopped / "warmstart.json").read_text())
    assert [c["step"] for c in meta["stop"]["checks"]] == [4, 8, 12] and not meta["stop"]["reached"]
    a = AutoModelForCausalLM.from_pretrained(plain.path).state_dict()
    b = AutoModelForCausalLM.from_pretrained(stopped).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_stop_at_config_errors_name_the_fix():
    from bench.config import ConfigError
    from bench.warmstart import check_set

    with pytest.raises(ConfigError, match="stop_at .* cannot be combined with warmstart.calibrated"):
        WarmStartConfig(stop_at=0.3, calibrated=True)
    with pytest.raises(ConfigError, match="warmstart.stop_at"):
        WarmStartConfig(stop_at=1.5)
    with pytest.raises(ConfigError, match="stop_at needs SFT steps .* not 0"):
        WarmStartConfig(stop_at=0.3, steps=0)
    assert "stop_at" not in WarmStartConfig().canonical()  # unset: earlier ids and keys stay
    task = tasks.get("gcd", max_value=12)  # few distinct problems: a pool of 512 holds nearly all of them
    cfg = WarmStartConfig(pool=512, check_examples=50)
    with pytest.raises(algorithms.errors.InputError, match="outside the SFT pool .* lower warmstart.check_examples"):
        check_set(task, cfg, task.split("train", n=512))
