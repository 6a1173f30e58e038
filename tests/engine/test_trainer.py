"""The engine end to end on the smallest scale: every recipe, clip fractions, ledger, determinism,
divergence. One cached warm start serves every test (BENCH_CACHE is a temp dir)."""
import json
import math

import polars as pl
import pytest
import torch

import algorithms
from bench import results
from bench.config import Budget, EvalSchedule, RunConfig, TrainConfig
from bench.engine import compute as compute_mod
from bench.engine.ledger import ModelShape
from bench.harness import worker
from bench.warmstart import WarmStartConfig

WS = WarmStartConfig(steps=300, eval_examples=20)
TASK_PARAMS = {"difficulty": "easy"}


def make_cfg(recipe, budget="2steps", seed=0, **overrides) -> RunConfig:
    cfg = RunConfig(recipe=recipe if not isinstance(recipe, str) else algorithms.get(recipe), task="addition",
                    task_params=TASK_PARAMS, scale="nano", budget=Budget.parse(budget), seed=seed,
                    train=TrainConfig(prompts_per_step=4, group_size=4, micro_batch_size=8),
                    eval=EvalSchedule(every=0.5, n_examples=8, k=2), warmstart=WS)
    return cfg.with_overrides([f"{k}={v}" for k, v in overrides.items()]) if overrides else cfg


def steps_of(res) -> pl.DataFrame:
    return pl.read_parquet(res.path / "steps.parquet")


@pytest.mark.parametrize("name", algorithms.names())
def test_every_recipe_completes_with_every_metric(name, bench_cache, tmp_path):
    recipe = algorithms.get(name)
    if recipe.critic is not None and recipe.critic.pretrain_steps:
        recipe = recipe.replace(critic=recipe.critic.replace(pretrain_steps=1))
    res = worker.trainer(make_cfg(recipe), root=tmp_path).run()
    assert res.status == "finished", res.reason
    steps = steps_of(res)
    assert steps.columns == list(results.STEP_SCHEMA) and steps.height == 2
    evals = pl.read_parquet(res.path / "evals.parquet")
    assert evals["fraction"].to_list() == [0.0, 0.5, 1.0]
    row = steps.row(-1, named=True)
    always = ["reward/mean", "acc/train", "len/mean", "len/truncated_frac", "compute/flops",
              "compute/gen_tokens", "time/step_s", "adv/zero_std_group_frac", "filter/generation_rounds"]
    for m in always:
        assert math.isfinite(row[m]), m
    needs = recipe.needs
    if row["filter/kept_frac"] > 0:  # an update happened (dynamic sampling may keep no group)
        for m in ("kl/k1", "kl/k3", "policy/entropy", "policy/ratio_mean", "grad/norm", "loss/policy"):
            assert math.isfinite(row[m]), m
        assert math.isfinite(row["loss/value"]) == needs.critic
        assert math.isfinite(row["critic/explained_var"]) or not needs.critic or row["reward/std"] == 0
    tag = recipe.objective.tag
    assert math.isfinite(row["policy/clip_frac_seq"]) == (tag == "gspo" and row["filter/kept_frac"] > 0)
    assert math.isfinite(row["policy/weight_capped_frac"]) == (tag in ("cispo", "dppo") and row["filter/kept_frac"] > 0)
    assert math.isfinite(row["policy/cov_frac"]) == (tag in ("clip_cov", "kl_cov") and row["filter/kept_frac"] > 0)
    updated = row["filter/kept_frac"] > 0
    assert math.isfinite(row["correction/weight_mean"]) == (bool(recipe.corrections) and updated)
    assert math.isfinite(row["correction/changed_frac"]) == (bool(recipe.corrections) and updated)
    assert math.isfinite(row["policy/gate_damped_frac"]) == (tag == "sapo" and updated)
    assert math.isfinite(row["policy/entropy_coef"]) == (recipe.entropy_control is not None and updated)
    meta = json.loads((res.path / "run.json").read_text())
    assert meta["status"] == "finished" and meta["run_id"] == res.run_id and meta["steps_done"] == 2
    assert meta["flops_spent"] == row["compute/flops"]


def test_clip_fractions_zero_with_one_update_positive_with_four(bench_cache, tmp_path):
    one = worker.trainer(make_cfg("grpo", budget="3steps", **{"train.lr": 3e-2}), root=tmp_path / "a").run()
    s1 = steps_of(one)
    assert (s1["policy/clip_frac_low"] == 0).all() and (s1["policy/clip_frac_high"] == 0).all()
    assert (s1["policy/ratio_max"] == 1).all() and (s1["policy/ratio_min"] == 1).all()
    four = worker.trainer(make_cfg("grpo", budget="3steps", **{"train.lr": 3e-2, "recipe.updates.minibatches": 4}),
                          root=tmp_path / "b").run()
    s4 = steps_of(four)
    assert (s4["policy/clip_frac_low"] + s4["policy/clip_frac_high"]).sum() > 0
    assert (s4["policy/ratio_max"] > 1).any()


