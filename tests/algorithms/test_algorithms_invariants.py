"""Invariants every recipe keeps: micro-batch splits, on-policy equivalence, reward shifts."""

import pytest
import torch

import algorithms
from algorithms import (KL, RLOO, Aggregation, BatchMean, GroupNorm, ReinforcePP, ReinforcePPBaseline, ReMax, aggregate)
from alg_helpers import perturbed, random_batch

SPLITS = {"1xB": lambda B: [B], "Bx1": lambda B: [1] * B, "uneven": lambda B: [5, 1, B - 6]}


def step_grads(recipe, batch, sizes, logp, values):
    """Gradients of the summed micro-batch losses (weights from the full batch)."""
    batch = recipe.shape(batch)
    adv = recipe.advantages(batch)
    ret = recipe.returns(batch) if recipe.needs.critic else None
    w = recipe.loss_weights(batch)
    logp.grad = None
    values.grad = None
    ent = torch.rand(logp.shape, generator=torch.Generator().manual_seed(3), dtype=logp.dtype)
    rows = torch.arange(batch.size)
    total = 0.0
    for idx in torch.split(rows, sizes):
        kw = dict(values=values[idx], returns=ret[idx]) if ret is not None else {}
        loss, _ = recipe.loss(logp[idx], batch.select(idx), adv[idx], weights=w[idx],
                              entropy=ent[idx] * logp[idx], **kw)
        loss.backward()
        total += loss.detach()
    g_values = values.grad.clone() if values.grad is not None else None
    return total, logp.grad.clone(), g_values


# Clip-Cov and KL-Cov select tokens by a covariance over the tokens the loss sees, one micro-batch at a
# time (as verl does): their gradient depends on the split by design, and Clip-Cov detaches tokens
# even on-policy. The tests below check that these are the only exceptions, and that they are real.
PER_MICRO_BATCH = {"clip_cov", "kl_cov"}


@pytest.mark.parametrize("name", algorithms.names())
@pytest.mark.parametrize("split", list(SPLITS))
def test_micro_batch_split_gives_same_gradient(name, split):
    if name in PER_MICRO_BATCH:
        pytest.skip("covariance over each micro-batch (verl's form): split-dependent by design")
    recipe = algorithms.get(name).replace(entropy_coef=0.01)
    batch = random_batch(seed=11)
    logp = perturbed(batch.logp_old, 0.3)  # off-policy: clips, caps and tapers are active
    values = (batch.values + 0.3).detach().requires_grad_(True)
    full_loss, full_g, full_v = step_grads(recipe, batch, [batch.size], logp, values)
    loss, g, gv = step_grads(recipe, batch, SPLITS[split](batch.size), logp, values)
    assert torch.allclose(loss, full_loss, rtol=1e-6, atol=0)
    assert full_g.abs().sum() > 0
    assert torch.allclose(g, full_g, rtol=1e-6, atol=1e-12)
    assert (torch.linalg.vector_norm(g - full_g) / torch.linalg.vector_norm(full_g)).item() < 1e-6
    if recipe.needs.critic:
        assert full_v.abs().sum() > 0
        assert torch.allclose(gv, full_v, rtol=1e-6, atol=1e-12)


def test_weights_none_recomputes_on_the_micro_batch():
    # passing no weights normalises over the micro-batch: the split changes token_mean
    recipe = algorithms.get("dapo")
    batch = random_batch(seed=2)
    adv = recipe.advantages(batch)
    logp = perturbed(batch.logp_old, 0.0)
    full, _ = recipe.loss(logp, batch, adv)
    halves = [recipe.loss(logp[i], batch.select(i), adv[i])[0]
              for i in torch.split(torch.arange(batch.size), [6, 6])]
    with_w = [recipe.loss(logp[i], batch.select(i), adv[i], weights=recipe.loss_weights(batch)[i])[0]
              for i in torch.split(torch.arange(batch.size), [6, 6])]
    assert torch.allclose(sum(with_w), full, rtol=1e-12)
    assert not torch.allclose(sum(halves), full, rtol=1e-6)


OBJECTIVES = [algorithms.PPOClip(0.2, 0.28, dual_clip=3.0), algorithms.GSPO(3e-4, 4e-4),
              algorithms.CISPO(ratio_max=5.0, ratio_min=0.5), algorithms.ISPG(),
              algorithms.TOPR("full"), algorithms.TOPR("length_normalised")]
MODES = ["seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm", "seq_mean_token_sum",
         "prompt_mean"]


