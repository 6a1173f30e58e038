"""Entropy control: the entropy bonus's coefficient as a controller whose state the engine keeps."""

from __future__ import annotations

from .parts import Part, fail, nonnegative, part, positive


@part("adaptive_entropy")
class AdaptiveEntropy(Part):
    """Adaptive entropy control (Skywork-OR1, 2505.22312; TRL use_adaptive_entropy): the entropy bonus's
    coefficient c starts at `init` and after every optimizer update moves by ±`delta` within [`low`,
    `high`]: up while the update's mean token entropy H is ≤ `target`, down otherwise; the bonus is
    applied (c, else 0) only while the previous update's H was ≤ `target` (none before the first).
    State is (c, H_last), kept by the engine (`state`, `applied`, `advance`) and in resume checkpoints.

    Departures from TRL: H is the mean over all valid tokens of the update (TRL: the top-entropy subset
    when that mask is on), and the bonus is aggregated with the recipe's aggregation weights like the
    fixed entropy_coef (TRL: the plain mean per-token entropy)."""

    target: float = 0.2
    delta: float = 0.005
    init: float = 0.0
    low: float = 0.0
    high: float = 1.0

    def check(self) -> None:
        for name in ("target", "init", "low"):
            nonnegative(f"AdaptiveEntropy.{name}", getattr(self, name))
        positive("AdaptiveEntropy.delta", self.delta)
        if not self.low <= self.init <= self.high:
            fail("AdaptiveEntropy.init", f"must be in [low, high] = [{self.low!r}, {self.high!r}], got {self.init!r}")

    def state(self) -> dict:
        return {"coef": float(self.init), "last_entropy": float("inf")}

    def applied(self, state: dict) -> float:
        """The coefficient this update's loss uses."""
        return state["coef"] if state["last_entropy"] <= self.target else 0.0

    def advance(self, state: dict, entropy: float) -> dict:
        """The state after an update whose mean token entropy was `entropy`."""
        step = self.delta if entropy <= self.target else -self.delta
        return {"coef": min(max(state["coef"] + step, self.low), self.high), "last_entropy": float(entropy)}
