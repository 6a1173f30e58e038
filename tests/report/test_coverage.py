"""The coverage verdict: each contrast with the baseline read on sampled pass@1, greedy accuracy and
pass@K, and a kind that tells skill from sharpening and collapse (bench/report/coverage.py)."""
import itertools

import pytest

from bench import results
from bench import suite as suites
from bench.report import coverage, data as report_data

TOML = """
recipes = ["grpo", "dapo", "gspo"]
seeds = 4
tasks = ["addition"]
scales = ["nano"]
budget = 1e9
[eval]
every = 0.5
k = 8
[report]
accuracy = "eval/acc_formatted"
primary = "final"
"""


def test_gain_kind_covers_every_combination_of_findings():
    found = ("up", "down", "equivalent", "flat")
    seen = set()
    for p1, g, k in itertools.product(found, repeat=3):
        kind = coverage.gain_kind(p1, g, k)
        seen.add(kind)
        if k == "down" and "up" in (p1, g):
            assert kind == "collapse", (p1, g, k)
        elif "up" in (p1, g, k) and "down" in (p1, g, k):
            assert kind == "mixed", (p1, g, k)
        elif "up" in (g, k):
            assert kind == "skill", (p1, g, k)
        elif p1 == "up":
            assert kind == "sharpening", (p1, g, k)
        elif "down" in (p1, g, k):
            assert kind == "worse", (p1, g, k)
        elif (p1, g, k) == ("equivalent",) * 3:
            assert kind == "equivalent"
        else:
            assert kind == "undecided", (p1, g, k)
    assert seen == set(coverage.KINDS) and set(coverage.KIND_TEXT) == set(coverage.KINDS)
    with pytest.raises(ValueError, match="one of up, down, equivalent, flat; got 'better'"):
        coverage.gain_kind("better", "flat", "flat")


def _jitter(recipe: str, seed: int, t: float) -> float:
    # a wobble of at most ±0.003 that differs by recipe and seed and sums to zero over the 4 seeds:
    # the paired differences vary (so the t-test has a spread) with mean zero, while every designed
    # gap (≥ 0.08) stays far outside it; none at the warm start (t = 0), which every recipe shares
    r = ("grpo", "dapo", "gspo").index(recipe)
    return t * (-0.003, 0.001, 0.003, -0.001)[(seed + r) % 4]


def build(tmp_path, fake_runs, shape):
    """Runs of TOML's suite whose final evaluations are shape(recipe, seed) -> (pass1, greedy, pass@8)
    (the first evaluation is the warm start's, the same for every recipe), logged as pass@1 ... pass@8."""
    path = tmp_path / "cov.toml"
    path.write_text(TOML)
    s = suites.load(path)
    root = tmp_path / "results"
    for cfg in s.expand():
        steps, evals = fake_runs.curves("grpo", cfg.seed, fake_runs.steps)
        start = (0.30, 0.40, 0.70)
        end = shape(cfg.recipe.name, cfg.seed)
        for e in evals:
            t = e["fraction"]
            p1, g, pk = (a + t * (b - a) + _jitter(cfg.recipe.name, cfg.seed + i, t) for i, (a, b) in enumerate(zip(start, end)))
            e.update({"eval/acc_formatted": p1, "eval/acc_greedy": g, "eval/format_rate": 0.99,
                      "eval/pass@1": p1, "eval/pass@2": (p1 + pk) / 2, "eval/pass@4": pk - 0.01, "eval/pass@8": pk,
                      "eval/pass_k": pk})
        results.write_run(root, cfg.run_id, fake_runs.meta(cfg, "finished", fake_runs.steps), steps, evals)
    return coverage.verdicts(s, report_data.load(s, root))


