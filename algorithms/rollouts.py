"""`Rollouts`: one batch of sampled completions as tensors, the only data type recipes consume."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

ROW_FIELDS = ("rewards", "group", "correct", "baseline_rewards", "truncated")
TOKEN_FIELDS = ("mask", "logp_old", "logp_ref", "values", "logp_behav")
MATRIX_FIELDS = ("reward_parts",)  # (B, K)
TENSOR_FIELDS = ROW_FIELDS + TOKEN_FIELDS + MATRIX_FIELDS


@dataclass(frozen=True, eq=False)
class Rollouts:
    """B completions padded to T tokens. Shapes are checked at construction.

    rewards           (B,)   float outcome reward (after shaping, once `recipe.shape` ran)
    group             (B,)   int prompt-group id; completions of one prompt share it
    mask              (B, T) 1 on completion tokens, 0 on padding (float or bool)
    logp_old          (B, T) log-prob of each token under the policy that sampled it
    max_new_tokens    int    the generation cap L_max
    logp_ref          (B, T) under the reference policy, or None
    values            (B, T) critic values at sampling time (V_old), or None
    baseline_rewards  (B,)   e.g. ReMax's greedy-rollout rewards, or None
    truncated         (B,)   bool, hit L_max without EOS, or None
    correct           (B,)   bool verifier verdict, or None (then `rewards > 0` where needed)
    logp_behav        (B, T) log-prob of each token under the behaviour policy that sampled it (the
                             inference engine's numbers, or a stale policy's), when it differs from
                             logp_old; then logp_old is the trainer's recomputation under the weights
                             at the start of this update (the proximal policy). None: they coincide.
    reward_parts      (B, K) the K reward functions' values before they were summed into `rewards`
                             (GDPO normalises each), or None

    Padding entries of the (B, T) tensors (and of logp passed to the loss) must be finite, e.g. 0:
    they are masked out of every result, but a NaN or inf there would still poison gradients.
    """

    rewards: Tensor
    group: Tensor
    mask: Tensor
    logp_old: Tensor
    max_new_tokens: int
    logp_ref: Tensor | None = None
    values: Tensor | None = None
    baseline_rewards: Tensor | None = None
    truncated: Tensor | None = None
    correct: Tensor | None = None
    logp_behav: Tensor | None = None
    reward_parts: Tensor | None = None

    def __post_init__(self) -> None:
        if self.mask.dim() != 2:
            raise ValueError(f"Rollouts.mask: expected shape (B, T), got {tuple(self.mask.shape)}")
        B, T = self.mask.shape
        for name in ROW_FIELDS:
            v = getattr(self, name)
            if v is not None and tuple(v.shape) != (B,):
                raise ValueError(f"Rollouts.{name}: expected shape ({B},), got {tuple(v.shape)}")
        for name in TOKEN_FIELDS:
            v = getattr(self, name)
            if v is not None and tuple(v.shape) != (B, T):
                raise ValueError(f"Rollouts.{name}: expected shape ({B}, {T}), got {tuple(v.shape)}")
        for name in MATRIX_FIELDS:
            v = getattr(self, name)
            if v is not None and (v.dim() != 2 or v.shape[0] != B):
                raise ValueError(f"Rollouts.{name}: expected shape ({B}, K), got {tuple(v.shape)}")
        if self.group.is_floating_point():
            raise ValueError("Rollouts.group: expected an integer tensor of prompt-group ids")
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or self.max_new_tokens <= 0:
            raise ValueError(f"Rollouts.max_new_tokens: expected an int > 0, got {self.max_new_tokens!r}")

    @property
    def size(self) -> int:
        """B, the number of completions."""
        return self.mask.shape[0]

    @property
    def m(self) -> Tensor:
        """(B, T) the mask in the dtype of logp_old."""
        return self.mask.to(self.logp_old.dtype)

    @property
    def lengths(self) -> Tensor:
        """(B,) L_i, completion lengths from the mask."""
        return self.m.sum(-1)

    @property
    def is_correct(self) -> Tensor:
        """(B,) bool: `correct` when given, else `rewards > 0`."""
        return self.correct.bool() if self.correct is not None else self.rewards > 0

    def select(self, idx: Tensor | slice) -> Rollouts:
        """The rows `idx` (LongTensor, bool mask or slice) of every tensor field."""
        changes = {name: getattr(self, name)[idx] for name in TENSOR_FIELDS
                   if getattr(self, name) is not None}
        return dataclasses.replace(self, **changes)

    @classmethod
    def cat(cls, parts: list[Rollouts]) -> Rollouts:
        """The rows of every part, in order: (B, T) fields right-padded with 0 to the widest T (0 on
        the mask, so padding stays padding). Parts must agree on max_new_tokens and on which
        optional fields they carry."""
        if not parts:
            raise ValueError("Rollouts.cat: needs at least one part")
        first = parts[0]
        for p in parts[1:]:
            if p.max_new_tokens != first.max_new_tokens:
                raise ValueError(f"Rollouts.cat: max_new_tokens differ ({first.max_new_tokens} vs {p.max_new_tokens})")
            for name in TENSOR_FIELDS:
                if (getattr(p, name) is None) != (getattr(first, name) is None):
                    raise ValueError(f"Rollouts.cat: field {name!r} is set in some parts and None in others")
        width = max(p.mask.shape[1] for p in parts)
        pad = lambda t: torch.nn.functional.pad(t, (0, width - t.shape[1]), value=0)  # noqa: E731
        fields = {name: torch.cat([getattr(p, name) for p in parts]) for name in ROW_FIELDS + MATRIX_FIELDS
                  if getattr(first, name) is not None}
        fields |= {name: torch.cat([pad(getattr(p, name)) for p in parts]) for name in TOKEN_FIELDS
                   if getattr(first, name) is not None}
        return cls(max_new_tokens=first.max_new_tokens, **fields)

    def trim(self, width: int) -> Rollouts:
        """The first `width` token columns of every (B, T) field (drop padding no row uses)."""
        return dataclasses.replace(self, **{name: getattr(self, name)[:, :width] for name in TOKEN_FIELDS
                                            if getattr(self, name) is not None})

    def replace(self, **changes) -> Rollouts:
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        present = [n for n in TENSOR_FIELDS if getattr(self, n) is not None]
        return (f"Rollouts(B={self.size}, T={self.mask.shape[1]}, "
                f"max_new_tokens={self.max_new_tokens}, fields={present})")
