"""Claims as experiments (issue 14): `[claims.NAME]` tables in a suite, their validation, `--only
claim=NAME`, the verdict rule, growth as a slope, a claim's mechanism, and suites/claims.toml sharing
family-2026's runs."""
from pathlib import Path

import pytest

from bench import suite as suites
from bench.report import tables as T

BASE = """\
recipes = ["grpo", "dr_grpo", "dapo"]
seeds = [0, 1]
tasks = ["addition"]
scales = ["nano"]

[budget]
"addition/nano" = 2e9

[regimes.on_policy]
[regimes.mb4]
minibatches = 4
recipes = ["grpo", "dapo"]
"""
GOOD = """
[claims.std]
paper = "Liu et al. 2025"
claim = "std normalisation up-weights low-variance groups"
cell = "addition/nano/on_policy"
a = "grpo"
b = "dr_grpo"
metric = "steps:adv/low_std_weight_frac"
expect = "greater"
"""


def load(tmp_path: Path, text: str) -> suites.Suite:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return suites.load(p)


def test_claims_parse_and_select_their_runs(tmp_path):
    s = load(tmp_path, BASE + GOOD + GOOD.replace("claims.std", "claims.reuse").replace(
        'a = "grpo"', 'a = "dapo@addition/nano/mb4"').replace('b = "dr_grpo"', 'b = "dapo"').replace(
        '"steps:adv/low_std_weight_frac"', '"auc"'))
    assert [c.name for c in s.claims] == ["std", "reuse"]
    assert s.claims[1].arm("a") == ("dapo", "addition/nano/mb4") and s.claims[1].arm("b") == ("dapo", "addition/nano/on_policy")
    picked = s.expand(s.parse_only(["claim=reuse"]))
    assert sorted((c.recipe.name, c.tags["cell"], c.seed) for c in picked) == [
        ("dapo", "addition/nano/mb4", 0), ("dapo", "addition/nano/mb4", 1),
        ("dapo", "addition/nano/on_policy", 0), ("dapo", "addition/nano/on_policy", 1)]
    assert len(s.expand(s.parse_only(["claim=std,reuse"]))) == 8
    with pytest.raises(ValueError, match="unknown claim 'nope'; valid: std, reuse"):
        s.parse_only(["claim=nope"])


