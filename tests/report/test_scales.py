"""The model-scale section (issue 14): a suite whose task spans several model scales gets a scales
table, a statement that separates decided ranking changes from noise, and a figure; a single-scale
suite gets none of them.

Hand-made AUCs (acc = 0.4 + 0.2 f + offset, constant offset, so AUC = 0.5 + offset): every seed
shares an effect c_s; rloo beats grpo by 0.05 at nano and loses by 0.05 at small (a decided flip,
and a decided change of Δ); dapo sits within ±0.004 of grpo with a per-seed spread of ~0.02, above
it at nano and below at micro (a rank swap within noise)."""
import csv
import io
import math

import pytest

from bench import report, results
from bench import suite as suites
from bench.report import data as report_data
from bench.report import stats, tables as T

SUITE_TOML = """
description = "scales test suite"
recipes = ["grpo", "dapo", "rloo"]
seeds = 4
tasks = ["addition"]
scales = ["nano", "micro", "small"]
[budget]
"addition/nano" = 1e9
"addition/micro" = 3e9
"addition/small" = 2e10
[eval]
every = 0.25
[report]
primary = "auc"
baseline = "grpo"
"""
PARAMS = {"nano": 140_288, "micro": 534_016, "small": 4_010_240}
SEED_EFFECT = [0.0, 0.01, -0.01, 0.005]
DELTA = {"dapo": {"nano": 0.004, "micro": -0.004, "small": 0.003},
         "rloo": {"nano": 0.05, "micro": 0.02, "small": -0.05}}
NOISE = {"dapo": [0.02, -0.015, 0.01, -0.015], "rloo": [0.004, -0.003, 0.002, -0.003], "grpo": [0.0] * 4}


def offset(recipe: str, scale: str, seed: int) -> float:
    return SEED_EFFECT[seed] + DELTA.get(recipe, {}).get(scale, 0.0) + NOISE[recipe][seed]


def write_results(root, suite, fake) -> None:
    STEPS = fake.steps
    for cfg in suite.expand():
        budget = cfg.budget.value
        steps, _ = fake.curves("grpo", cfg.seed, STEPS)
        steps = [{**s, "compute/flops": s["compute/flops"] * budget / 1e9} for s in steps]
        off = offset(cfg.recipe.name, cfg.scale, cfg.seed)
        evals = [{"step": round(f * STEPS), "fraction": f, "compute/flops": budget * f,
                  "eval/acc_greedy": 0.4 + 0.2 * f + off, "eval/len_mean": 12.0, "eval/len_correct": 10.0,
                  "eval/len_incorrect": 14.0, "eval/n": 100.0} for f in (0.0, 0.25, 0.5, 0.75, 1.0)]
        m = {**fake.meta(cfg, "finished", STEPS), "flops_spent": budget,
             "model": {"params": PARAMS[cfg.scale], "layers": 2, "attn_width": 64}}
        results.write_run(root, cfg.run_id, m, steps, evals)


@pytest.fixture(scope="module")
def scaled(tmp_path_factory, fake_runs):
    d = tmp_path_factory.mktemp("scales")
    path = d / "scales.toml"
    path.write_text(SUITE_TOML)
    s = suites.load(path)
    root = d / "results"
    write_results(root, s, fake_runs)
    return s, root, report.build(s, root, d / "out")


def rows(path) -> dict[tuple[str, str], dict]:
    return {(r["recipe"], r["scale"]): r for r in csv.DictReader(io.StringIO(path.read_text()))}


def test_scales_table_numbers(scaled):
    s, root, out = scaled
    t = rows(out / "scales.csv")
    assert len(t) == 9 and list(t)[:3] == [("grpo", "nano"), ("grpo", "micro"), ("grpo", "small")]
    assert t[("grpo", "nano")]["params"] == "140288" and t[("rloo", "small")]["params"] == "4010240"
    assert t[("grpo", "small")]["verdict"] == "baseline" and t[("grpo", "small")]["change"] == ""
    assert t[("rloo", "nano")]["change"] == ""  # the reference scale has no change
    # rloo: better at nano, worse at small; its Δ falls by 0.1 (the seed noise cancels: same per scale)
    assert (t[("rloo", "nano")]["verdict"], t[("rloo", "small")]["verdict"]) == ("better", "worse")
    assert float(t[("rloo", "nano")]["diff"]) == pytest.approx(0.05)
    assert float(t[("rloo", "small")]["change"]) == pytest.approx(-0.1)
    assert t[("rloo", "small")]["change_verdict"] == "worsens" and float(t[("rloo", "small")]["change_p_holm"]) < 0.05
    assert (t[("rloo", "nano")]["rank"], t[("rloo", "small")]["rank"]) == ("1", "3")
    # dapo: above grpo at nano, below at micro, neither a decided difference nor a decided change
    assert (t[("dapo", "nano")]["rank"], t[("grpo", "nano")]["rank"]) == ("2", "3")
    assert (t[("dapo", "micro")]["rank"], t[("grpo", "micro")]["rank"]) == ("3", "2")
    assert {t[("dapo", sc)]["verdict"] for sc in PARAMS} == {"undecided"}
    assert {t[("dapo", sc)]["change_verdict"] for sc in ("micro", "small")} == {"undecided"}
    # the values the leaderboard shows, not recomputed
    board = {(r["cell"], r["recipe"]): r for r in csv.DictReader(io.StringIO((out / "leaderboard.csv").read_text()))}
    for col in ("primary_mean", "primary_lo", "diff", "diff_hi", "p_holm", "verdict"):
        assert t[("dapo", "micro")][col] == board[("addition/micro", "dapo")][col], col