@pytest.mark.parametrize("objective", OBJECTIVES, ids=lambda o: o.short())
@pytest.mark.parametrize("mode", MODES)
def test_on_policy_gradient_is_reinforce(objective, mode):
    batch = random_batch(seed=5, binary=False)
    recipe = algorithms.Recipe(advantage=GroupNorm(), objective=objective, aggregation=Aggregation(mode))
    adv = recipe.advantages(batch)
    # per-token advantages too (GAE-like), so the check is not only for constant A
    adv = adv + 0.1 * torch.randn(adv.shape, generator=torch.Generator().manual_seed(9), dtype=adv.dtype)
    adv = adv * batch.mask
    logp = batch.logp_old.clone().requires_grad_(True)
    loss, stats = recipe.loss(logp, batch, adv)
    (g,) = torch.autograd.grad(loss, logp)
    ref = aggregate(-adv * logp, batch.mask, recipe.loss_weights(batch))
    (g_ref,) = torch.autograd.grad(ref, logp)
    assert g_ref.abs().sum() > 0
    assert torch.allclose(g, g_ref, rtol=1e-10, atol=1e-14)
    assert stats["policy/ratio_mean"].item() == 1.0


@pytest.mark.parametrize("name", sorted(PER_MICRO_BATCH))
def test_the_covariance_recipes_really_depend_on_the_split(name):
    # the exception above is real: with one token per micro-batch the covariance band holds other tokens
    recipe = algorithms.get(name).replace(objective=algorithms.get(name).objective.replace(frac=0.5))
    batch = random_batch(seed=11)
    logp = perturbed(batch.logp_old, 0.3)
    values = (batch.values + 0.3).detach().requires_grad_(True)
    torch.manual_seed(0)
    _, full_g, _ = step_grads(recipe, batch, [batch.size], logp, values)
    torch.manual_seed(0)
    _, g, _ = step_grads(recipe, batch, SPLITS["uneven"](batch.size), logp, values)
    assert not torch.allclose(g, full_g, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("name", algorithms.names())
def test_on_policy_recipes_reduce_to_reinforce(name):
    # every recipe's policy term, on-policy, is −A·log π under its aggregation (clip_cov: with no
    # token in its covariance band; tests/algorithms/test_algorithms_2026_objectives.py checks the band)
    recipe = algorithms.get(name).replace(kl=KL(), nll_coef=0.0)
    if name == "clip_cov":
        recipe = recipe.replace(objective=recipe.objective.replace(cov_low=1e9, cov_high=2e9))
    batch = random_batch(seed=8)
    adv = recipe.advantages(batch)
    logp = batch.logp_old.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(recipe.loss(logp, batch, adv)[0], logp)
    (g_ref,) = torch.autograd.grad(aggregate(-adv * logp, batch.mask, recipe.loss_weights(batch)), logp)
    assert torch.allclose(g, g_ref, rtol=1e-10, atol=1e-14)


def shifted(batch, per_group_shift, scale=1.0):
    g = batch.group
    shift = torch.zeros_like(batch.rewards)
    for k, gid in enumerate(torch.unique(g).tolist()):
        shift[g == gid] = per_group_shift[k]
    kw = {}
    if batch.baseline_rewards is not None:
        kw["baseline_rewards"] = scale * batch.baseline_rewards + shift
    return batch.replace(rewards=scale * batch.rewards + shift, **kw)


GROUP_SHIFT = [3.0, -1.5, 0.25]
GLOBAL_SHIFT = [2.0, 2.0, 2.0]
CASES = [  # estimator, shift, scale: transformations it is invariant to
    (GroupNorm(scale="std"), GROUP_SHIFT, 3.7),
    (GroupNorm(scale="none"), GROUP_SHIFT, 1.0),
    (GroupNorm(scale="batch"), GLOBAL_SHIFT, 3.7),  # raw-reward batch std: global shift only
    (RLOO(), GROUP_SHIFT, 1.0),
    (ReMax(), GROUP_SHIFT, 1.0),  # shift applied to the greedy baseline rewards as well
    (BatchMean(), GLOBAL_SHIFT, 1.0),
    (ReinforcePP(), GLOBAL_SHIFT, 3.7),
    (ReinforcePPBaseline(), GROUP_SHIFT, 3.7),
]


@pytest.mark.parametrize("est, shift, scale", CASES, ids=lambda c: c.short() if hasattr(c, "short") else None)
def test_reward_shift_and_scale_leave_advantages_unchanged(est, shift, scale):
    batch = random_batch(seed=4, binary=False)
    a = est.compute(batch)
    b = est.compute(shifted(batch, shift, scale))
    assert a.abs().sum() > 0
    assert torch.allclose(a, b, atol=1e-5, rtol=0)


def test_group_norm_none_is_not_scale_invariant():
    batch = random_batch(seed=4, binary=False)
    a = GroupNorm(scale="none").compute(batch)
    assert torch.allclose(GroupNorm(scale="none").compute(shifted(batch, [0, 0, 0], 2.0)), 2 * a)
