"""Claims say how many parts their arms differ in (computed from the configs), and contrasts that
hold by construction are sanity checks, reported apart (issue 24, items 2 and 3)."""
from pathlib import Path

import polars as pl
import pytest

from bench import suite as suites
from bench.report.tables import arm_differences

CLAIMS = Path("reports/claims")


def test_published_claims_count_the_parts_their_arms_differ_in():
    s = suites.load("claims")
    t = pl.read_csv(CLAIMS / "claims.csv")
    for r in t.iter_rows(named=True):
        (ra, ca), (rb, cb) = (x.split("@", 1) for x in (r["a"], r["b"]))
        diff = arm_differences(s, (ra, ca), (rb, cb))
        assert (r["parts_differing"], r["differs"]) == (len(diff), ", ".join(diff)), r["claim"]
    # issue 24's acceptance: ≥ 15 claims, every primary contrast a one-part ablation (its "≤ 2 undecided"
    # was met under the old rule, which called a claimed gain inside the margin contradicted)
    assert t.height >= 15 and (t["parts_differing"] == 1).all()
    kl = t.filter(pl.col("claim") == "kl_slows_drift").row(0, named=True)
    assert kl["differs"] == "kl"  # grpo_nokl is grpo with β = 0 and nothing else


def test_published_claims_report_their_mechanism_and_outcome():
    """Each claim is read on its mechanism and on the outcome (the primary), the same arms paired by seed;
    where the claim's own metric is one of the two, that side repeats the claim's contrast."""
    s = suites.load("claims")
    t = pl.read_csv(CLAIMS / "claims.csv")
    nums = [f"{k}_{x}" for k in ("mechanism", "outcome") for x in ("diff", "lo", "hi", "p")]
    t = t.with_columns(pl.col(c).cast(pl.String).replace("", None).cast(pl.Float64) for c in nums)  # null is ""
    for r in t.iter_rows(named=True):
        c = next(c for c in s.claims if c.name == r["claim"])
        accuracy = c.metric in ("auc", "final", "plateau")
        assert r["outcome"] == (c.metric if accuracy else s.report.primary), r["claim"]
        assert r["mechanism"] == (c.mechanism if accuracy else c.metric), r["claim"]
        same = "outcome" if accuracy else "mechanism"
        assert (r[f"{same}_diff"], r[f"{same}_p"]) == pytest.approx((r["diff"], r["p"])), r["claim"]
        assert r["outcome_diff"] is not None, r["claim"]
    # every claim names its mechanism but the mismatch ones (an fp32 sampler logs no mismatch to compare)
    assert t.filter(pl.col("mechanism").is_null())["claim"].to_list() == ["mismatch_slows_learning",
                                                                          "mismatch_slows_learning_int4"]


def test_sanity_checks_are_apart_and_pass():
    s = suites.load("claims")
    sanity = pl.read_csv(CLAIMS / "sanity.csv")
    claims = pl.read_csv(CLAIMS / "claims.csv")
    declared = {c.name for c in s.claims if c.kind == "sanity"}
    assert set(sanity["claim"]) == declared == {"std_norm_upweights_low_variance", "clip_never_binds_on_policy",
                                                "cispo_keeps_all_tokens"}
    assert not declared & set(claims["claim"]) and sanity["passed"].all()
    assert claims.height == len(s.claims) - len(declared)


def test_a_variant_is_a_one_part_ablation(tmp_path):
    p = tmp_path / "ablation.toml"
    p.write_text("""recipes = ["grpo", "grpo_cliphigher"]
seeds = 2
tasks = ["addition"]
scales = ["nano"]
budget = "2steps"
[variants.grpo_cliphigher]
base = "grpo"
"objective.eps_high" = 0.28
[claims.clip_higher]
paper = "DAPO"
claim = "clip-higher keeps entropy up"
cell = "addition/nano"
a = "grpo_cliphigher"
b = "grpo"
metric = "steps:policy/entropy"
expect = "greater"
""")
    s = suites.load(p)
    assert arm_differences(s, ("grpo_cliphigher", "addition/nano"), ("grpo", "addition/nano")) == ["objective"]
    assert s.claims[0].kind == "claim"