def test_pass1_up_with_pass_at_k_down_is_collapse_and_greedy_up_is_skill(tmp_path, fake_runs):
    def shape(recipe, seed):
        if recipe == "dapo":  # samples what greedy already answers: pass@1 up, greedy flat, pass@8 down
            return 0.45, 0.42, 0.60
        if recipe == "gspo":  # solves more: greedy and pass@1 up, pass@8 as the baseline's
            return 0.45, 0.50, 0.72
        return 0.35, 0.42, 0.72

    v = build(tmp_path, fake_runs, shape)
    rows = {r["recipe"]: r for r in v.iter_rows(named=True)}
    assert set(rows) == {"dapo", "gspo"} and all(r["pairs"] == 4 and r["k"] == 8 for r in rows.values())
    assert {r["coverage"] for r in rows.values()} == {"pass@8"}
    d, g = rows["dapo"], rows["gspo"]
    assert (d["pass1_dir"], d["pass_k_dir"], d["kind"]) == ("up", "down", "collapse")
    assert d["pass1_diff"] == pytest.approx(0.10, abs=0.005) and d["pass_k_diff"] == pytest.approx(-0.12, abs=0.005)
    assert (g["pass1_dir"], g["greedy_dir"], g["kind"]) == ("up", "up", "skill")
    assert g["greedy_diff"] == pytest.approx(0.08, abs=0.005)
    for r in rows.values():  # each interval holds its mean difference; Holm's p is a probability
        for axis in coverage.AXES:
            assert r[f"{axis}_lo"] <= r[f"{axis}_diff"] <= r[f"{axis}_hi"] and 0 <= r[f"{axis}_p_holm"] <= 1


def test_pass1_up_alone_is_sharpening(tmp_path, fake_runs):
    def shape(recipe, seed):
        return (0.45, 0.42, 0.72) if recipe == "dapo" else (0.35, 0.42, 0.72)

    rows = {r["recipe"]: r for r in build(tmp_path, fake_runs, shape).iter_rows(named=True)}
    assert rows["dapo"]["kind"] == "sharpening" and rows["dapo"]["greedy_dir"] in ("equivalent", "flat")
    assert rows["gspo"]["kind"] == "equivalent", "a recipe that moved nothing is equivalent on all three axes"


def test_runs_without_the_coverage_curve_read_pass_at_k_at_eval_k(tmp_path, fake_runs):
    """Runs recorded before eval/pass@N read pass@K from eval/pass_k, K unknown from the table."""
    evals = [{"pass_k": 0.5, "pass@1": None, "pass@2": None}, {"pass_k": 0.6, "pass@1": 0.3, "pass@2": 0.4}]
    import polars as pl

    frame = pl.DataFrame(evals, schema={"pass_k": pl.Float64, "pass@1": pl.Float64, "pass@2": pl.Float64})
    assert coverage.coverage_column(frame) == ("pass_k", None), "a K that some evaluations lack is not read"
    assert coverage.coverage_column(frame.tail(1)) == ("pass@2", 2), "the largest K every evaluation logged"
    assert coverage.coverage_column(frame.select("pass@1")) == (None, None)


def test_the_frontier_reads_the_kl_each_evaluation_measured_and_falls_back_to_the_training_batches(tmp_path, fake_runs):
    """A run that logged eval/kl_k1 is placed at its own measurement; one that did not, at the KL of
    the training batches before each evaluation (0 at the warm start)."""
    path = tmp_path / "cov.toml"
    path.write_text(TOML)
    s = suites.load(path)
    root = tmp_path / "results"
    for cfg in s.expand():
        steps, evals = fake_runs.curves("grpo", cfg.seed, fake_runs.steps)
        for e in evals:
            e["eval/acc_formatted"] = e["eval/acc_greedy"]
            if cfg.recipe.name == "dapo":
                e["eval/kl_k1"] = 0.5 + e["fraction"] + cfg.seed
        results.write_run(root, cfg.run_id, fake_runs.meta(cfg, "finished", fake_runs.steps), steps, evals)
    kl = coverage.kl_at_evals(report_data.load(s, root))
    dapo, rest = kl.filter(kl["recipe"] == "dapo"), kl.filter(kl["recipe"] != "dapo")
    assert dapo.height and (dapo["kl_source"] == "eval").all()
    assert (dapo["kl"] == 0.5 + dapo["fraction"] + dapo["seed"]).all(), "the run's own figure, even at step 0"
    assert rest.height and (rest["kl_source"] == "steps").all()
    assert (rest.filter(rest["step"] == 0)["kl"] == 0.0).all() and (rest.filter(rest["step"] > 0)["kl"] > 0).all()
