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
from bench.harness import worker

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
        assert worker.trainer(cfg, root=root).run().status == "finished"
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
            worker.trainer(cfg, root=tmp_path / "results").run()
        meta = results.read_meta(results.run_dir(tmp_path / "results", cfg.run_id))
        assert meta["status"] == "failed" and "during step 1" in meta["reason"]


# ---------------------------------------------------------------- a report section (issue 46)

def _fake_runs():
    """The report tests' hand-made runs (tests/report/conftest.py), loaded as a module."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("extension_fake_runs", Path(__file__).parent / "report" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def section_registry(monkeypatch):
    """The section registry and the report's order as they are; whatever the test registers is gone after it."""
    from bench.report import registry, sections

    monkeypatch.setattr(registry, "SECTIONS", dict(registry.SECTIONS))
    monkeypatch.setattr(sections, "ORDER", list(sections.ORDER))
    return registry, sections


def test_a_throwaway_section_reaches_the_report(section_registry, tmp_path):
    import matplotlib.pyplot as plt

    from bench.report.render import Heading, Para, table

    registry, sections = section_registry
    fake = _fake_runs()
    path = tmp_path / "tiny.toml"
    path.write_text(fake.SUITE_TOML)
    suite = suites.load(path)
    root = tmp_path / "results"
    fake.write_results(root, suite)

    def recipes_per_cell(ctx) -> dict:
        board = ctx.tables["leaderboard"]
        return {"recipes_per_cell": board.group_by("cell", maintain_order=True).agg(
            pl.col("primary_mean").is_not_null().sum().alias("with_result"), pl.len().alias("recipes"))}

    @registry.section("recipes_per_cell", tables=recipes_per_cell, writes=("recipes_per_cell",), needs=("leaderboard",),
                      figures=("recipes_per_cell.png",))
    def recipes_per_cell_section(ctx) -> list:
        """How many of each cell's recipes have a finished run (a test's section)."""
        t = ctx.tables["recipes_per_cell"]
        fig, ax = plt.subplots()
        ax.bar(t["cell"].to_list(), t["with_result"].to_list())
        return [Heading(2, "Recipes per cell"), Para(f"{t.height} cell(s)."),
                table(t, {"cell": lambda r: r["cell"], "with a result": lambda r: f"{r['with_result']} of {r['recipes']}"}),
                ctx.figure("recipes_per_cell.png", fig, "Recipes with a finished run, per cell.")]

    sections.ORDER.insert(sections.ORDER.index("leaderboard") + 1, "recipes_per_cell")
    out = report.build(suite, root, tmp_path / "report")

    assert pl.read_csv(out / "recipes_per_cell.csv").rows() == [("addition/nano", 3, 3)]
    text = (out / "report.md").read_text()
    assert text.index("## Leaderboard") < text.index("## Recipes per cell") < text.index("## Skill, sharpening or collapse")
    assert "| addition/nano | 3 of 3 |" in text and "`recipes_per_cell.csv`" in text  # its table; the manifest lists its CSV
    assert (out / "figures" / "recipes_per_cell.png").read_bytes()[:4] == b"\x89PNG"
    assert 'id="recipes-per-cell"' in (out / "index.html").read_text()
    assert registry.get("recipes_per_cell").description.startswith("How many of each cell's recipes")

    sections.ORDER.remove("recipes_per_cell")  # registered but left out of the order: refused, not dropped
    with pytest.raises(ValueError, match=r"\['recipes_per_cell'\] are registered but not in bench.report.sections.ORDER"):
        report.build(suite, root, tmp_path / "again")


def test_a_section_that_writes_an_undeclared_table_or_figure_is_refused(section_registry, tmp_path):
    import matplotlib.pyplot as plt

    registry, sections = section_registry
    fake = _fake_runs()
    path = tmp_path / "tiny.toml"
    path.write_text(fake.SUITE_TOML)
    suite = suites.load(path)
    root = tmp_path / "results"
    fake.write_results(root, suite)

    @registry.section("sloppy")
    def sloppy(ctx) -> list:
        ctx.tables["undeclared"] = ctx.tables["leaderboard"]
        return []

    sections.ORDER.append("sloppy")
    with pytest.raises(AssertionError, match="report section 'sloppy' wrote table 'undeclared', which it does not declare"):
        report.build(suite, root, tmp_path / "a")
    registry.SECTIONS["sloppy"] = dataclasses.replace(
        registry.SECTIONS["sloppy"], render=lambda ctx: [ctx.figure("stray.png", plt.subplots()[0], "stray")])
    with pytest.raises(AssertionError, match="report section 'sloppy' drew figure 'stray.png', which it does not declare"):
        report.build(suite, root, tmp_path / "b")
    with pytest.raises(ValueError, match="report section 'sloppy' is already registered"):
        registry.section("sloppy")(sloppy)
    with pytest.raises(ValueError, match=r"report section 'copycat': table\(s\) \['leaderboard'\] already written by 'leaderboard'"):
        registry.section("copycat", writes=("leaderboard",))(sloppy)


def test_the_section_registry_is_as_before_after_the_throwaway_tests():
    from bench.report import registry, sections

    assert sorted(sections.ORDER) == registry.names() and "recipes_per_cell" not in registry.SECTIONS