def test_a_claim_kind_must_be_claim_or_sanity(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('recipes = ["grpo", "dapo"]\nseeds = 2\ntasks = ["addition"]\nscales = ["nano"]\nbudget = "2steps"\n'
                 '[claims.x]\npaper = "p"\nclaim = "c"\ncell = "addition/nano"\na = "dapo"\nb = "grpo"\n'
                 'metric = "auc"\nexpect = "greater"\nkind = "finding"\n')
    with pytest.raises(ValueError, match="claims.x.kind"):
        suites.load(p)


def test_the_clipping_table_shows_where_the_norm_clip_binds():
    """Recomputed from the committed steps: the share of steps whose pre-clip gradient norm exceeds
    train.grad_clip (1.0), per recipe (issue 23 item 3)."""
    import json

    text = Path("reports/addition-format/report.md").read_text()
    assert "| grad norm (median, pre-clip) | norm clip binds |" in text
    runs = Path("reports/addition-format/data/runs")
    binds = {}
    for d in sorted(runs.iterdir()):
        meta = json.loads((d / "run.json").read_text())
        if meta["config"]["tags"]["cell"] != "addition/nano/on_policy" or meta["recipe_name"] not in ("rloo", "reinforce"):
            continue
        norms = pl.read_parquet(d / "steps.parquet")["grad/norm"].drop_nans()
        binds.setdefault(meta["recipe_name"], []).extend((norms > meta["config"]["train"]["grad_clip"]).to_list())
    assert sum(binds["rloo"]) / len(binds["rloo"]) == 1.0 and sum(binds["reinforce"]) == 0
    assert "It binds on most steps of" in text and "rloo" in text


def test_the_claims_report_leads_with_its_verdicts():
    """A report leads with a picture of its verdicts: the claims figure comes before the first table."""
    md = (CLAIMS / "report.md").read_text()
    assert md.index("figures/claims.png") < md.index("## Leaderboard") and (CLAIMS / "figures" / "claims.png").is_file()
    t = pl.read_csv(CLAIMS / "claims.csv")
    counts = ", ".join(f"{t.filter(pl.col('verdict') == v).height} {v}"
                       for v in ("reproduced", "contradicted", "undecided", "not engaged"))
    assert f"The {t.height} claims' contrasts and verdicts ({counts};" in md


def test_the_claims_figure_draws_claims_without_a_margin_or_a_value():
    from bench.report import figures as F

    t = pl.DataFrame({"claim": ["a", "b", "c"], "metric": ["auc", "steps:kl/k1", "auc"], "margin": [0.02, None, 0.02],
                      "mean_b": [0.5, 0.03, 0.5], "diff": [0.01, 0.05, None], "diff_lo": [0.0, 0.02, None],
                      "diff_hi": [0.02, 0.08, None], "verdict": ["reproduced", "undecided", "undecided"]})
    fig = F.claims(t)
    labels = [x.get_text() for x in fig.axes[0].get_yticklabels()]
    assert labels == ["a  [auc]", "b  [steps:kl/k1, ÷|b|]", "c  [auc]"]
    assert len(fig.axes[0].lines) >= 2  # the zero line and the drawn claims; c has no value and no point


def test_the_readme_counts_the_published_verdicts():
    t = pl.read_csv(CLAIMS / "claims.csv")
    n = {v: t.filter(pl.col("verdict") == v).height for v in ("reproduced", "contradicted", "undecided", "not engaged")}
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert (f"**{n['reproduced']} reproduced, {n['contradicted']} contradicted, {n['undecided']} undecided, "
            f"{n['not engaged']} not engaged**") in readme


def test_every_published_claim_passes_or_fails_its_engagement_gate():
    """Issue 42, acceptance 1: claims.csv says for every claim whether its part acted (the gate's metric,
    arm, value and threshold); no claim below its gate is called reproduced or contradicted, none is in
    Holm's family, and the gate is what the runs' step metrics say."""
    s = suites.load("claims")
    t = pl.read_csv(CLAIMS / "claims.csv")
    assert t["engaged"].null_count() == 0 and t["engage"].null_count() == 0
    assert ((t["engage_value"] >= t["engage_min"]) == t["engaged"]).all()
    off = t.filter(~pl.col("engaged"))
    assert (off["verdict"] == "not engaged").all() and (off["p_holm"].cast(pl.String).fill_null("") == "").all()
    assert (t.filter(pl.col("engaged"))["verdict"] != "not engaged").all()
    gates = {c.name: (c.engage, c.engage_min, c.engage_arm) for c in s.claims if c.kind == "claim"}
    assert {r["claim"]: (r["engage"], r["engage_min"], r["engage_arm"]) for r in t.iter_rows(named=True)} == gates
