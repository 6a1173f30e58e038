"""Canonical JSON round-trips, pinned ids, diffs."""

import json

import pytest

import algorithms
from algorithms import KL, Aggregation, OverlongPenalty, PPOClip, Updates

# A changed default changes an id: update these only on purpose (and say so in the commit).
GOLDEN_IDS = {
    "cispo": "9c8e8ede6fc9",
    "dapo": "54bcd091c106",
    "dr_grpo": "565ed677e3ab",
    "grpo": "9a54ca060aaf",
    "gspo": "43ea9fc80cb5",
    "ppo": "bb1b7b44dcd7",
    "reinforce": "5dd45b49d747",
    "reinforce_pp": "552263deb737",
    "remax": "544b0e3b425a",
    "rloo": "84af5dd3f628",
    "topr": "01941b4a6b95",
    "vapo": "99df7d150919",
    # the 2026 family: new recipes; the twelve above keep the ids they were published under (LATER fields)
    "clip_cov": "614217f3bbb5",
    "decoupled_ppo": "000d13e7ce12",
    "dppo_kl": "3ce718bc6261",
    "dppo_tv": "2134ec7d84c6",
    "gmpo": "97ffb2f20818",
    "gpg": "48d88d0aa9c6",
    "grpo_tis": "701ffe608bae",
    "kimi": "be7591460d9e",
    "kl_cov": "a102b8b0ab11",
    "luspo": "6ce56757c3c6",
    "opsm": "19fce409327e",
    "sapo": "827ae19f1a93",
    "vespo": "6b4363100211",
}

GRPO_JSON = (
    '{"advantage":{"eps":1e-06,"scale":"std","type":"group_norm"},'
    '"aggregation":{"mode":"seq_mean_token_mean","type":"aggregation"},"critic":null,'
    '"entropy_coef":0.0,"filter":{"type":"no_filter"},'
    '"kl":{"coef":0.04,"estimator":"k3","placement":"loss","type":"kl"},"name":"grpo","nll_coef":0.0,'
    '"objective":{"dual_clip":null,"eps_high":0.2,"eps_low":0.2,"type":"ppo_clip"},"shaping":[],'
    '"type":"recipe","updates":{"epochs":1,"minibatches":1,"type":"updates"}}'
)


def test_golden_ids():
    assert {n: algorithms.get(n).id for n in algorithms.names()} == GOLDEN_IDS


def test_canonical_json_of_grpo():
    assert algorithms.get("grpo").to_json() == GRPO_JSON


@pytest.mark.parametrize("name", sorted(GOLDEN_IDS))
def test_round_trip(name):
    r = algorithms.get(name)
    back = algorithms.from_json(r.to_json())
    assert back == r and hash(back) == hash(r)
    assert back.name == name and back.id == r.id and back.to_json() == r.to_json()
    assert back.needs == r.needs
    d = json.loads(r.to_json())
    assert all("type" in d[k] for k in ("advantage", "objective", "aggregation", "kl", "filter", "updates"))


def test_round_trip_of_a_modified_recipe_with_tuples_and_nones():
    r = algorithms.get("dapo").replace(
        name="dapo_filtered", shaping=(OverlongPenalty(buffer=64, buffer_frac=None),
                                       algorithms.MaskTruncated()),
        objective=PPOClip(0.2, 0.28, dual_clip=3.0), critic=None)
    back = algorithms.from_json(r.to_json())
    assert back == r and back.shaping[0].buffer == 64 and back.name == "dapo_filtered"


def test_id_ignores_the_name_and_int_float_spelling():
    r = algorithms.get("grpo")
    assert r.replace(name="mine").id == r.id
    assert r.replace(kl=KL(coef=0.04, estimator="k3")).id == r.id
    a = r.replace(objective=PPOClip(eps_low=0, eps_high=1))
    b = r.replace(objective=PPOClip(eps_low=0.0, eps_high=1.0))
    assert a.id == b.id and a.to_json() == b.to_json() and a == b
    assert r.replace(objective=PPOClip(0.2, 0.28)).id != r.id


def test_unknown_type_tag_and_field_fail_loudly():
    d = json.loads(algorithms.get("grpo").to_json())
    d["objective"]["type"] = "ppo_clp"
    with pytest.raises(ValueError, match=r"\$\.objective\.type.*did you mean 'ppo_clip'"):
        algorithms.from_json(json.dumps(d))
    d = json.loads(algorithms.get("grpo").to_json())
    d["objective"]["epsilon"] = 0.2
    with pytest.raises(ValueError, match=r"\$\.objective\.epsilon"):
        algorithms.from_json(json.dumps(d))
    d = json.loads(algorithms.get("grpo").to_json())
    d["aggregation"]["mode"] = "tokn_mean"
    with pytest.raises(ValueError, match=r"\$\.aggregation\.mode: unknown value 'tokn_mean'"):
        algorithms.from_json(json.dumps(d))


def test_diff_grpo_vs_dapo():
    diff = algorithms.get("grpo").diff(algorithms.get("dapo"))
    assert diff["objective.eps_high"] == (0.2, 0.28)
    assert diff["aggregation.mode"] == ("seq_mean_token_mean", "token_mean")
    assert diff["kl.coef"] == (0.04, 0.0)
    assert diff["filter.type"] == ("no_filter", "dynamic_sampling")
    assert diff["shaping.0.type"] == (None, "overlong_penalty")
    assert "advantage.scale" not in diff and "name" not in diff
    assert algorithms.get("grpo").diff(algorithms.get("grpo").replace(name="x")) == {}


def test_diff_dr_grpo_vs_grpo_is_three_fields():
    diff = algorithms.get("dr_grpo").diff(algorithms.get("grpo"))
    assert set(diff) == {"advantage.scale", "aggregation.mode", "kl.coef"}


def test_recipes_print_readably():
    text = str(algorithms.get("vapo"))
    assert text.splitlines()[0] == f"vapo (id {GOLDEN_IDS['vapo']})"
    assert "length_adaptive_gae(alpha=0.05" in text and "critic(value_coef=0.1" in text
    assert "updates(epochs=1, minibatches=4)" in text
    assert repr(algorithms.get("grpo")).startswith("Recipe(name='grpo', advantage=GroupNorm(")


def test_recipes_are_hashable_and_usable_as_keys():
    table = {algorithms.get(n): n for n in algorithms.names()}
    assert len(table) == len(algorithms.names())  # no two named recipes are the same algorithm
    assert algorithms.get("grpo").replace(updates=Updates(1, 1), aggregation=Aggregation("seq_mean_token_mean")) in table
