"""Where a trainer's model calls run.

The training step makes four kinds of model call: sampling (its rollout backend), log-probs with
gradients (the update's forward), log-probs without (reference and proximal forwards) and the
backward pass. `Local` runs them in the trainer's own thread, one run at a time: what every run
did before stacks existed. `bench.engine.stack` gives each of R trainers a compute that hands these
calls to a shared server, which runs them for all R replicas at once (one stacked call), so R runs
of one cell pay the per-op overhead of the tiny models once (issue 27). The trainer's own logic
(the recipe's parts, metrics, clipping, optimizer, records) never changes with where its model
calls run.
"""
from __future__ import annotations

import contextlib

import torch

from bench.engine.policy import Policy, sequence_logprobs
from bench.engine.backends import make_backend
from bench.engine.rollout import RolloutBackend, batch_logprobs


class Local:
    """Every call in this thread, on this run's own models."""

    def backend(self, name: str, policy: Policy, seed: int, device: str, precision: str) -> RolloutBackend:
        return make_backend(name, policy, seed=seed, device=device, precision=precision)

    def eval_backend(self, policy: Policy, chunk_size: int) -> RolloutBackend | None:
        """The held-out evaluation's sampler; None: evaluate() builds its own, on the policy's model."""
        return None

    def logprobs(self, model: torch.nn.Module, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                 tokens: torch.Tensor, temperature: float, with_entropy: bool = False,
                 entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        return sequence_logprobs(model, prompt_ids, prompt_mask, tokens, temperature, with_entropy=with_entropy,
                                 entropy_grad=entropy_grad)

    def frozen_logprobs(self, model: torch.nn.Module, batch, temperature: float, micro_batch_size: int) -> torch.Tensor:
        return batch_logprobs(model, batch, temperature, micro_batch_size)

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def exclusive(self):
        """Held while a trainer sets up (warm start, global RNG seeding): nothing to exclude alone."""
        return contextlib.nullcontext()
