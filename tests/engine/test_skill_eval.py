"""Evaluation that separates skill from format: format rate, accuracy among well-formed answers,
fresh held-out problems per seed, the harder split."""
import math

import polars as pl
import pytest

import algorithms
from bench.config import Budget, EvalConfig, EvalSchedule, RunConfig, TrainConfig
from bench.engine.evaluate import evaluate
from bench.engine.trainer import Trainer
from bench.warmstart import WarmStartConfig

WS = WarmStartConfig(steps=300, eval_examples=20)  # the engine tests' warm start (one cache entry)


def make_cfg(seed=0, **eval_fields) -> RunConfig:
    return RunConfig(recipe=algorithms.get("grpo"), task="addition", task_params={"difficulty": "easy"}, scale="nano",
                     budget=Budget.parse("2steps"), seed=seed,
                     train=TrainConfig(prompts_per_step=4, group_size=4, micro_batch_size=8),
                     eval=EvalSchedule(every=0.5, n_examples=12, k=2, **eval_fields), warmstart=WS)


def ready(cfg: RunConfig, root) -> Trainer:
    """A trainer set up to its first step (warm start loaded, evaluation problems drawn)."""
    t = Trainer(cfg, root=root)
    t._setup()
    return t


def test_skill_metrics_are_recorded_per_evaluation(bench_cache, tmp_path):
    res = Trainer(make_cfg(items="per_seed", ood_examples=6), root=tmp_path).run()
    assert res.status == "finished", res.reason
    ev = pl.read_parquet(res.path / "evals.parquet")
    for col in ("eval/format_greedy", "eval/format_rate", "eval/acc_formatted", "eval/acc_ood"):
        assert ev[col].is_finite().all() and ev[col].is_between(0, 1).all(), col
    # a correct sample need not be well-formed, so avg@k >= format rate x accuracy among well-formed.
    # Each is a float32 mean of 0/1 values (an exact count, one rounded division: ≤ u = 2⁻²⁴
    # relative), so the two sides of the inequality can cross by 3u at most (values ≤ 1)
    assert (ev["eval/avg_k"] >= ev["eval/format_rate"] * ev["eval/acc_formatted"] - 3 * 2.0 ** -24).all()


def test_per_seed_items_differ_between_seeds_and_fixed_items_do_not(bench_cache, tmp_path):
    a, b = ready(make_cfg(0, items="per_seed"), tmp_path), ready(make_cfg(1, items="per_seed"), tmp_path)
    assert [e.prompt for e in a.test] != [e.prompt for e in b.test]
    assert all(a.task.in_test(e.prompt) for e in a.test + b.test)
    f0, f1 = ready(make_cfg(0), tmp_path), ready(make_cfg(1), tmp_path)
    assert f0.test == f1.test == f0.task.split("test", 12)
    assert a.ood is None and f0.ood is None


def test_format_rate_counts_well_formed_samples(bench_cache, tmp_path):
    t = ready(make_cfg(ood_examples=4), tmp_path)
    m = evaluate(t.policy, t.task, t.test, EvalConfig(n_examples=12, k=3, ood_examples=4), seed=0, ood=t.ood)
    assert m["eval/n"] == 12 and 0 <= m["eval/format_rate"] <= 1
    assert math.isfinite(m["eval/acc_ood"])
    greedy_only = evaluate(t.policy, t.task, t.test, EvalConfig(n_examples=12, k=0), seed=0)
    assert "eval/format_rate" not in greedy_only and greedy_only["eval/format_greedy"] == m["eval/format_greedy"]


def test_a_task_without_a_harder_split_refuses_ood_examples(bench_cache, tmp_path, monkeypatch):
    from bench.tasks.addition import Addition

    monkeypatch.setattr(Addition, "harder", lambda self: None)
    with pytest.raises(ValueError, match="eval.ood_examples: task 'addition' defines no harder split"):
        ready(make_cfg(ood_examples=4), tmp_path)


def test_preflight_refuses_ood_examples_before_training(monkeypatch):
    from bench import preflight
    from bench.tasks.addition import Addition

    preflight.check_run(make_cfg(ood_examples=4))
    monkeypatch.setattr(Addition, "harder", lambda self: None)
    with pytest.raises(ValueError, match="defines no harder split"):
        preflight.check_run(make_cfg(ood_examples=4))
    preflight.check_run(make_cfg())