@pytest.mark.parametrize("recipe, widths", [("dapo", (0.28, 0.05)), ("gspo", (4e-4, 1e-6)), ("dr_grpo", (0.2, 0.01))])
def test_clip_widths_are_inert_at_one_update_per_batch(recipe, widths, bench_cache, tmp_path):
    """With one update per fresh batch the ratio is exactly 1 (the old log-probs are the same forward's,
    detached), so no clip width can act: two widths, one far inside any ratio a step makes, train the
    same bits. Why math-small tunes no clip width (suites/math-small.toml [tune]); with 2 minibatches
    the narrow width does act."""
    def run(width, root, **more):
        over = {"recipe.objective.eps_high": width, "recipe.objective.eps_low": min(width, 0.2)}
        res = worker.trainer(make_cfg(recipe, budget="3steps", **{"train.lr": 3e-2, **over, **more}), root=root).run()
        assert res.status == "finished", res.reason
        keep = [c for c in steps_of(res).columns if not c.startswith("time/")]
        ev = pl.read_parquet(res.path / "evals.parquet")
        return steps_of(res).select(keep), ev.select([c for c in ev.columns if not c.startswith("time/")])
    (s_a, e_a), (s_b, e_b) = run(widths[0], tmp_path / "a"), run(widths[1], tmp_path / "b")
    assert s_a.equals(s_b, null_equal=True) and e_a.equals(e_b, null_equal=True)
    updated = s_a["policy/ratio_max"].drop_nans()  # NaN: a step dapo's dynamic sampling kept no group for
    assert updated.len() > 0 and (updated == 1).all()
    (m_a, _), (m_b, _) = (run(w, tmp_path / f"mb{i}", **{"recipe.updates.minibatches": 2}) for i, w in enumerate(widths))
    assert not m_a.equals(m_b, null_equal=True)  # off-policy minibatches: the same two widths train differently


def test_ledger_counts_every_pass_including_greedy_baselines(bench_cache, tmp_path, monkeypatch):
    """FLOPs of one step = the analytic formula over the shapes actually generated and trained."""
    for name, extra_gen in (("grpo", False), ("remax", True)):
        t = worker.trainer(make_cfg(name), root=tmp_path)
        t._setup()
        calls = []
        real = t.backend.generate

        def spy(prompts, params, _real=real, calls=calls):
            g = _real(prompts, params)
            calls.append(([len(p) for p in prompts], g.lengths.tolist()))
            return g

        t.backend.generate = spy
        t._step = 1
        row = t.step(1)
        shape = ModelShape.of(t.policy.model)
        gen = sum(shape.forward_seq(p) + shape.forward_seq(g, start=p) for ps, gs in calls for p, g in zip(ps, gs))
        ps, gs = calls[0]  # the sampled batch (grpo keeps every row)
        seqs = [p + g for p, g in zip(ps, gs)]
        expected = gen + sum(shape.forward_seq(n) for n in seqs) + 3 * sum(shape.forward_seq(n) for n in seqs)
        assert len(calls) == (2 if extra_gen else 1)
        assert row["compute/flops"] == expected
        assert row["compute/gen_tokens"] == sum(g for _, gs_ in calls for g in gs_)


def test_dynamic_sampling_counts_rejected_rollouts(bench_cache, tmp_path):
    t = worker.trainer(make_cfg("dapo"), root=tmp_path)
    t._setup()
    gen_tokens = []
    real = t.backend.generate

    def spy(prompts, params):
        g = real(prompts, params)
        gen_tokens.append(int(g.lengths.sum()))
        return g

    t.backend.generate = spy
    t._step = 1
    row = t.step(1)
    assert row["filter/generation_rounds"] == len(gen_tokens)
    assert row["compute/gen_tokens"] == sum(gen_tokens)  # rejected rounds are paid for


def test_same_config_and_seed_give_identical_steps(bench_cache, tmp_path):
    cfg = make_cfg("dapo", budget="2steps")
    a = steps_of(worker.trainer(cfg, root=tmp_path / "a").run())
    b = steps_of(worker.trainer(cfg, root=tmp_path / "b").run())
    timeless = [c for c in a.columns if not c.startswith("time/")]  # wall-clock seconds differ by nature
    assert a.select(timeless).equals(b.select(timeless))
    c = steps_of(worker.trainer(make_cfg("dapo", budget="2steps", seed=1), root=tmp_path / "c").run())
    assert not a.select(timeless).equals(c.select(timeless))


def test_nan_mid_run_gives_diverged_record(bench_cache, tmp_path, monkeypatch):
    real = compute_mod.sequence_logprobs
    state = {"trainer": None}

    def poisoned(model, *args, **kw):
        logp, ent = real(model, *args, **kw)
        t = state["trainer"]
        if torch.is_grad_enabled() and t is not None and t._step == 2:
            logp = logp * float("nan")
        return logp, ent

    monkeypatch.setattr(compute_mod, "sequence_logprobs", poisoned)
    t = worker.trainer(make_cfg("grpo", budget="4steps"), root=tmp_path)
    state["trainer"] = t
    res = t.run()
    assert res.status == "diverged" and "non-finite" in res.reason
    meta = json.loads((res.path / "run.json").read_text())
    assert meta["status"] == "diverged" and meta["diverged_step"] == 2 and meta["reason"]
    assert steps_of(res).height == 1  # the finished step is kept


def test_budget_in_flops_stops_at_budget(bench_cache, tmp_path):
    probe = worker.trainer(make_cfg("grpo", budget="1steps"), root=tmp_path / "p").run()
    per_step = steps_of(probe)["compute/flops"][0]
    res = worker.trainer(make_cfg("grpo", budget=f"{2.5 * per_step:.0f}"), root=tmp_path / "f").run()
    flops = steps_of(res)["compute/flops"]
    assert flops[-1] >= 2.5 * per_step and flops[-2] < 2.5 * per_step
