"""The records a training step passes along: a generation `Round`, and the `Batch` it trains on.

A Round is what a sampler produces (prompts, completions, scored and shaped Rollouts whose
logp_old are the sampler's log-probs, the filter's verdict, and the policy version that sampled
it); a Batch is the kept rows of one step's rounds, the unit an update consumes. An asynchronous
producer would hand the trainer Rounds through a queue; nothing downstream would change.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

import algorithms
from bench.engine.padding import pad_cat


@dataclass(frozen=True)
class Round:
    """One generation round: prompts_per_step prompts × G samples, scored, shaped, filtered.

    prompt_ids, prompt_mask (B, P) left-padded; tokens (B, T) right-padded completions;
    raw: Rollouts as sampled and scored; shaped: after recipe.shape; keep (B,) bool: recipe.keep;
    version: the policy version (optimizer-step batches since the warm start) that sampled it;
    reward_parts: each reward function's (B,) values (bench/rewards.py), for their step columns.
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    tokens: torch.Tensor
    raw: algorithms.Rollouts
    shaped: algorithms.Rollouts
    keep: torch.Tensor
    version: int
    reward_parts: dict | None = None  # reward function name -> (B,) values, when rewards are combined


@dataclass
class Batch:
    """One step's training rows: prompts (left-padded), completions (right-padded), Rollouts.

    lag: policy versions between the sampler's weights and the weights the update starts from.
    sampled_logp: (B, T) the sampler's own log-probs, kept when logp_old is a recomputation.
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    tokens: torch.Tensor
    rollouts: algorithms.Rollouts
    lag: int = 0
    logp_mismatch: torch.Tensor | None = None  # recomputed logp_old: mean |logp_sampler - logp_old| over tokens
    tis: torch.Tensor | None = None  # (B, T) truncated IS weights on the policy-gradient loss (train.tis_cap)
    # the sampler is the trainer's own weights in its own precision (no recomputation): where logp_old
    # is set to the training forward's logp (lag 0, first update), logp_behav is too, so ρ_behaviour ≡ 1
    sampler_is_trainer: bool = False

    @classmethod
    def from_rounds(cls, rounds: list[Round], pad_id: int, lag: int, max_groups: int | None = None) -> Batch | None:
        """The kept rows of every round, in order (None when no row is kept); with max_groups, the
        first max_groups prompt groups only (refill: the surplus of the last round is dropped).
        Padding columns that no kept row uses are trimmed."""
        sel = [(r, torch.nonzero(r.keep).squeeze(-1)) for r in rounds]
        sel = [(r, idx) for r, idx in sel if idx.numel()]
        if not sel:
            return None
        pids = pad_cat([r.prompt_ids[i] for r, i in sel], pad_id, left=True)
        patt = pad_cat([r.prompt_mask[i] for r, i in sel], 0, left=True)
        toks = pad_cat([r.tokens[i] for r, i in sel], pad_id)
        roll = algorithms.Rollouts.cat([r.shaped.select(i) for r, i in sel])
        if max_groups is not None:
            take = torch.isin(roll.group, torch.unique_consecutive(roll.group)[:max_groups])
            if take.sum() < roll.size:
                roll, pids, patt, toks = roll.select(take), pids[take], patt[take], toks[take]
        width = max(1, int(roll.mask.sum(-1).max().item()))
        return cls(pids, patt, toks[:, :width], roll.trim(width), lag=lag)

    def seq_lens(self, idx: torch.Tensor | None = None) -> list[int]:
        """Prompt + completion tokens per row (for the ledger)."""
        tot = (self.prompt_mask.sum(-1) + self.rollouts.mask.sum(-1)).long()
        return (tot if idx is None else tot[idx]).tolist()
