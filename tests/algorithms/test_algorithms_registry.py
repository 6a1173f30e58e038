"""Names, lookup errors, construction-time validation, capabilities."""

import dataclasses

import pytest
import torch

import algorithms
from algorithms import (CISPO, GAE, GSPO, KL, Aggregation, Critic, DynamicSampling, GroupNorm,
                        OverlongPenalty, PPOClip, Updates)
from algorithms.parts import part
from algorithms.registry import recipe as register_recipe

TWELVE = algorithms.names("family_2025")  # every recipe's id is pinned in test_algorithms_serialize.GOLDEN_IDS


def test_names_come_from_the_modules_of_algorithms_recipes():
    assert TWELVE == ["cispo", "dapo", "dr_grpo", "grpo", "gspo", "ppo", "reinforce", "reinforce_pp", "remax",
                      "rloo", "topr", "vapo"]  # the twelve of the published comparisons
    assert algorithms.names() == sorted(TWELVE + algorithms.names("family_2026"))
    with pytest.raises(ValueError, match="unknown recipe family 'family_2027'; valid: family_2025, family_2026"):
        algorithms.names("family_2027")


def test_every_recipe_registers_its_search_space_beside_the_base():
    from algorithms import search_spaces
    from algorithms.registry import SPACES

    assert set(SPACES) == set(algorithms.names())
    assert algorithms.search_space("grpo") == {**search_spaces.BASE, **search_spaces.CLIP, **search_spaces.BETA}
    assert algorithms.search_space("reinforce") == search_spaces.BASE  # no knobs of its own
    with pytest.raises(algorithms.UnknownRecipeError, match="Did you mean 'grpo'"):
        algorithms.search_space("grpoo")
    with pytest.raises(TypeError, match="space must be a dict"):
        register_recipe("x", space=None)


def test_a_new_recipe_is_one_registration(monkeypatch):
    """What a new module in algorithms/recipes/ does: register a builder with its space; the recipe is
    then named, tunable, printable and usable in a suite (tests/harness/test_suite_variants.py runs one)."""
    from algorithms import registry

    for table in ("RECIPES", "SPACES", "FAMILIES"):  # registered for this test only
        monkeypatch.setattr(registry, table, dict(getattr(registry, table)))

    @register_recipe("grpo_eps3", space={"recipe.objective.eps_high": {"low": 0.2, "high": 0.4}})
    def grpo_eps3() -> algorithms.Recipe:
        """A throwaway recipe (test). Departures: ε_high 0.3."""
        return algorithms.get("grpo").replace(objective=PPOClip(0.2, 0.3))

    assert "grpo_eps3" in algorithms.names() and algorithms.get("grpo_eps3").name == "grpo_eps3"
    assert algorithms.search_space("grpo_eps3")["recipe.objective.eps_high"] == {"low": 0.2, "high": 0.4}
    assert algorithms.get("grpo_eps3").parts_differing(algorithms.get("grpo")) == ["objective"]
    assert registry.FAMILIES["grpo_eps3"] == "test_algorithms_registry"


def test_unknown_name_lists_names_and_suggests_closest():
    with pytest.raises(algorithms.UnknownRecipeError) as e:
        algorithms.get("grpoo")
    msg = str(e.value)
    assert "Did you mean 'grpo'?" in msg
    for name in TWELVE:
        assert name in msg
    with pytest.raises(LookupError, match="Did you mean 'reinforce_pp'"):
        algorithms.get("reinforce_ppp")


def test_duplicate_registration_raises():
    with pytest.raises(ValueError, match="already registered"):
        register_recipe("grpo", space={})(lambda: algorithms.get("grpo"))
    with pytest.raises(ValueError, match="already registered"):
        part("ppo_clip")(type("Another", (algorithms.Objective,), {}))


@pytest.mark.parametrize("make, field", [
    (lambda: PPOClip(eps_low=-0.1), "PPOClip.eps_low"),
    (lambda: PPOClip(eps_high=-0.01), "PPOClip.eps_high"),
    (lambda: PPOClip(dual_clip=1.0), "PPOClip.dual_clip"),
    (lambda: GSPO(eps_low=-3e-4), "GSPO.eps_low"),
    (lambda: CISPO(ratio_max=0.0), "CISPO.ratio_max"),
    (lambda: CISPO(ratio_max=-1.0), "CISPO.ratio_max"),
    (lambda: CISPO(ratio_max=2.0, ratio_min=3.0), "CISPO.ratio_min"),
    (lambda: Aggregation("tokn_mean"), "Aggregation.mode"),
    (lambda: KL(coef=-0.01), "KL.coef"),
    (lambda: KL(estimator="k4"), "KL.estimator"),
    (lambda: KL(placement="advantage"), "KL.placement"),
    (lambda: GroupNorm(scale="mad"), "GroupNorm.scale"),
    (lambda: GroupNorm(eps="1e-6"), "GroupNorm.eps"),
    (lambda: GAE(lam=1.5), "GAE.lam"),
    (lambda: Critic(value_coef=-1.0), "Critic.value_coef"),
    (lambda: Updates(minibatches=0), "Updates.minibatches"),
    (lambda: Updates(epochs=1.5), "Updates.epochs"),
    (lambda: DynamicSampling(max_generation_rounds=0), "DynamicSampling.max_generation_rounds"),
    (lambda: OverlongPenalty(buffer=64, buffer_frac=0.2), "OverlongPenalty.buffer"),
    (lambda: OverlongPenalty(buffer_frac=1.5), "OverlongPenalty.buffer_frac"),
    (lambda: algorithms.get("grpo").replace(aggregation="token_mean"), "Recipe.aggregation"),
    (lambda: algorithms.get("grpo").replace(nll_coef=-0.1), "Recipe.nll_coef"),
    (lambda: algorithms.get("grpo").replace(critic=Critic()), "Recipe.critic"),
    (lambda: algorithms.get("ppo").replace(critic=None), "Recipe.critic"),
    (lambda: algorithms.get("dapo").replace(shaping=OverlongPenalty()), "Recipe.shaping"),
])
def test_invalid_parameters_raise_at_construction_naming_the_field(make, field):
    with pytest.raises(ValueError) as e:
        make()
    assert str(e.value).startswith(field), str(e.value)


