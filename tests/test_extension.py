"""Extending grpo-bench in an afternoon (issue 26, acceptance 2): a throwaway part, a recipe built
from it and the metric it emits, all declared inside this test, train through the real engine and
appear in a report: the recipe in the leaderboard, the metric as a column of the clipping table.
Nothing outside this file changes; the registries are restored afterwards."""
import contextlib
import dataclasses

import polars as pl
import pytest
import torch

import algorithms
from algorithms import metrics, parts, registry
from algorithms.objectives import PPOClip, token_mean
from bench import report, suite as suites
from bench.engine.trainer import Trainer

METRIC = "policy/throwaway_logp"
SUITE = """
recipes = ["grpo", "throwaway"]
seeds = [0]
tasks = ["addition"]
scales = ["nano"]
budget = "2steps"
[task_params.addition]
difficulty = "easy"
[train]
prompts_per_step = 4
group_size = 8
micro_batch_size = 64
lr = 1e-3
[eval]
every = 0.5
n_examples = 8
k = 2
[warmstart]
steps = 40
eval_examples = 20
"""


@contextlib.contextmanager
def registries_restored():
    """Whatever parts and recipes the block registers are gone after it."""
    live = (parts.PARTS, registry.RECIPES, registry.SPACES, registry.FAMILIES)
    before = [dict(d) for d in live]
    try:
        yield
    finally:
        for d, saved in zip(live, before):
            d.clear()
            d.update(saved)


@pytest.fixture
def throwaway():
    """Register the part, the recipe and the metric; remove all three afterwards."""
    with registries_restored():
        @parts.part("throwaway_clip")
        class ThrowawayClip(PPOClip):
            """PPO's clip, also logging the mean log-prob of the valid tokens (under the trained policy)."""

            def per_token(self, logp, logp_old, adv, mask):
                loss, stats = super().per_token(logp, logp_old, adv, mask)
                return loss, {**stats, METRIC: token_mean(logp.detach(), mask.bool())}

        @registry.recipe("throwaway", space={})
        def throwaway_recipe() -> algorithms.Recipe:
            """grpo with an objective that logs one more number (a test's recipe)."""
            return dataclasses.replace(algorithms.get("grpo"), objective=ThrowawayClip(0.2, 0.2))

        with metrics.declared_for_test(METRIC, kind="step", unit="nats", merge="token", group="clipping",
                                       label="mean_logp", doc="mean log-prob of the valid tokens (a test's metric)"):
            yield


def test_a_throwaway_recipe_and_metric_train_and_reach_the_report(throwaway, tmp_path, bench_cache):
    path = tmp_path / "extension.toml"
    path.write_text(SUITE)
    suite = suites.load(path)
    root = tmp_path / "results"
    torch.manual_seed(0)
    for cfg in suite.expand():
        assert Trainer(cfg, root=root).run().status == "finished"
    out = report.build(suite, root, tmp_path / "report")

    board = pl.read_csv(out / "leaderboard.csv")
    assert "throwaway" in board["recipe"].to_list()
    clipping = pl.read_csv(out / "clipping.csv")
    assert "mean_logp" in clipping.columns
    mine = clipping.filter(pl.col("recipe") == "throwaway")["mean_logp"].to_list()
    assert len(mine) == 1 and float(mine[0]) < 0  # a mean log-prob: below 0
    assert clipping.filter(pl.col("recipe") == "grpo")["mean_logp"].to_list() == [""]  # NaN: grpo never emitted it
    text = (out / "report.md").read_text()
    assert "| addition/nano | throwaway |" in text and "| mean logp |" in text  # its rows, the new column


def test_the_registries_are_as_before_after_the_throwaway_test():
    assert "throwaway" not in algorithms.names() and "throwaway_clip" not in parts.PARTS
    assert not metrics.is_declared(METRIC)


def test_an_undeclared_metric_fails_the_run_at_its_first_step_with_a_record(tmp_path, bench_cache):
    from bench import results

    with registries_restored():
        @parts.part("undeclared_clip")
        class UndeclaredClip(PPOClip):
            def per_token(self, logp, logp_old, adv, mask):
                loss, stats = super().per_token(logp, logp_old, adv, mask)
                return loss, {**stats, "policy/never_declared": token_mean(logp.detach(), mask.bool())}

        path = tmp_path / "s.toml"
        path.write_text(SUITE.replace('["grpo", "throwaway"]', '["grpo"]').replace('"2steps"', '"4steps"'))
        cfg = suites.load(path).expand()[0]
        cfg = cfg.replace(recipe=dataclasses.replace(cfg.recipe, objective=UndeclaredClip(0.2, 0.2)))
        # merging the micro-batches' stats meets it first (algorithms/stats.py); a row key would be
        # refused by the trainer's check of each row (results.check_rows): either way at step 1
        with pytest.raises((metrics.UnknownMetricError, results.UndeclaredMetric), match="policy/never_declared"):
            Trainer(cfg, root=tmp_path / "results").run()
        meta = results.read_meta(results.run_dir(tmp_path / "results", cfg.run_id))
        assert meta["status"] == "failed" and "during step 1" in meta["reason"]