def test_welch_change_matches_scipy():
    from scipy.stats import ttest_ind

    a, b = [0.05, 0.04, 0.06, 0.05], [-0.05, -0.02, -0.06, -0.04, -0.03]
    diff, lo, hi, p = stats.welch_t(a, b)
    ref = ttest_ind(b, a, equal_var=False)
    assert diff == pytest.approx(sum(b) / 5 - sum(a) / 4) and p == pytest.approx(ref.pvalue)
    assert (lo, hi) == pytest.approx(tuple(ref.confidence_interval(0.95)))
    assert stats.welch_t([0.1, 0.1], [0.3, 0.3])[3] == 0.0  # no spread, a difference: as stats.paired_t
    one = stats.welch_t([0.1], [0.3, 0.2])  # one value: the difference, but no interval or p
    assert one[0] == pytest.approx(0.15) and all(math.isnan(v) for v in one[1:])


def test_statement_separates_decided_changes_from_noise(scaled):
    md = (scaled[2] / "report.md").read_text()
    section = md.split("## Model scale")[1].split("\n## ")[0]
    assert "ranking by auc, best first: nano: rloo, dapo, grpo; micro: rloo, grpo, dapo; small: dapo, grpo, rloo." \
        in section
    assert "Decided: rloo is significantly better than grpo at nano and micro, and significantly worse at small: " \
           "a decided ranking change." in section
    assert ("rloo's Δ vs grpo changes by -0.100 [-0.106, -0.094] from nano to small (Welch p_Holm < 0.001): a "
            "decided change, rloo loses ground to grpo.") in section
    assert "The order of grpo and dapo differs at micro (against nano) but neither difference is decided: within " \
           "noise." in section
    assert ("The order of grpo and rloo, and of dapo and rloo, also differs at small (against nano); it involves "
            "rloo, whose change from nano is decided (above).") in section
    assert "dapo" not in section.split("Decided:")[1].split("\n")[0]  # noise is never called decided
    assert "](figures/scales.png)" in section and (scaled[2] / "figures" / "scales.png").stat().st_size > 5000
    summary = md.split("## Summary")[1].split("\n## ")[0]
    assert ("Model scale, addition (nano, micro, small): a change with scale of the comparison with grpo is decided "
            "for rloo; the other order differences between scales are within noise") in summary
    assert md.index("## Leaderboard") < md.index("## Model scale") < md.index("## Power")


def test_noise_only_says_not_decided(scaled, tmp_path):
    """Without rloo, only dapo's rank swaps within noise remain: nothing is decided."""
    s, root, _ = scaled
    path = tmp_path / "noise.toml"
    path.write_text(SUITE_TOML.replace('recipes = ["grpo", "dapo", "rloo"]', 'recipes = ["grpo", "dapo"]'))
    noise = suites.load(path)
    assert {c.run_id for c in noise.expand()} <= {c.run_id for c in s.expand()}  # the same runs
    md = (report.build(noise, root, tmp_path / "out") / "report.md").read_text()
    section = md.split("## Model scale")[1].split("\n## ")[0]
    assert ("No ranking change with scale is decided: no recipe is significantly better than grpo at one scale and "
            "significantly worse at another, and no recipe's Δ changes significantly from nano (Holm over the 2 "
            "changes).") in section
    assert "The order of grpo and dapo differs at micro (against nano) but neither difference is decided" in section
    assert "Decided:" not in section
    assert ("Model scale, addition (nano, micro, small): the ranking differs between scales, but no change is "
            "decided: every difference is within noise") in md


def test_regenerates_byte_identically(scaled, tmp_path):
    s, root, out = scaled
    again = report.build(s, root, tmp_path / "again")
    for name in ("report.md", "scales.csv", "leaderboard.csv"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def test_single_scale_suites_have_no_scale_section(tiny, tmp_path):
    s, root, _ = tiny
    assert T.scales(s, report_data.load(s, root)) is None
    out = report.build(s, root, tmp_path / "tiny")
    md = (out / "report.md").read_text()
    assert "Model scale" not in md and not (out / "scales.csv").exists()
    assert not (out / "figures" / "scales.png").exists()
    two_tasks = tmp_path / "two.toml"  # two tasks at one scale each: still no scale comparison
    two_tasks.write_text(s.path.read_text().replace('tasks = ["addition"]', 'tasks = ["addition", "chain_sum"]'))
    assert T.scale_groups(suites.load(two_tasks)) == {}


def test_groups_by_task_and_regime_and_reports_without_results(tmp_path):
    path = tmp_path / "reg.toml"
    path.write_text(SUITE_TOML + '[regimes.on_policy]\n[regimes.mb4]\nminibatches = 4\nrecipes = ["grpo", "dapo"]\n')
    s = suites.load(path)
    assert {k: [c.name for c in v] for k, v in T.scale_groups(s).items()} == {
        ("addition", "on_policy"): ["addition/nano/on_policy", "addition/micro/on_policy", "addition/small/on_policy"],
        ("addition", "mb4"): ["addition/nano/mb4", "addition/micro/mb4", "addition/small/mb4"]}
    out = report.build(s, tmp_path / "empty", tmp_path / "out")
    md = (out / "report.md").read_text()
    assert "### addition (mb4)" in md and "Model scale, addition (on_policy) (nano, micro, small): no finished run yet." in md
    t = rows(out / "scales.csv")
    assert len(list(csv.DictReader(io.StringIO((out / "scales.csv").read_text())))) == 3 * 3 + 2 * 3
    assert t[("dapo", "small")]["params"] == "" and t[("dapo", "small")]["rank"] == ""
    assert "Nothing is decided: no change of Δ between scales can be tested yet" in md