def test_unknown_aggregation_lists_the_modes():
    with pytest.raises(ValueError, match="seq_mean_token_sum_norm"):
        Aggregation("tokn_mean")


def test_parts_are_frozen_and_not_rewritten():
    p = PPOClip(0.2, 0.28)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.eps_high = 0.3
    assert PPOClip(eps_low=1).eps_low == 1 and isinstance(PPOClip(eps_low=1).eps_low, int)


NEEDS = {  # reference, critic, greedy_baseline, refill, rounds, epochs×minibatches, pretrain
    "ppo": (True, True, False, False, 1, (1, 4), 0),
    "grpo": (True, False, False, False, 1, (1, 1), 0),
    "dr_grpo": (False, False, False, False, 1, (1, 1), 0),
    "dapo": (False, False, False, True, 10, (1, 1), 0),
    "gspo": (False, False, False, False, 1, (1, 1), 0),
    "cispo": (False, False, False, False, 1, (1, 1), 0),
    "rloo": (True, False, False, False, 1, (1, 1), 0),
    "remax": (True, False, True, False, 1, (1, 1), 0),
    "reinforce": (False, False, False, False, 1, (1, 1), 0),
    "reinforce_pp": (True, False, False, False, 1, (1, 1), 0),
    "topr": (False, False, False, False, 1, (1, 1), 0),
    "vapo": (False, True, False, False, 1, (1, 4), 50),
}


@pytest.mark.parametrize("name", TWELVE)
def test_needs(name):
    n = algorithms.get(name).needs
    ref, critic, greedy, refill, rounds, (epochs, minibatches), pretrain = NEEDS[name]
    assert (n.reference, n.critic, n.greedy_baseline, n.refill, n.max_generation_rounds) == \
        (ref, critic, greedy, refill, rounds)
    assert (n.epochs, n.minibatches, n.updates_per_batch) == (epochs, minibatches, epochs * minibatches)
    assert n.value_pretrain_steps == pretrain
    assert n.entropy is False and n.truncated is False
    r = algorithms.get(name).replace(entropy_coef=0.01, shaping=(algorithms.MaskTruncated(),))
    assert r.needs.entropy and r.needs.truncated


def test_missing_reference_is_a_clear_error():
    from alg_helpers import random_batch
    batch = random_batch().replace(logp_ref=None)
    for name in ("grpo", "rloo", "ppo"):
        recipe = algorithms.get(name)
        with pytest.raises(ValueError, match="logp_ref"):
            adv = recipe.advantages(batch)
            recipe.loss(batch.logp_old.clone().requires_grad_(True), batch, adv)
    # β = 0 recipes run without a reference, and then log no KL
    _, stats = algorithms.get("dapo").loss(batch.logp_old.clone().requires_grad_(True), batch,
                                           algorithms.get("dapo").advantages(batch))
    assert "kl/k1" not in stats


@pytest.mark.parametrize("name", algorithms.names())
def test_descriptions_cite_a_paper_and_state_departures(name):
    r = algorithms.get(name)
    assert "Departures:" in r.description
    assert any(ch.isdigit() for ch in r.description.split("Departures:")[0])  # a year or arXiv id
    assert name in repr(r) and r.id in str(r)


def test_rollouts_validates_shapes_and_selects_rows():
    from alg_helpers import random_batch
    b = random_batch()
    with pytest.raises(ValueError, match="Rollouts.logp_old"):
        b.replace(logp_old=b.logp_old[:, :3])
    with pytest.raises(ValueError, match="Rollouts.rewards"):
        b.replace(rewards=b.rewards[:3])
    with pytest.raises(ValueError, match="Rollouts.max_new_tokens"):
        b.replace(max_new_tokens=0)
    idx = torch.tensor([4, 0, 7])
    s = b.select(idx)
    assert s.size == 3 and torch.equal(s.values, b.values[idx]) and torch.equal(s.correct, b.correct[idx])
    m = torch.zeros(b.size, dtype=torch.bool)
    m[[1, 2]] = True
    assert torch.equal(b.select(m).rewards, b.rewards[m])
    assert s.max_new_tokens == b.max_new_tokens
