"""Shared builders for the algorithms tests (imported by name; pytest puts this folder on sys.path)."""

from __future__ import annotations

import torch

import algorithms

DTYPE = torch.float64


def random_batch(seed: int = 0, groups: int = 3, per_group: int = 4, T: int = 9,
                 max_new_tokens: int = 9, binary: bool = True) -> algorithms.Rollouts:
    """A float64 batch with every optional field, ragged lengths (one length-1 row), mixed groups."""
    g = torch.Generator().manual_seed(seed)
    B = groups * per_group
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = 1
    lengths[1] = T
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(DTYPE)
    if binary:
        rewards = torch.randint(0, 2, (B,), generator=g).to(DTYPE)
        rewards[:per_group] = torch.tensor([1.0, 0.0] * (per_group // 2) + [1.0] * (per_group % 2))
    else:
        rewards = torch.randn(B, generator=g, dtype=DTYPE)
    group = torch.arange(groups).repeat_interleave(per_group) * 7 + 3  # non-dense ids
    perm = torch.randperm(B, generator=g)  # groups interleaved, not contiguous
    logp_old = -torch.rand(B, T, generator=g, dtype=DTYPE) * 3
    return algorithms.Rollouts(
        rewards=rewards[perm], group=group[perm], mask=mask[perm], logp_old=logp_old,
        max_new_tokens=max_new_tokens,
        logp_ref=logp_old + 0.1 * torch.randn(B, T, generator=g, dtype=DTYPE),
        values=torch.randn(B, T, generator=g, dtype=DTYPE) * 0.5,
        baseline_rewards=torch.randint(0, 2, (B,), generator=g).to(DTYPE),
        truncated=(lengths[perm] == T),
        correct=rewards[perm] > 0,
        logp_behav=logp_old.clone(),  # the sampler's numbers equal the trainer's: on-policy, no mismatch
        reward_parts=torch.stack([rewards[perm], (lengths[perm] % 2).to(DTYPE)], -1),  # two reward functions
    )


def perturbed(logp_old: torch.Tensor, scale: float, seed: int = 1) -> torch.Tensor:
    """A leaf logp near logp_old (off-policy when scale > 0), requiring grad."""
    g = torch.Generator().manual_seed(seed)
    noise = scale * torch.randn(logp_old.shape, generator=g, dtype=logp_old.dtype)
    return (logp_old + noise).detach().requires_grad_(True)
