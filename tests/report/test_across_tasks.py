"""A suite over several tasks gets the cross-task aggregate (rliable style) beside its per-task verdicts."""
import polars as pl

from bench import report, results
from bench import suite as suites

TOML = """
recipes = ["grpo", "dapo", "ppo"]
seeds = 4
tasks = ["addition", "chain_sum"]
scales = ["nano"]
budget = 1e9
[eval]
every = 0.5
"""
LEAD = {("dapo", "addition"): 0.05, ("dapo", "chain_sum"): 0.05, ("ppo", "addition"): 0.06, ("ppo", "chain_sum"): -0.06}


def test_cross_task_aggregate(tmp_path, fake_runs):
    path = tmp_path / "multi.toml"
    path.write_text(TOML)
    s = suites.load(path)
    root = tmp_path / "results"
    for cfg in s.expand():
        steps, evals = fake_runs.curves("grpo", cfg.seed, fake_runs.steps)
        lead = LEAD.get((cfg.recipe.name, cfg.task), 0.0)
        for e in evals:
            e["eval/acc_greedy"] = 0.3 + (0.1 + lead + 0.002 * cfg.seed) * e["fraction"]
        results.write_run(root, cfg.run_id, fake_runs.meta(cfg, "finished", fake_runs.steps), steps, evals)
    out = report.build(s, root, tmp_path / "out")
    t = pl.read_csv(out / "across_tasks.csv")
    by = {r["recipe"]: r for r in t.iter_rows(named=True)}
    assert by["grpo"]["normalised"] == "baseline_gain" and abs(by["grpo"]["mean"] - 1) < 1e-9
    assert by["dapo"]["iqm"] > 1 and float(by["dapo"]["p_improve"]) == 1.0
    assert float(by["ppo"]["p_improve"]) == 0.5, "wins every seed on one task, loses every seed on the other"
    assert (out / "figures" / "across_tasks.png").is_file() and (out / "performance_profiles.csv").is_file()
    md = (out / "report.md").read_text()
    assert "## Across tasks" in md
    assert "holds on every task for dapo" in md and "flips between tasks for ppo" in md


def test_single_task_reports_have_no_cross_task_section(tiny, tmp_path):
    s, root, _ = tiny
    out = report.build(s, root, tmp_path / "out")
    assert not (out / "across_tasks.csv").exists() and "Across tasks" not in (out / "report.md").read_text()