@pytest.mark.parametrize("change, key, needle", [
    (('cell = "addition/nano/on_policy"', 'cell = "addition/nano"'), "claims.std.cell", "unknown cell 'addition/nano'"),
    (('a = "grpo"', 'a = "grpo@addition/nano/lag2"'), "claims.std.a", "unknown cell 'addition/nano/lag2'"),
    (('b = "dr_grpo"', 'b = "dr_grpo@addition/nano/mb4"'), "claims.std.b", "unknown recipe 'dr_grpo'"),
    (('b = "dr_grpo"', 'b = "grpo"'), "claims.std.b", "the same arm as a"),
    (('"steps:adv/low_std_weight_frac"', '"steps:adv/nope"'), "claims.std.metric", "steps:COLUMN"),
    (('"steps:adv/low_std_weight_frac"', '"accuracy"'), "claims.std.metric", "expected auc, final, plateau"),
    (('"steps:adv/low_std_weight_frac"', '"auc_to:x"'), "claims.std.metric", "auc_to:FLOPS needs a compute > 0"),
    (('"steps:adv/low_std_weight_frac"', '"auc_to:0"'), "claims.std.metric", "auc_to:FLOPS needs a compute > 0"),
    (('"steps:adv/low_std_weight_frac"', '"auc_to:3e9"'), "claims.std.metric",
     "has budget 2e+09flops; auc_to needs FLOPs budgets of at least 3e+09 in both arms"),
    (('expect = "greater"', 'expect = "bigger"'), "claims.std.expect", "bigger"),
    (('expect = "greater"', 'expect = "equivalent"'), "claims.std.margin", "needs its own margin"),
    (('paper = "Liu et al. 2025"\n', ''), "claims.std.paper", "missing"),
    (('"steps:adv/low_std_weight_frac"', '"slope:len/nope"'), "claims.std.metric", "unknown column 'len/nope'"),
    (('expect = "greater"', 'expect = "greater"\nmechanism = "steps:kl/k1"'), "claims.std.mechanism",
     "is its mechanism already"),
    (('"steps:adv/low_std_weight_frac"\nexpect = "greater"', '"auc"\nexpect = "greater"\nmechanism = "kl/k1"'),
     "claims.std.mechanism", "steps:COLUMN (its mean over the run) or slope:COLUMN"),
    (('"steps:adv/low_std_weight_frac"\nexpect = "greater"', '"auc"\nexpect = "greater"\nmechanism = "steps:kl/nope"'),
     "claims.std.mechanism", "unknown column 'kl/nope'"),
    (('expect = "greater"', 'expect = "equivalent"'), "claims.std.margin", "on a steps: metric needs its own margin"),
    (('expect = "greater"', 'expect = "greater"\nengage = "steps:kl/k1"'), "claims.std.engage_min", "needs both"),
    (('expect = "greater"', 'expect = "greater"\nengage_min = 0.02'), "claims.std.engage", "needs both"),
    (('expect = "greater"', 'expect = "greater"\nengage = "kl/k1"\nengage_min = 0.02'), "claims.std.engage",
     "fall:COLUMN"),
    (('expect = "greater"', 'expect = "greater"\nengage = "steps:kl/k1+kl/nope"\nengage_min = 0.02'),
     "claims.std.engage", "unknown column 'kl/nope'"),
    (('expect = "greater"', 'expect = "greater"\nengage = "steps:kl/k1"\nengage_min = 0'), "claims.std.engage_min",
     "> 0"),
    (('expect = "greater"', 'expect = "greater"\nengage = "steps:kl/k1"\nengage_min = 0.1\nengage_arm = "c"'),
     "claims.std.engage_arm", "'diff'"),
])
def test_bad_claims_fail_with_file_and_key(tmp_path, change, key, needle):
    with pytest.raises(ValueError) as e:
        load(tmp_path, BASE + GOOD.replace(*change))
    msg = str(e.value)
    assert msg.startswith(str(tmp_path / "s.toml")) and f"{key}" in msg and needle in msg, msg


def test_auc_to_compares_runs_at_equal_compute():
    import math
    # accuracy 0 -> 0.6 at 1e9 then flat to 2e9: over the first 1e9 the mean is 0.3, over 2e9 0.45
    f, a = [0.0, 1e9, 2e9], [0.0, 0.6, 0.6]
    assert T.auc_to(f, a, 1e9) == pytest.approx(0.3) and T.auc_to(f, a, 2e9) == pytest.approx(0.45)
    # interpolated between evaluations, and the same over a run's own budget as auc
    assert T.auc_to(f, a, 0.5e9) == pytest.approx(0.15)
    from bench.report import stats
    assert T.auc_to(f, a, 2e9) == pytest.approx(stats.curve_auc([0, 0.5, 1], a))
    assert math.isnan(T.auc_to(f, a, 3e9))  # the run stopped before
    assert math.isnan(T.auc_to([0.0], [0.1], 1e9))


def test_verdict_rule():
    v = T.claim_verdict
    assert v("greater", 0.03, 0.01, False, 10) == "reproduced"
    assert v("greater", -0.03, 0.01, False, 10) == "contradicted"  # significant the other way
    assert v("less", -0.03, 0.01, False, 10) == "reproduced"
    assert v("greater", 0.003, 0.4, True, 10) == "undecided"  # shown smaller than the margin: a qualifier, not a verdict
    assert T.claim_qualifier("greater", 0.4, True) == "inside ±margin"
    assert v("greater", 0.01, 0.2, False, 10) == "undecided"
    assert v("equivalent", 0.001, 0.8, True, 10) == "reproduced"
    assert v("equivalent", 0.05, 0.001, False, 10) == "contradicted"
    assert v("equivalent", 0.01, 0.3, False, 10) == "undecided"
    assert v("greater", 0.5, 0.0, False, 1) == "undecided"  # one seed decides nothing
    assert v("greater", 0.03, 0.01, False, 10, engaged=False) == "not engaged"  # the part never acted
    assert v("equivalent", 0.001, 0.8, True, 10, engaged=False) == "not engaged"
    assert v("greater", 0.03, 0.01, False, 10, engaged=True) == v("greater", 0.03, 0.01, False, 10, engaged=None)


