"""`Recipe`: one choice per axis, and the calls the engine makes, in this order, every step:

    batch = recipe.shape(batch)                     # reward shaping (before filtering)
    keep = recipe.keep(batch)                       # (B,) bool; refill if recipe.needs.refill
    adv = recipe.advantages(batch)                  # (B, T), once over the whole rollout batch
    ret = recipe.returns(batch)                     # (B, T) value targets, critic recipes only
    for each of needs.epochs × needs.minibatches updates:
        w = recipe.loss_weights(mini)               # (B_mini,), over the optimizer-step batch
        for each micro-batch idx:                   # sum of micro losses == mini-batch loss
            loss, stats = recipe.loss(logp, mini.select(idx), adv[idx], weights=w[idx], ...)
        stats = algorithms.merge_stats([...])

The engine reads only `recipe.needs`, never the recipe's name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .advantages import Advantage, GAEBase
from .aggregation import Aggregation, aggregate
from .corrections import Correction, correction_stats
from .critic import Critic
from .entropy import AdaptiveEntropy
from .filters import Filter, NoFilter, Shaping
from .kl import KL, kl_estimate
from .objectives import Objective, Stats, token_mean
from .parts import Part, fail, nonnegative, part
from .rollouts import Rollouts
from .serialize import flatten, short_hash, to_dict, to_json
from .telemetry import off_policy_stats


@part("updates")
class Updates(Part):
    """Optimizer updates per rollout batch: `epochs` passes, each split into `minibatches`."""

    epochs: int = 1
    minibatches: int = 1

    def check(self) -> None:
        for name in ("epochs", "minibatches"):
            if getattr(self, name) < 1:
                fail(f"Updates.{name}", f"must be >= 1, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class Needs:
    """What a recipe needs from the engine; the engine branches on these, never on names.

    reference              Rollouts.logp_ref is required (KL in the loss or the reward, β > 0).
                           KL is logged whenever logp_ref is given, so the engine may provide it
                           anyway; this flag says the update cannot run without it.
    critic                 a value model: Rollouts.values at sampling time, new values for
                           `value_loss`, targets from `recipe.returns`.
    greedy_baseline        one greedy (argmax) rollout per prompt, its reward in
                           Rollouts.baseline_rewards (ReMax); count it as compute.
    truncated              Rollouts.truncated is required (mask_truncated shaping).
    refill                 filtered groups are replaced by new prompts (dynamic sampling) ...
    max_generation_rounds  ... for at most this many generation rounds per batch (1 = none).
    entropy                `loss` needs the per-token entropy with gradient (entropy_coef > 0).
    epochs, minibatches    optimizer updates per rollout batch = epochs × minibatches.
    value_pretrain_steps   critic-only steps before policy training (VAPO).
    behaviour              Rollouts.logp_behav is required (a correction or objective reads the
                           behaviour policy's log-probs): the engine keeps the sampler's log-probs
                           there and recomputes logp_old under the weights the update starts from.
    global_rng             a part draws from torch's global generator while training (clip_cov's pick):
                           its runs cannot share a process with other runs' draws (bench/engine/stack.py).
    """

    reference: bool
    critic: bool
    greedy_baseline: bool
    truncated: bool
    refill: bool
    max_generation_rounds: int
    entropy: bool
    epochs: int
    minibatches: int
    value_pretrain_steps: int
    behaviour: bool = False
    global_rng: bool = False

    @property
    def updates_per_batch(self) -> int:
        return self.epochs * self.minibatches


@part("recipe", kw_only=True)
class Recipe(Part):
    """An algorithm: one part per axis. Frozen, hashable, printable; see the module docstring.

    `name` labels the recipe (excluded from equality and from `id`); `description` holds the
    paper citation and departures of a named recipe (not serialized).
    """

    name: str = field(default="custom", compare=False)
    advantage: Advantage
    objective: Objective
    aggregation: Aggregation = Aggregation()
    kl: KL = KL()
    filter: Filter = NoFilter()
    shaping: tuple[Shaping, ...] = ()
    critic: Critic | None = None
    updates: Updates = Updates()
    entropy_coef: float = 0.0
    nll_coef: float = 0.0
    corrections: tuple[Correction, ...] = ()
    entropy_control: AdaptiveEntropy | None = None
    description: str = field(default="", compare=False, repr=False)

    LATER = ("corrections", "entropy_control")

    def check(self) -> None:
        if self.advantage.uses_critic and self.critic is None:
            fail("Recipe.critic", f"advantage {self.advantage.tag!r} needs a Critic part")
        if self.critic is not None and not self.advantage.uses_critic:
            fail("Recipe.critic", f"a Critic needs a critic-based advantage (gae, length_adaptive_gae), "
                                  f"got {self.advantage.tag!r}")
        nonnegative("Recipe.entropy_coef", self.entropy_coef)
        nonnegative("Recipe.nll_coef", self.nll_coef)
        if self.entropy_control is not None and self.entropy_coef > 0:
            fail("Recipe.entropy_control", "set either a fixed entropy_coef or an entropy_control, not both "
                                           f"(entropy_coef = {self.entropy_coef!r})")

    # ------------------------------------------------------------------ what the engine calls

    @property
    def needs(self) -> Needs:
        return Needs(
            reference=self.kl.active,
            critic=self.critic is not None,
            greedy_baseline=self.advantage.uses_greedy_baseline,
            truncated=any(s.uses_truncated for s in self.shaping),
            refill=self.filter.refill,
            max_generation_rounds=self.filter.rounds,
            entropy=self.entropy_coef > 0 or self.entropy_control is not None,
            epochs=self.updates.epochs,
            minibatches=self.updates.minibatches,
            value_pretrain_steps=self.critic.pretrain_steps if self.critic else 0,
            behaviour=("logp_behav" in self.objective.inputs
                       or any(c.uses_behaviour for c in self.corrections)),
            global_rng=self.objective.uses_global_rng,
        )

    def shape(self, batch: Rollouts) -> Rollouts:
        """Apply the shaping steps in order (rewards and mask change; nothing else)."""
        for s in self.shaping:
            batch = s.apply(batch)
        return batch

    def keep(self, batch: Rollouts) -> Tensor:
        """(B,) bool: completions that enter the update (whole groups are kept or dropped)."""
        return self.filter.keep(batch)

    def advantages(self, batch: Rollouts) -> Tensor:
        """(B, T) detached advantages, zero on padding; KL in the reward is applied here."""
        penalty = self.kl.reward_penalty(batch.logp_old, batch.logp_ref, batch.mask)
        return self.advantage.compute(batch, penalty).detach()

    def returns(self, batch: Rollouts) -> Tensor:
        """(B, T) value targets Â(λ_critic) + V_old (critic recipes only), zero on padding."""
        if self.critic is None or not isinstance(self.advantage, GAEBase):
            raise ValueError(f"recipe {self.name!r} has no critic; returns() needs one")
        penalty = self.kl.reward_penalty(batch.logp_old, batch.logp_ref, batch.mask)
        return self.advantage.returns(batch, penalty, self.critic.lam).detach()

    def loss_weights(self, batch: Rollouts) -> Tensor:
        """(B,) per-sequence aggregation weights over this (optimizer-step) batch."""
        return self.aggregation.weights(batch.mask, batch.group, batch.max_new_tokens)

    def loss(self, logp: Tensor, batch: Rollouts, adv: Tensor, weights: Tensor | None = None,
             entropy: Tensor | None = None, values: Tensor | None = None,
             returns: Tensor | None = None, entropy_coef: float | None = None) -> tuple[Tensor, Stats]:
        """(loss, stats) for logp (B, T) requiring grad.

        weights: the full optimizer-step batch's `loss_weights` sliced to these rows; None
        recomputes them from `batch` (right only when `batch` is the whole optimizer step).
        entropy: (B, T) per-token entropy, logged as policy/entropy, and a bonus when entropy_coef > 0.
        values, returns: pass both to add `value_loss` (a critic sharing this backward pass);
        a separate critic optimizer calls `value_loss` itself instead.
        entropy_coef: the coefficient an `entropy_control` gives this update (the engine keeps its
        state); None: the recipe's fixed entropy_coef.
        """
        check_shape("logp", logp, batch.mask.shape)
        check_shape("adv", adv, batch.mask.shape)
        m = batch.mask.bool()
        w = self.loss_weights(batch) if weights is None else weights
        check_shape("weights", w, batch.mask.shape[:1])
        if entropy is not None:
            check_shape("entropy", entropy, batch.mask.shape)
        extra = {"logp_behav": batch.logp_behav, "entropy": None if entropy is None else entropy.detach()}
        for name in self.objective.inputs:
            if extra[name] is None:
                raise ValueError(f"objective {self.objective.tag!r} needs {name}= (recipe.needs says which)")
        tok, stats = self.objective.per_token(logp, batch.logp_old, adv.detach(), batch.mask,
                                              **{k: extra[k] for k in self.objective.inputs})
        stats.update(off_policy_stats(logp, batch.logp_old, batch.mask))  # every objective, same meaning
        if self.corrections:
            c = torch.ones_like(logp)
            for corr in self.corrections:
                c = c * corr.weight(logp, batch, adv, extra["entropy"]).detach().to(logp.dtype)
            tok = tok * c
            stats.update(correction_stats(c, m))
        total = aggregate(tok, m, w)
        stats["loss/policy"] = total.detach()

        kl_tok = self.kl.loss_term(logp, batch.logp_ref, batch.logp_old)
        kl_loss = (aggregate(kl_tok, m, w) if kl_tok is not None
                   else torch.zeros((), dtype=logp.dtype, device=logp.device))
        total = total + kl_loss
        stats["loss/kl"] = kl_loss.detach()
        if batch.logp_ref is not None:
            for k in ("k1", "k3"):
                stats[f"kl/{k}"] = token_mean(kl_estimate(logp.detach(), batch.logp_ref, k), m)

        if entropy is not None:
            stats["policy/entropy"] = token_mean(entropy, m)
            coef = self.entropy_coef if entropy_coef is None else entropy_coef
            if coef > 0:
                total = total - coef * aggregate(entropy, m, w)
        elif self.entropy_coef > 0 or (entropy_coef or 0) > 0:
            raise ValueError("entropy_coef > 0: pass entropy= (B, T) with gradient (recipe.needs.entropy)")

        if self.nll_coef > 0:
            correct = batch.is_correct[:, None]
            nll = self.nll_coef * aggregate(torch.where(correct, -logp, torch.zeros_like(logp)), m, w)
            total = total + nll
            stats["loss/nll"] = nll.detach()

        if values is not None or returns is not None:
            if values is None or returns is None:
                raise ValueError("pass both values= and returns= to add the value loss")
            v_loss, v_stats = self.value_loss(values, batch, returns, weights=w)
            total = total + v_loss
            stats.update(v_stats)

        stats["tokens"] = m.sum()
        stats["sequences"] = m.any(-1).sum()
        return total, stats

    def value_loss(self, values: Tensor, batch: Rollouts, returns: Tensor,
                   weights: Tensor | None = None) -> tuple[Tensor, Stats]:
        """(loss, {"loss/value", "tokens", "sequences"}) for new critic values (B, T) requiring
        grad, against `returns` (from `recipe.returns`), clipped around Rollouts.values."""
        if self.critic is None:
            raise ValueError(f"recipe {self.name!r} has no critic")
        if batch.values is None:
            raise ValueError("value_loss needs Rollouts.values (V_old, for the value clip)")
        check_shape("values", values, batch.mask.shape)
        check_shape("returns", returns, batch.mask.shape)
        m = batch.mask.bool()
        w = self.loss_weights(batch) if weights is None else weights
        loss = self.critic.loss(values, batch.values, returns, m, w)
        return loss, {"loss/value": loss.detach(), "tokens": m.sum(), "sequences": m.any(-1).sum()}

    # ------------------------------------------------------------------ identity and display

    def to_dict(self) -> dict:
        return to_dict(self)

    def to_json(self) -> str:
        return to_json(self)

    @property
    def id(self) -> str:
        """12 hex digits of sha256 over the canonical JSON without the name label."""
        d = to_dict(self)
        d.pop("name")
        return short_hash(d)

    def diff(self, other: Recipe) -> dict[str, tuple]:
        """{field path: (self's value, other's value)} where the two differ (name excluded)."""
        a, b = flatten(to_dict(self)), flatten(to_dict(other))
        a.pop("name"), b.pop("name")
        return {k: (a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)}

    def parts_differing(self, other: Recipe) -> list[str]:
        """The recipe's own fields (its parts: advantage, objective, kl, ..., and the scalar
        coefficients) in which the two differ, name excluded: a one-part ablation gives one."""
        return sorted({k.split(".", 1)[0] for k in self.diff(other)})

    def __str__(self) -> str:
        rows = [f"{self.name} (id {self.id})"]
        for f in dataclasses.fields(self):
            if f.name in ("name", "description"):
                continue
            v = getattr(self, f.name)
            text = v.short() if isinstance(v, Part) else (
                "(" + ", ".join(s.short() for s in v) + ")" if isinstance(v, tuple) else repr(v))
            rows.append(f"  {f.name:<16}{text}")
        return "\n".join(rows)


def check_shape(name: str, t: Tensor, shape) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(t.shape)}")
