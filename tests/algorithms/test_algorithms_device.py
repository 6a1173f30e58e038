"""Every recipe on an accelerator gives what it gives on CPU (skipped where there is none)."""

import dataclasses

import pytest
import torch

import algorithms
from alg_helpers import perturbed, random_batch

DEVICE = "cuda" if torch.cuda.is_available() else None
pytestmark = pytest.mark.skipif(DEVICE is None, reason="no CUDA device")


def to(batch, device):
    return batch.replace(**{f.name: getattr(batch, f.name).to(device) for f in dataclasses.fields(batch)
                            if isinstance(getattr(batch, f.name), torch.Tensor)})


def step(recipe, batch, logp0, values0):
    batch = recipe.shape(batch)
    batch = batch.select(recipe.keep(batch))
    adv = recipe.advantages(batch)
    w = recipe.loss_weights(batch)
    logp = logp0[: batch.size].detach().clone().requires_grad_(True)
    parts = []
    for idx in torch.split(torch.arange(batch.size, device=adv.device), [3, batch.size - 3]):
        loss, stats = recipe.loss(logp[idx], batch.select(idx), adv[idx], weights=w[idx], entropy=-logp[idx])
        loss.backward()
        parts.append(stats)
        if recipe.needs.critic:
            values = values0[: batch.size][idx].detach().clone().requires_grad_(True)
            v_loss, v_stats = recipe.value_loss(values, batch.select(idx), recipe.returns(batch)[idx], weights=w[idx])
            v_loss.backward()
            parts.append(v_stats)
    return adv, logp.grad, algorithms.merge_stats(parts)


@pytest.mark.parametrize("name", algorithms.names())
def test_recipe_on_device_matches_cpu(name):
    recipe = algorithms.get(name).replace(entropy_coef=0.01)
    # real-valued rewards: with 0/1 rewards a row can sit exactly at its group mean, where A is a
    # rounding-level ±1e-17 whose sign (and so "A > 0" in the clip counts) differs by device
    cpu = random_batch(seed=31, binary=False)
    logp = perturbed(cpu.logp_old, 0.3)
    adv_c, g_c, s_c = step(recipe, cpu, logp, cpu.values)
    adv_d, g_d, s_d = step(recipe, to(cpu, DEVICE), logp.to(DEVICE), cpu.values.to(DEVICE))
    assert adv_d.device.type == DEVICE and g_d.device.type == DEVICE
    assert torch.allclose(adv_d.cpu(), adv_c, atol=1e-10)
    assert torch.allclose(g_d.cpu(), g_c, atol=1e-10)
    assert set(s_d) == set(s_c)
    for k in s_c:
        assert s_d[k].device.type == DEVICE, k
        assert s_d[k].item() == pytest.approx(s_c[k].item(), rel=1e-9, abs=1e-12), k