def test_one_verdict_rule_is_symmetric_at_the_margin():
    """Issue 42's case: a significant −0.012 and a significant +0.013, each inside ±0.02, on claims
    that expect a rise: the same kind of verdict, opposite directions, the same qualifier; and the
    same two effects when not significant are both undecided, not one contradicted."""
    v, q = T.claim_verdict, T.claim_qualifier
    down, up = v("greater", -0.012, 0.04, True, 5), v("greater", +0.013, 0.043, True, 5)
    assert (down, up) == ("contradicted", "reproduced")
    assert q("greater", 0.04, True) == q("greater", 0.043, True) == "significant, inside ±margin"
    assert v("less", -0.012, 0.04, True, 5) == v("greater", +0.013, 0.043, True, 5) == "reproduced"
    assert v("less", -0.012, 0.056, True, 5) == v("greater", +0.013, 0.056, True, 5) == "undecided"


def test_shipped_claims_suite_shares_family_2026s_runs():
    claims, family = suites.load("claims"), suites.load("family-2026")
    assert len([c for c in claims.claims if c.kind == "claim"]) >= 15 and all(c.paper and c.claim for c in claims.claims)
    # an arm that family-2026 also runs (the same recipe, cell and seed) is the same run: one results
    # directory holds both suites, and the claims' variants and extra seeds only add runs
    ours = {(c.recipe.name, c.tags["cell"], c.seed): c.run_id for c in claims.expand()}
    theirs = {(c.recipe.name, c.tags["cell"], c.seed): c.run_id for c in family.expand()}
    shared = set(ours) & set(theirs)
    assert len(shared) >= 30 and all(ours[k] == theirs[k] for k in shared)
    for c in claims.claims:  # each claim reruns alone
        assert claims.expand(claims.parse_only([f"claim={c.name}"]))


def test_a_growth_claim_reads_a_slope_over_the_budget():
    import polars as pl
    # len/incorrect rising 10 tokens per whole budget in seed 0, 4 in seed 1 (binned at the bins' upper edges)
    frac = [0.25, 0.5, 0.75, 1.0]
    steps = pl.DataFrame({"cell": ["c"] * 8, "recipe": ["grpo"] * 8, "seed": [0] * 4 + [1] * 4, "frac": frac * 2,
                          "len/incorrect": [50 + 10 * f for f in frac] + [40 + 4 * f for f in frac]})
    empty = pl.DataFrame()
    assert T._claim_values(empty, steps, empty, "slope:len/incorrect", "grpo", "c") == pytest.approx({0: 10.0, 1: 4.0})
    assert T._claim_values(empty, steps, empty, "steps:len/incorrect", "grpo", "c") == pytest.approx(
        {0: 56.25, 1: 42.5})  # the mean, for contrast
    assert T._claim_values(empty, steps, empty, "slope:len/nope", "grpo", "c") == {}


