"""The report's skill check: a cell compares skill when its sampled answers are well-formed at the start
and the baseline's gain in the report's accuracy is at least 5 standard errors of its mean."""
import polars as pl

from bench import report, results
from bench import suite as suites

TOML = """
recipes = ["grpo", "dapo"]
seeds = 4
tasks = ["addition"]
scales = ["nano"]
budget = 1e9
[eval]
every = 0.5
k = 4
[report]
accuracy = "eval/acc_formatted"
"""


def write(root, suite, fake_runs, fmt0, gain_of_seed):
    for cfg in suite.expand():
        steps, evals = fake_runs.curves("grpo", cfg.seed, fake_runs.steps)
        for e in evals:
            e["eval/format_rate"] = fmt0 if e["fraction"] == 0 else 0.99
            e["eval/acc_formatted"] = 0.3 + e["fraction"] * gain_of_seed(cfg.recipe.name, cfg.seed)
        results.write_run(root, cfg.run_id, fake_runs.meta(cfg, "finished", fake_runs.steps), steps, evals)


def build(tmp_path, fake_runs, fmt0, gain_of_seed):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "skill.toml"
    path.write_text(TOML)
    s = suites.load(path)
    write(tmp_path / "results", s, fake_runs, fmt0, gain_of_seed)
    out = report.build(s, tmp_path / "results", tmp_path / "out")
    return pl.read_csv(out / "skill_check.csv"), (out / "report.md").read_text()


def test_a_cell_with_a_steady_skill_gain_passes(tmp_path, fake_runs):
    t, md = build(tmp_path, fake_runs, 0.97, lambda r, s: 0.10 + 0.01 * s)
    row = t.row(0, named=True)
    assert row["skill"] and abs(row["gain_mean"] - 0.115) < 1e-9 and row["seeds"] == 4
    assert "addition/nano compares skill" in md
    assert "accuracy among well-formed sampled answers" in md, "the report names the accuracy it reads"


def test_a_format_switch_or_a_noisy_gain_fails(tmp_path, fake_runs):
    t, md = build(tmp_path / "a", fake_runs, 0.40, lambda r, s: 0.10 + 0.01 * s)
    assert not t["skill"][0] and "does NOT pass" in md
    t, _ = build(tmp_path / "b", fake_runs, 0.99, lambda r, s: [0.2, -0.15, 0.1, -0.1][s])
    assert not t["skill"][0] and t["gain_z"][0] < 5


def test_reports_of_runs_without_a_format_rate_have_no_skill_check(tiny, tmp_path):
    s, root, _ = tiny
    out = report.build(s, root, tmp_path / "out")
    assert not (out / "skill_check.csv").exists() and "Skill check" not in (out / "report.md").read_text()


def test_a_sampled_gain_without_a_greedy_gain_is_called_sharpening(tmp_path, fake_runs):
    """The sampled accuracy among well-formed answers rises steadily; greedy accuracy stays where it was
    (the fixture's curves rise with grpo's GAIN of 0.1 unless overwritten): sharpening, not skill."""
    def flat_greedy(root, suite):
        for cfg in suite.expand():
            steps, evals = fake_runs.curves("grpo", cfg.seed, fake_runs.steps)
            for e in evals:
                e["eval/format_rate"] = 0.97 if e["fraction"] == 0 else 0.99
                e["eval/acc_formatted"] = 0.3 + e["fraction"] * (0.10 + 0.01 * cfg.seed)
                e["eval/acc_greedy"] = 0.5 + 0.001 * ((cfg.seed + round(4 * e["fraction"])) % 3 - 1)
            results.write_run(root, cfg.run_id, fake_runs.meta(cfg, "finished", fake_runs.steps), steps, evals)

    path = tmp_path / "skill.toml"
    path.write_text(TOML)
    s = suites.load(path)
    flat_greedy(tmp_path / "results", s)
    out = report.build(s, tmp_path / "results", tmp_path / "out")
    row = pl.read_csv(out / "skill_check.csv").row(0, named=True)
    assert row["skill"] and row["sharpening"] and abs(row["greedy_gain_mean"]) < 0.01
    assert "addition/nano passes, but its gain is sharpening" in (out / "report.md").read_text()
    # a steady greedy gain as well (the fixture's default curves): skill, not sharpening
    t, md = build(tmp_path / "b", fake_runs, 0.97, lambda r, s: 0.10 + 0.01 * s)
    assert t["skill"][0] and not t["sharpening"][0] and "addition/nano compares skill" in md
