"""Stats are tensors; merging micro-batch stats reproduces the full-batch stats."""

import pytest
import torch

import algorithms
from algorithms.stats import rule
from alg_helpers import perturbed, random_batch


@pytest.mark.parametrize("name", algorithms.names())
def test_merged_micro_batch_stats_equal_full_batch_stats(name):
    if name in ("clip_cov", "kl_cov"):
        pytest.skip("covariance over each micro-batch (verl's form): split-dependent by design")
    recipe = algorithms.get(name)
    batch = recipe.shape(random_batch(seed=13))
    adv = recipe.advantages(batch)
    w = recipe.loss_weights(batch)
    logp = perturbed(batch.logp_old, 0.3)
    ent = torch.rand(logp.shape, generator=torch.Generator().manual_seed(1), dtype=logp.dtype)
    _, full = recipe.loss(logp, batch, adv, weights=w, entropy=ent)
    parts = [recipe.loss(logp[i], batch.select(i), adv[i], weights=w[i], entropy=ent[i])[1]
             for i in torch.split(torch.arange(batch.size), [2, 7, 3])]
    merged = algorithms.merge_stats(parts)
    assert set(merged) == set(full)
    for k, v in full.items():
        assert v.dim() == 0 and not v.requires_grad, k
        assert merged[k].item() == pytest.approx(v.item(), rel=1e-9, abs=1e-12), k
    assert {"loss/policy", "loss/kl", "policy/entropy", "kl/k1", "kl/k3", "policy/ratio_mean",
            "policy/ratio_min", "policy/ratio_max", "tokens", "sequences"} <= set(full)


def test_expected_keys_per_objective():
    batch = random_batch(seed=13)
    keys = {}
    for name in ("gspo", "cispo", "ppo", "vapo"):
        r = algorithms.get(name)
        keys[name] = set(r.loss(batch.logp_old.clone().requires_grad_(True), batch, r.advantages(batch))[1])
    assert "policy/clip_frac_seq" in keys["gspo"] and "policy/clip_frac_seq" not in keys["ppo"]
    assert "policy/weight_capped_frac" in keys["cispo"] and "policy/weight_capped_frac" not in keys["gspo"]
    assert "loss/nll" in keys["vapo"] and "loss/nll" not in keys["ppo"]


def test_rule_is_the_declared_merge():
    assert [rule(k) for k in ("loss/policy", "tokens", "policy/ratio_max", "policy/ratio_min",
                              "policy/clip_frac_seq", "kl/k3", "grad/norm")] == ["sum", "sum", "max", "min", "seq", "token",
                                                                                 "mean"]
    with pytest.raises(LookupError, match="policy/clip_frac_mid: a stat that is not a declared metric"):
        rule("policy/clip_frac_mid")  # no guess from the name: declare it (algorithms/metrics.py)


def test_empty_micro_batch_is_harmless():
    recipe = algorithms.get("grpo")
    batch = random_batch(seed=2)
    adv = recipe.advantages(batch)
    w = recipe.loss_weights(batch)
    logp = perturbed(batch.logp_old, 0.2)
    empty = batch.select(torch.tensor([], dtype=torch.long))
    loss, stats = recipe.loss(logp[:0], empty, adv[:0], weights=w[:0])
    assert loss.item() == 0.0 and stats["tokens"].item() == 0
    _, full = recipe.loss(logp, batch, adv, weights=w)
    merged = algorithms.merge_stats([stats, full])
    assert merged["policy/ratio_max"].item() == full["policy/ratio_max"].item()
    assert merged["policy/ratio_mean"].item() == pytest.approx(full["policy/ratio_mean"].item())