def test_the_engagement_gate_reads_its_arm_and_its_threshold():
    """The gate: |mean over seeds| of the gate's metric on arm a, arm b, or |a − b|, against engage_min;
    summed columns (A+B) and fall: (relative fall from the first bin to the last) read the binned steps;
    a column no run recorded is not engaged (nothing shows the part acted)."""
    import polars as pl
    from bench.config import Claim

    frac = [0.5, 1.0]
    rows = {"cell": ["c"] * 8, "recipe": ["x"] * 4 + ["y"] * 4, "seed": [0, 0, 1, 1] * 2, "frac": frac * 4,
            "policy/clip_frac_low": [0.01, 0.01, 0.01, 0.01, 0.0, 0.0, 0.0, 0.0],
            "policy/clip_frac_high": [0.005, 0.015, 0.005, 0.015, 0.001, 0.001, 0.001, 0.001],
            "policy/entropy": [1.0, 0.6, 1.0, 0.8, 1.0, 1.0, 1.0, 0.9]}
    steps, empty = pl.DataFrame(rows), pl.DataFrame()

    def gate(engage, engage_min, arm="a"):
        c = Claim(paper="p", claim="c", cell="c", a="x", b="y", metric="auc", expect="greater", engage=engage,
                  engage_min=engage_min, engage_arm=arm)
        return T.engagement(empty, steps, empty, c)

    both = "steps:policy/clip_frac_low+policy/clip_frac_high"
    assert gate(both, 0.02) == (pytest.approx(0.02), True)  # 0.01 + mean(0.005, 0.015): exactly at the gate
    assert gate(both, 0.021) == (pytest.approx(0.02), False)
    assert gate(both, 0.02, "b") == (pytest.approx(0.001), False)
    assert gate(both, 0.019, "diff") == (pytest.approx(0.019), True)
    assert gate("fall:policy/entropy", 0.3) == (pytest.approx(0.3), True)  # falls 40% and 20%: 30% on average
    assert gate("fall:policy/entropy", 0.3, "b")[1] is False
    value, engaged = gate("steps:policy/cov_frac", 0.02)
    assert engaged is False and value != value  # not recorded: nan, not engaged
    c = Claim(paper="p", claim="c", cell="c", a="x", b="y", metric="auc", expect="greater")
    assert T.engagement(empty, steps, empty, c) is None  # no gate declared


def test_an_outcome_claim_names_its_mechanism_and_a_step_claim_is_its_own(tmp_path):
    s = load(tmp_path, BASE + GOOD + GOOD.replace("claims.std", "claims.out").replace(
        '"steps:adv/low_std_weight_frac"\nexpect = "greater"',
        '"auc"\nexpect = "greater"\nmechanism = "slope:len/incorrect"'))
    assert [c.mechanism for c in s.claims] == [None, "slope:len/incorrect"]


def test_a_claim_whose_arms_cost_differently_per_step_is_also_read_at_matched_steps():
    """Arm a spends 1.5x the FLOPs per step (a part that adds a forward pass): at matched FLOPs it made
    fewer updates. at_matched_steps compares mean accuracy over the first S steps, S the fewest any run
    reached; here a's accuracy rises 0.1 per 10 steps and b's 0.05, so over 20 steps a − b = 0.05."""
    import polars as pl

    rows = []
    for recipe, steps_done, slope in (("a", 20, 0.01), ("b", 30, 0.005)):
        for seed in (0, 1, 2):
            for step in range(0, steps_done + 1, 10):
                rows.append({"cell": "c", "recipe": recipe, "seed": seed, "step": step,
                             "acc": 0.2 + slope * step + 0.001 * seed})
    evals = pl.DataFrame(rows)
    end, r = T.at_matched_steps(evals, ("a", "c"), ("b", "c"))
    assert end == 20 and r.n == 3 and r.diff == pytest.approx(0.5 * 20 * (0.01 - 0.005))
    runs = pl.DataFrame({"cell": ["c"] * 2, "recipe": ["a", "b"], "status": ["finished"] * 2, "steps_done": [20, 30],
                         "flops_spent": [3e9, 3e9]})
    assert T.flops_per_step(runs, "a", "c") / T.flops_per_step(runs, "b", "c") == pytest.approx(1.5)
    assert T.at_matched_steps(evals, ("a", "c"), ("nope", "c")) is None


def test_the_published_claims_read_compute_changing_contrasts_at_matched_steps_too():
    import polars as pl

    t = pl.read_csv(Path("reports/claims/claims.csv"))
    far = t.filter((pl.col("flops_per_step_ratio") - 1).abs() > T.STEP_COST_TOL)
    on_accuracy = far.filter(~pl.col("metric").str.starts_with("steps:") & ~pl.col("metric").str.starts_with("slope:"))
    assert {"decoupled_corrects_staleness", "mismatch_slows_learning"} <= set(on_accuracy["claim"])
    assert on_accuracy["matched_steps"].null_count() == 0 and on_accuracy["steps_diff"].null_count() == 0
