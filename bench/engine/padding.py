"""Padding token rows into batches: prompts left-padded (generation appends on the right), completions
right-padded. The lowest rung of the engine: rollout, records, the trainer and the stacked sampler
all pad through it."""
from __future__ import annotations

import torch


def left_pad(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, P) ids and attention mask, left-padded."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    att = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
        att[i, width - len(s):] = 1
    return ids, att


def pad_cat(ts: list[torch.Tensor], value: float, left: bool = False) -> torch.Tensor:
    """Concatenate (n_i, T_i) tensors along rows, padding columns to the widest (right, or left)."""
    width = max(t.shape[1] for t in ts)
    return torch.cat([torch.nn.functional.pad(t, (width - t.shape[1], 0) if left else (0, width - t.shape[1]),
                                              value=value) for t in ts])
