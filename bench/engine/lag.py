"""Stale rollouts: the behaviour policy that samples step t is the policy of step t − lag.

`BehaviourPolicy` keeps the weights the sampler must use. At lag 0 it *is* the live policy module
(no copy, nothing changes: on-policy runs are bit-identical to runs from before lags existed). At
lag k ≥ 1 it owns a frozen copy of the model and a ring of the last k policy versions as detached
state-dict copies; after each step the oldest version is loaded into the copy.

Memory, beyond the policy: (k + 1) × P floats (k versions + the sampling copy); nano (0.14M
parameters, fp32) at lag 2: 1.7 MB; a 1.5B model at lag 2: 18 GB, where a real sampler runs on its
own worker and receives weights instead (below). The copies cost a memcpy per step, no FLOPs: the
ledger charges generation and training as on-policy.

Versions: 0 is the warm start; every trainer step advances the policy one version (a step whose
filter kept nothing too: lag counts steps). Until step k + 1 the sampler holds the warm start, so
the actual lag grows 0, 1, ..., k over the first steps; `staleness` gives it (`rollout/lag`).

Towards an asynchronous pipeline: the trainer only calls `advance` (a new version exists) and
`backend.sync(model)` (sample from these weights), and each `Round` carries the version that
sampled it. A producer on another worker would receive the weights in `sync`, sample on its own
and return Rounds with their version and log-probs; `algorithms/` sees only Rollouts.logp_old.
"""
from __future__ import annotations

import copy
from collections import deque

import torch


class BehaviourPolicy:
    def __init__(self, model: torch.nn.Module, lag: int):
        if lag < 0:
            raise ValueError(f"lag must be >= 0, got {lag}")
        self.lag = lag
        self.policy_version = 0  # versions of the policy being trained
        self.version = 0  # version of the weights in self.model
        self.model = model if lag == 0 else copy.deepcopy(model).eval().requires_grad_(False)
        self._ring: deque[dict[str, torch.Tensor]] = deque()  # versions policy_version-len+1 .. policy_version

    @property
    def staleness(self) -> int:
        """Policy versions between the sampling weights and the weights the next update starts from."""
        return self.policy_version - self.version

    @torch.no_grad()
    def advance(self, policy: torch.nn.Module) -> None:
        """The policy finished a step (it is one version newer): move the sampling weights along."""
        self.policy_version += 1
        if self.lag == 0:  # the sampler reads the live module
            self.version = self.policy_version
            return
        if len(self._ring) == self.lag:  # the oldest kept version is policy_version - lag now
            self.model.load_state_dict(self._ring.popleft())
            self.version = self.policy_version - self.lag
        self._ring.append({k: v.detach().clone() for k, v in policy.state_dict().items()})

    def state_dict(self) -> dict:
        """Versions, the ring and the sampling copy's weights: what a resumed run needs (checkpoint.py)."""
        return {"policy_version": self.policy_version, "version": self.version, "ring": list(self._ring),
                "model": self.model.state_dict() if self.lag else None}

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()`; at lag 0 the sampler is the live module, restored with the policy."""
        self.policy_version, self.version = state["policy_version"], state["version"]
        if self.lag:
            device = next(self.model.parameters()).device
            self.model.load_state_dict(state["model"])
            self._ring = deque({k: v.to(device) for k, v in r.items()} for r in state["ring"])
