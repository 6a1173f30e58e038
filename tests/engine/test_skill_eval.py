"""Evaluation that separates skill from format: format rate, accuracy among well-formed answers,
fresh held-out problems per seed, the harder split."""
import math

import polars as pl
import pytest

import algorithms
from bench.config import Budget, EvalConfig, EvalSchedule, RunConfig, TrainConfig
from bench.engine.evaluate import evaluate
from bench.engine.trainer import Trainer
from bench.harness import worker
from bench.warmstart import WarmStartConfig

WS = WarmStartConfig(steps=300, eval_examples=20)  # the engine tests' warm start (one cache entry)


def make_cfg(seed=0, **eval_fields) -> RunConfig:
    return RunConfig(recipe=algorithms.get("grpo"), task="addition", task_params={"difficulty": "easy"}, scale="nano",
                     budget=Budget.parse("2steps"), seed=seed,
                     train=TrainConfig(prompts_per_step=4, group_size=4, micro_batch_size=8),
                     eval=EvalSchedule(every=0.5, n_examples=12, k=2, **eval_fields), warmstart=WS)


def ready(cfg: RunConfig, root) -> Trainer:
    """A trainer set up to its first step (warm start loaded, evaluation problems drawn)."""
    t = worker.trainer(cfg, root=root)
    t._setup()
    return t


def test_skill_metrics_are_recorded_per_evaluation(bench_cache, tmp_path):
    res = worker.trainer(make_cfg(items="per_seed", ood_examples=6), root=tmp_path).run()
    assert res.status == "finished", res.reason
    ev = pl.read_parquet(res.path / "evals.parquet")
    for col in ("eval/format_greedy", "eval/format_rate", "eval/acc_formatted", "eval/acc_ood", "eval/pass@1", "eval/pass@2"):
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


def test_pass_at_k_is_the_unbiased_estimator_over_every_subset():
    """pass@K against its definition: the share of K-subsets of a problem's n answers that hold a
    correct one, counted by enumerating the subsets. Both sides are exact rationals rounded once or
    twice in float64 (a mean of at most 3 terms each below 1): 8 ulp of 1 covers them."""
    import itertools

    import torch

    from bench.engine.evaluate import pass_at_k, pass_ks

    assert pass_ks(1) == [1] and pass_ks(4) == [1, 2, 4] and pass_ks(6) == [1, 2, 4] and pass_ks(64)[-2:] == [32, 64]
    hits = torch.tensor([[1, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1, 0, 1, 1]], dtype=torch.float32)
    got = pass_at_k(hits)
    assert list(got) == ["eval/pass@1", "eval/pass@2", "eval/pass@4"]
    for k in (1, 2, 4):
        per = [sum(any(row[i] for i in sub) for sub in itertools.combinations(range(6), k)) / math.comb(6, k)
               for row in hits.tolist()]
        assert got[f"eval/pass@{k}"] == pytest.approx(sum(per) / 3, abs=8 * 2.0 ** -52), k
    assert got["eval/pass@1"] == pytest.approx(hits.mean().item(), abs=2.0 ** -23)  # avg@n (float32 mean)
    assert pass_at_k(hits[:, :4])["eval/pass@4"] == 2 / 3  # K = n: any correct among all n (eval/pass_k)
    assert [got[f"eval/pass@{k}"] for k in (1, 2, 4)] == sorted(got.values())  # coverage only grows with K


def test_sampled_examples_draws_the_k_samples_on_the_first_problems_and_greedy_on_all(bench_cache, tmp_path):
    t = ready(make_cfg(ood_examples=3), tmp_path)
    some = evaluate(t.policy, t.task, t.test, EvalConfig(n_examples=12, k=4, sampled_examples=5), seed=0)
    head = evaluate(t.policy, t.task, t.test[:5], EvalConfig(n_examples=5, k=4), seed=0)
    every = evaluate(t.policy, t.task, t.test, EvalConfig(n_examples=12, k=4), seed=0)
    assert some["eval/n"] == 12 and some["eval/n_sampled"] == 5 and every["eval/n_sampled"] == 12
    # the same prompts, seed and batches as an evaluation of those 5 alone: the same samples, bit for bit
    for name in ("eval/avg_k", "eval/pass@4", "eval/format_rate", "eval/acc_formatted"):
        assert some[name] == head[name], name
    assert some["eval/acc_greedy"] == every["eval/acc_greedy"], "greedy answers every problem"


def test_the_harder_split_samples_at_most_ood_k_per_problem(bench_cache, tmp_path):
    from bench.engine.evaluate import OOD_K

    t = ready(make_cfg(ood_examples=4), tmp_path)
    wide = evaluate(t.policy, t.task, t.test, EvalConfig(n_examples=3, k=16, ood_examples=4), seed=0, ood=t.ood)
    four = evaluate(t.policy, t.task, t.test, EvalConfig(n_examples=3, k=OOD_K, ood_examples=4), seed=0, ood=t.ood)
    assert OOD_K == 4 and wide["eval/acc_ood"] == four["eval/acc_ood"]


def test_sampled_examples_above_n_examples_is_refused_with_the_valid_range():
    with pytest.raises(ValueError, match=r"eval.sampled_examples: got 300, more than eval.n_examples \(200\); "
                                         r"expected 1 to 200"):
        EvalSchedule(n_examples=200, sampled_examples=300)
    assert EvalSchedule(n_examples=200, sampled_examples=200).eval_config().sampled_examples == 200
