"""The training engine: one loop for every recipe.

Read top to bottom: `Trainer.run` evaluates the policy it starts from (its caller says which,
start.py), then repeats `step` until the compute budget is spent; callbacks (callbacks.py)
evaluate at fixed fractions of it, show progress, stream the rows to results/live/<run_id>/ and,
with `checkpoint_every`, save the whole trainer state (checkpoint.py) that `resume=True` continues
from. A step is

    rollout from the behaviour policy (+ greedy baselines, + refill rounds) → verifier rewards
    → recipe.shape → recipe.keep → behaviour log-probs (the backend's) → reference (+ critic)
    forward passes → recipe.advantages (+ returns) → epochs × mini-batches optimizer updates, each
    micro-batched → metrics (one .item() pass) → the behaviour policy advances, the backend syncs

The behaviour policy is the live policy (rollout.lag = 0) or the policy of `lag` steps earlier
(lag.py). Everything an algorithm needs is read from `recipe.needs`; there is no branch on a
recipe's name, nor on the rollout backend. Every forward and backward pass is charged to the
ledger (see ledger.py for the formulas).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import random
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch

import algorithms
from algorithms.stats import rule as stat_rule
from bench import models, results, rewards as reward_fns, tasks
from bench.config import Regime, RunConfig
from bench.engine import checkpoint
from bench.engine.callbacks import Callback, Checkpoints, Evaluations, OnEval, Progress, Stream
from bench.engine.critic import ValueModel
from bench.engine.evaluate import evaluate
from bench.engine.lag import BehaviourPolicy
from bench.engine.ledger import Ledger, ModelShape
from bench.engine.compute import Local
from bench.engine.policy import Policy
from bench.engine.records import Batch, Round
from bench.engine.padding import left_pad
from bench.engine.rollout import SamplingParams
from bench.engine.start import InitialPolicy, Start, record


class Diverged(RuntimeError):
    """A NaN or inf in the loss, the gradients, the weights after a step or the sampling
    probabilities; the run ends with status `diverged` (a result, not a crash)."""


class Stopped(RuntimeError):
    """Raised by an `on_eval` callback to end a run early with a status of its own (`pruned` by a
    tuner); the run is recorded with that status and the evaluations so far."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status


@dataclass
class RunResult:
    run_id: str
    status: str  # finished | diverged | failed | pruned (a Stopped status)
    path: Path
    final: dict = field(default_factory=dict)  # the last evaluation's metrics
    reason: str = ""


def _nanmean(x: torch.Tensor) -> float:
    return x.float().mean().item() if x.numel() else math.nan


def _checked_generate(backend, prompts, params):
    """backend.generate, with non-finite sampling probabilities as Diverged: torch.multinomial
    refuses NaN/inf probabilities (a RuntimeError), greedy decoding does not, so the sampled
    tokens' log-probs are checked too (one reduction over (B, T))."""
    try:
        gen = backend.generate(prompts, params)
    except RuntimeError as e:
        if "probability tensor contains" in str(e):
            raise Diverged("non-finite sampling probabilities (NaN/inf logits)") from None
        raise
    if not bool(torch.isfinite(gen.logp[gen.mask.bool()]).all()):
        raise Diverged("non-finite sampling probabilities (NaN/inf log-probs of sampled tokens)")
    return gen


def _check_weights(model: torch.nn.Module, what: str) -> None:
    """After an optimizer step: NaN/inf weights are divergence, even when loss and gradient norm
    were finite (AdamW can overflow on its own). One norm over all parameters, one sync."""
    norm = torch.nn.utils.get_total_norm([p.detach() for p in model.parameters()])
    if not torch.isfinite(norm):
        raise Diverged(f"non-finite {what} weights after the optimizer step (norm {norm.item()})")


class Trainer:
    def __init__(self, cfg: RunConfig, start: InitialPolicy, root: Path | None = None, log=None, progress: bool = False,
                 save_checkpoint: bool = False, on_eval=None, callbacks: list[Callback] = (),
                 checkpoint_every: int = 0, resume: bool = False, compute: Local | None = None):
        """start: where the initial policy comes from (start.py; every run: bench.warmstart.warm_start,
        passed by bench/harness/worker.py's `trainer`); on_eval: called with each evaluation's row (may
        raise Stopped); callbacks: more hooks (trackers);
        checkpoint_every: save the resume state every N steps (0: never; not part of the config, so
        it changes no run id and no number); resume: continue from the run's last checkpoint;
        compute: where the model calls run (compute.py: this thread, or batched with other runs' in a stack)."""
        self.cfg = cfg
        self.start = start
        self.compute = compute or Local()
        self.save_checkpoint = save_checkpoint
        self.root = Path(root) if root else results.default_root()
        self.log = log or (lambda msg: None)
        self.recipe = cfg.recipe
        self.needs = cfg.recipe.needs
        ctl = cfg.recipe.entropy_control
        self.entropy_state = ctl.state() if ctl is not None else None  # adaptive entropy: (coef, last entropy)
        self.resume = resume
        # the stream first (a row is on disk before anything can stop the run), checkpoints last
        # (they hold what every other callback did at the step, the step's evaluation included)
        self.callbacks: list[Callback] = [Stream(results.live_dir(self.root, cfg.run_id)), *([Progress()] if progress else []),
                                          Evaluations(cfg.eval.fractions),
                                          *([OnEval(on_eval)] if on_eval else []), *callbacks,
                                          *([Checkpoints(checkpoint_every)] if checkpoint_every else [])]
        self.steps: list[dict] = []
        self.evals: list[dict] = []
        self.samples: list[dict] = []  # evaluate.SAMPLES greedy completions per evaluation, with step and fraction
        self.resumed_from: list[int] = []  # steps this run was resumed from (run.json, when any)
        self._wall_before = 0.0  # wall seconds spent before the last resume

    # ---------------------------------------------------------------- set-up
    def _setup(self) -> None:
        cfg, dev = self.cfg, self.cfg.device
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.task = tasks.get(cfg.task, **cfg.task_params)
        self.scale = models.get(cfg.scale)
        sft_task = self.task if not cfg.warmstart.task_params else \
            tasks.get(cfg.task, **cfg.warmstart.sft_params(cfg.task_params))
        self.ws: Start = self.start(sft_task, self.scale, cfg.warmstart, device=dev, log=self.log)
        self.policy: Policy = self.ws.load(dev)
        # The frozen reference only when a recipe's loss needs it or KL is logged (train.kl_metrics;
        # default: on for built-in scales, off for a local model, whose copy costs memory and FLOPs).
        # bf16 where autocast runs in bf16 anyway (train.precision on CUDA): half its memory.
        log_kl = not self.scale.is_local if cfg.train.kl_metrics is None else cfg.train.kl_metrics
        self.reference = None
        if self.needs.reference or log_kl:
            self.reference = copy.deepcopy(self.policy.model).eval().requires_grad_(False)
            if cfg.train.precision == "bf16" and dev.startswith("cuda") and torch.cuda.is_bf16_supported():
                self.reference.to(torch.bfloat16)
        self.shape = ModelShape.of(self.policy.model)
        self.max_new = cfg.train.max_new_tokens or self.task.max_new_tokens
        # held-out evaluations use the live policy on the native backend whatever the rollout settings
        self.behaviour = BehaviourPolicy(self.policy.model, cfg.rollout.lag)
        self.backend = self.compute.backend(cfg.rollout.backend, self.policy, seed=cfg.seed, device=dev,
                                            precision=cfg.rollout.precision)
        self.backend.sync(self.behaviour.model)
        tc = cfg.train
        self.opt = torch.optim.AdamW(self.policy.model.parameters(), lr=tc.lr, weight_decay=tc.weight_decay, **self._adam(tc))
        self.critic = None
        if self.needs.critic:
            self.critic = ValueModel(str(self.ws.path), device=dev)
            self.critic_shape = ModelShape.of(self.critic)
            self.critic_opt = torch.optim.AdamW(self.critic.parameters(), lr=tc.critic_lr, weight_decay=tc.weight_decay,
                                                **self._adam(tc))
        self.device = torch.device(dev)
        self.ledger = Ledger()
        self.train_pool = self.task.pool(cfg.train.prompt_pool)  # cycled in a seeded order; see Task.pool
        ec = cfg.eval
        draw = cfg.seed if ec.items == "per_seed" else None  # None: the fixed test split
        self.test = self.task.eval_set(ec.n_examples, draw)
        self.ood = None  # (task, problems, max_new_tokens) of the harder split, when evaluated
        if ec.ood_examples:
            harder = self.task.ood()
            if harder is None:
                raise algorithms.ConfigError(f"eval.ood_examples: task {self.task.name!r} defines no harder split (Task.ood); "
                                             "set eval.ood_examples = 0")
            self.ood = (harder, harder.eval_set(ec.ood_examples, draw),
                        cfg.train.max_new_tokens or harder.max_new_tokens)
        self._order = torch.Generator().manual_seed(cfg.seed)
        self._queue: list[int] = []

    @staticmethod
    def _adam(tc) -> dict:
        # Exposed for tuning. Measured on addition nano/micro: eps 1e-5 (PPO's usual value) instead of
        # 1e-8 changed nothing; what matters on these tiny models is the learning rate (see suites/math-small.toml).
        return {"betas": (tc.adam_beta1, tc.adam_beta2), "eps": tc.adam_eps}

    def _amp(self):
        """bf16 autocast for forward passes when train.precision == 'bf16' (GPUs; on CPU it is slower)."""
        if self.cfg.train.precision == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _lr_scale(self, step: int, frac: float) -> float:
        tc = self.cfg.train
        warm = min(1.0, (step + 1) / tc.warmup_steps) if tc.warmup_steps else 1.0
        if tc.schedule == "cosine":
            return warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        return warm

    def _next_examples(self, n: int) -> list:
        out = []
        while len(out) < n:
            if not self._queue:
                self._queue = torch.randperm(len(self.train_pool), generator=self._order).tolist()
            out.append(self.train_pool[self._queue.pop()])
        return out

    def fraction(self) -> float:
        """The share of the compute budget spent so far."""
        b = self.cfg.budget
        spent = {"flops": self.ledger.flops, "steps": self._step, "tokens": self.ledger.gen_tokens}[b.kind]
        return spent / b.value

    # ---------------------------------------------------------------- rollouts
    def _seed(self, step: int, rnd: int) -> int:
        return (self.cfg.seed * 1_000_003 + step * 1_009 + rnd) % (2**62)

    def _generate_round(self, step: int, rnd: int, group_offset: int) -> Round:
        """One round: prompts_per_step prompts × G samples from the behaviour policy, scored, shaped, filtered."""
        tc = self.cfg.train
        examples = self._next_examples(tc.prompts_per_step)
        prompts = self.policy.encode_prompts([e.prompt for e in examples])
        G = tc.group_size
        rep = [p for p in prompts for _ in range(G)]
        params = SamplingParams(self.max_new, tc.temperature, tc.top_p, seed=self._seed(step, rnd))
        with self._amp():
            gen = _checked_generate(self.backend, rep, params)
        self.ledger.generation(self.shape, map(len, rep), gen.lengths.tolist())
        texts = self.policy.decode(gen.tokens, gen.mask)
        ex_rows = [e for e in examples for _ in range(G)]
        dev = self.device
        correct = torch.tensor([self.task.score(t, e) >= 1.0 for t, e in zip(texts, ex_rows)], device=dev)
        rewards, parts = reward_fns.combine(self.cfg.rewards, reward_fns.Samples(
            texts, ex_rows, correct, gen.lengths.to(dev), gen.truncated.to(dev), self.max_new, self.task))
        group = torch.arange(group_offset, group_offset + len(examples), device=dev).repeat_interleave(G)
        baseline = None
        if self.needs.greedy_baseline:  # ReMax: one greedy rollout per prompt (same behaviour policy), paid for
            with self._amp():
                greedy = _checked_generate(self.backend, prompts, SamplingParams(self.max_new, greedy=True, seed=0))
            self.ledger.generation(self.shape, map(len, prompts), greedy.lengths.tolist())
            gtexts = self.policy.decode(greedy.tokens, greedy.mask)
            gcorrect = torch.tensor([self.task.score(t, e) >= 1.0 for t, e in zip(gtexts, examples)], device=dev)
            base, _ = reward_fns.combine(self.cfg.rewards, reward_fns.Samples(
                gtexts, examples, gcorrect, greedy.lengths.to(dev), greedy.truncated.to(dev), self.max_new, self.task))
            baseline = base.repeat_interleave(G)
        by_fn = torch.stack([parts[k] for k in sorted(parts)], -1).to(rewards.dtype) if parts else None
        raw = algorithms.Rollouts(
            rewards=rewards, group=group, mask=gen.mask, logp_old=gen.logp, max_new_tokens=self.max_new,
            baseline_rewards=baseline, truncated=gen.truncated, correct=correct,
            reward_parts=by_fn)  # each reward function's unweighted values (GDPO normalises each)
        shaped = self.recipe.shape(raw)
        pids, patt = (t.to(dev) for t in left_pad(rep, self.policy.pad_id))
        return Round(pids, patt, gen.tokens, raw, shaped, self.recipe.keep(shaped), self.behaviour.version, parts)

    def _collect(self, step: int) -> tuple[Batch | None, dict]:
        """Rollouts for one step: refill rounds while the recipe asks for them (dynamic sampling)."""
        rounds: list[Round] = []
        kept_groups = 0
        target = self.cfg.train.prompts_per_step
        while True:
            r = self._generate_round(step, len(rounds), group_offset=len(rounds) * target)
            rounds.append(r)
            kept_groups += int(r.keep.sum()) // self.cfg.train.group_size
            if not self.needs.refill or kept_groups >= target or len(rounds) >= self.needs.max_generation_rounds:
                break
        info = self._sample_metrics(rounds)
        lag = self.behaviour.staleness
        info["rollout/lag"] = float(lag)
        batch = Batch.from_rounds(rounds, self.policy.pad_id, lag, max_groups=target if self.needs.refill else None)
        if batch is not None:
            info["filter/kept_frac"] = batch.rollouts.size / sum(r.keep.numel() for r in rounds)
        return batch, info

    def _sample_metrics(self, rounds: list[Round]) -> dict:
        """Metrics of everything sampled this step (all rounds, before filtering): what the policy does."""
        raw = [r.raw for r in rounds]
        rew = torch.cat([r.shaped.rewards for r in rounds]).float()
        correct = torch.cat([b.correct for b in raw])
        lengths = torch.cat([b.mask.sum(-1) for b in raw])
        trunc = torch.cat([b.truncated for b in raw]).float()
        G = self.cfg.train.group_size
        zero_std = [(b.rewards.view(-1, G).amax(1) == b.rewards.view(-1, G).amin(1)).float() for b in raw]
        return {
            "reward/mean": _nanmean(rew), "reward/std": rew.std().item() if rew.numel() > 1 else math.nan,
            "acc/train": _nanmean(correct.float()), "len/mean": _nanmean(lengths),
            "len/correct": _nanmean(lengths[correct]), "len/incorrect": _nanmean(lengths[~correct]),
            "len/truncated_frac": _nanmean(trunc), "adv/zero_std_group_frac": _nanmean(torch.cat(zero_std)),
            "filter/generation_rounds": float(len(rounds)),
            **reward_fns.metrics([r.reward_parts or {} for r in rounds], correct),
        }

    # ---------------------------------------------------------------- forward passes
    def _chunks(self, n: int):
        mb = self.cfg.train.micro_batch_size
        return [torch.arange(i, min(i + mb, n)) for i in range(0, n, mb)]

    @torch.no_grad()
    def _frozen_passes(self, b: Batch) -> algorithms.Rollouts:
        """logp_old from the backend's behaviour log-probs, then reference log-probs (and critic
        values V_old); every forward pass charged to the ledger."""
        tc = self.cfg.train
        with self._amp():
            beh = self.backend.behaviour_logprobs(b, tc.temperature, tc.micro_batch_size)
            roll = b.rollouts
            sampler = roll.logp_old
            if beh.recomputed:  # e.g. vLLM: one more forward, charged like the reference's
                self.ledger.forward(self.shape, b.seq_lens())
                delta = beh.logp - roll.logp_old
                b.logp_mismatch = delta.abs()[roll.mask.bool()].mean()
                if tc.tis_cap is not None:  # token-level truncated IS: min(π_old / π_sampler, cap), as TRL and verl
                    b.tis = delta.exp().clamp(max=tc.tis_cap) * roll.m
                roll = roll.replace(logp_old=beh.logp)
            if self.needs.behaviour:  # μ = the sampler's numbers; logp_old = the weights the update starts from
                if b.lag > 0:  # stale rollouts: the proximal policy is the live one, one more forward
                    prox = self.compute.frozen_logprobs(self.policy.model, b, tc.temperature, tc.micro_batch_size)
                    self.ledger.forward(self.shape, b.seq_lens())
                    roll = roll.replace(logp_old=prox)
                roll = roll.replace(logp_behav=sampler)
                b.sampler_is_trainer = not beh.recomputed
            if self.reference is not None:  # only when the recipe or KL logging needs it
                ref = self.compute.frozen_logprobs(self.reference, b, tc.temperature, tc.micro_batch_size)
                self.ledger.forward(self.shape, b.seq_lens())
                roll = roll.replace(logp_ref=ref)
            if self.critic is not None:
                vals = torch.cat([self.critic(b.prompt_ids[i], b.prompt_mask[i], b.tokens[i])
                                  for i in self._chunks(len(b.tokens))])
                self.ledger.forward(self.critic_shape, b.seq_lens())
                roll = roll.replace(values=vals * roll.m)
        return roll

    # ---------------------------------------------------------------- updates
    def _update(self, b: Batch, idx: torch.Tensor, adv: torch.Tensor, returns, exact_old: bool,
                train_policy: bool = True) -> dict:
        """One optimizer step on rows idx, micro-batched; returns merged stats and grad norm.

        exact_old: the rows were sampled by these very weights and nothing has updated them since
        (lag 0, first update), so logp_old is set to logp.detach(): ρ ≡ 1 exactly, clip fractions 0.
        """
        tc = self.cfg.train
        mini = b.rollouts.select(idx)
        w = self.recipe.loss_weights(mini)
        if train_policy:
            self.opt.zero_grad(set_to_none=True)
        if self.critic is not None:
            self.critic_opt.zero_grad(set_to_none=True)
        parts = []
        ctl = self.recipe.entropy_control
        coef = ctl.applied(self.entropy_state) if ctl is not None and train_policy else None
        for j in self._chunks(len(idx)):
            rows = idx[j]
            micro = b.rollouts.select(rows)
            with self._amp():
                values = self.critic(b.prompt_ids[rows], b.prompt_mask[rows], b.tokens[rows]).float() \
                    if self.critic is not None else None
                if train_policy:
                    logp, ent = self.compute.logprobs(self.policy.model, b.prompt_ids[rows], b.prompt_mask[rows],
                                                      b.tokens[rows], tc.temperature, with_entropy=True,
                                                      entropy_grad=self.needs.entropy)
            if train_policy:
                if exact_old:
                    exact = {"logp_old": logp.detach()}
                    if b.sampler_is_trainer and micro.logp_behav is not None:
                        exact["logp_behav"] = exact["logp_old"]  # decode vs forward differ by ~1e-6 only
                    micro = micro.replace(**exact)
                loss, stats = self.recipe.loss(logp, micro, adv[rows], weights=w[j], entropy=ent,
                                               values=values, returns=None if returns is None else returns[rows],
                                               entropy_coef=coef)
            else:
                loss, stats = self.recipe.value_loss(values, micro, returns[rows], weights=w[j])
            if not torch.isfinite(loss):
                raise Diverged(f"non-finite loss ({loss.item()})")
            self.compute.backward(loss)
            parts.append(stats)
        out = algorithms.merge_stats(parts)
        if train_policy:
            gn = torch.nn.utils.clip_grad_norm_(self.policy.model.parameters(), tc.grad_clip or float("inf"))
            if not torch.isfinite(gn):
                raise Diverged(f"non-finite gradient norm ({gn.item()})")
            out["grad/norm"] = gn
            if coef is not None:  # the controller moves after each update, on that update's mean entropy
                out["policy/entropy_coef"] = torch.tensor(coef, dtype=torch.float64)
                self.entropy_state = ctl.advance(self.entropy_state, float(out["policy/entropy"]))
            self.opt.step()
            _check_weights(self.policy.model, "policy")
            self.ledger.training(self.shape, b.seq_lens(idx), int(mini.mask.sum().item()))
        if self.critic is not None:
            cn = torch.nn.utils.clip_grad_norm_(self.critic.parameters(), tc.grad_clip or float("inf"))
            if not torch.isfinite(cn):
                raise Diverged(f"non-finite critic gradient norm ({cn.item()})")
            self.critic_opt.step()
            _check_weights(self.critic, "critic")
            self.ledger.training(self.critic_shape, b.seq_lens(idx), 0)
        return out

    def _train_on(self, b: Batch, step: int, train_policy: bool = True) -> dict:
        roll = b.rollouts
        adv = self.recipe.advantages(roll)
        # TIS scales each token's policy-gradient loss by a weight > 0; every objective is positively
        # homogeneous in the advantage, so scaling the advantage does exactly that (KL, value untouched)
        pg_adv = adv if b.tis is None else adv * b.tis
        returns = self.recipe.returns(roll) if self.critic is not None else None
        n_up = self.needs.updates_per_batch
        gen = torch.Generator().manual_seed(self._seed(step, 10_000))
        merged: list[dict] = []
        for _ in range(self.needs.epochs):
            perm = torch.randperm(roll.size, generator=gen) if n_up > 1 else torch.arange(roll.size)
            for idx in torch.tensor_split(perm, min(self.needs.minibatches, roll.size)):
                merged.append(self._update(b, idx, pg_adv, returns, exact_old=n_up == 1 and b.lag == 0,
                                           train_policy=train_policy))
        out: dict = {}
        for k in {k for m in merged for k in m}:
            vals = torch.stack([m[k].double() for m in merged if k in m])
            how = stat_rule(k)  # means of updates, except extremes
            out[k] = vals.max() if how == "max" else vals.min() if how == "min" else vals.mean()
        m = roll.mask.bool()
        out["adv/mean"] = adv[m].mean() if m.any() else torch.tensor(math.nan)
        out.update(algorithms.group_weight_stats(roll, adv, self.recipe.loss_weights(roll)))
        if self.critic is not None:
            out["critic/explained_var"] = algorithms.explained_variance(roll.values, returns, roll.mask)
        return out

    # ---------------------------------------------------------------- the loop
    def step(self, step: int) -> dict:
        t0 = time.perf_counter()
        batch, info = self._collect(step)
        t1 = time.perf_counter()
        row = {"step": step, **info}
        if batch is not None:
            batch.rollouts = self._frozen_passes(batch)
            t2 = time.perf_counter()
            stats = self._train_on(batch, step)
            if batch.logp_mismatch is not None:
                stats["rollout/logp_mismatch"] = batch.logp_mismatch
            row.update({k: v.item() for k, v in stats.items() if k not in ("tokens", "sequences")})
        else:  # every group filtered out: compute was spent, no update
            t2 = time.perf_counter()
            row["filter/kept_frac"] = 0.0
        self.behaviour.advance(self.policy.model)  # the policy of this step is a version older now
        self.backend.sync(self.behaviour.model)
        t3 = time.perf_counter()
        for phase, dt in (("rollout", t1 - t0), ("reference", t2 - t1), ("train", t3 - t2)):
            self.ledger.time(phase, dt)
        row.update({"time/rollout_s": t1 - t0, "time/reference_s": t2 - t1, "time/train_s": t3 - t2, "time/step_s": t3 - t0,
                    "compute/flops": float(self.ledger.flops), "compute/gen_tokens": float(self.ledger.gen_tokens),
                    "compute/train_tokens": float(self.ledger.train_tokens), "lr": self.opt.param_groups[0]["lr"]})
        return row

    def _value_pretrain(self) -> None:
        """VAPO: critic-only updates on rollouts of the initial policy, before any policy update."""
        for k in range(self.needs.value_pretrain_steps):
            batch, _ = self._collect(-1 - k)
            if batch is None:
                continue
            batch.rollouts = self._frozen_passes(batch)
            self._train_on(batch, -1 - k, train_policy=False)

    def _evaluate(self, frac: float) -> dict:
        samples: list[dict] = []
        with self._amp():
            ec = self.cfg.eval.eval_config()
            m = evaluate(self.policy, self.task, self.test, ec, max_new_tokens=self.max_new, seed=self.cfg.seed,
                         samples=samples, ood=self.ood, backend=self.compute.eval_backend(self.policy, ec.batch_size),
                         reference=self.reference)
        self.samples.extend({"step": self._step, "fraction": frac, "index": i, **s} for i, s in enumerate(samples))
        return {"step": self._step, "fraction": frac, "compute/flops": float(self.ledger.flops), **m}

    def evaluate(self, frac: float) -> dict:
        """Evaluate the live policy on the held-out split, record the row, tell the callbacks."""
        row = self._evaluate(frac)
        results.check_rows([row], "eval")
        self.evals.append(row)
        for cb in self.callbacks:
            cb.on_eval(self, self.evals[-1])
        return self.evals[-1]

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict:
        """Everything the next steps depend on (see checkpoint.py for what is left out and why)."""
        cuda = torch.cuda.is_available() and self.device.type == "cuda"
        return {
            "step": self._step, "run_id": self.cfg.run_id,
            "policy": self.policy.model.state_dict(), "opt": self.opt.state_dict(),
            "critic": self.critic.state_dict() if self.critic is not None else None,
            "critic_opt": self.critic_opt.state_dict() if self.critic is not None else None,
            "behaviour": self.behaviour.state_dict(), "ledger": dataclasses.asdict(self.ledger),
            "entropy_state": self.entropy_state,
            "order": self._order.get_state(), "queue": list(self._queue),
            "steps": self.steps, "evals": self.evals, "samples": self.samples,
            "callbacks": {type(cb).__name__: st for cb in self.callbacks if (st := cb.state_dict())},
            "rng": {"torch": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state_all() if cuda else [],
                    "python": random.getstate()},
            "wall_s": self._wall_before + time.perf_counter() - self._t_start, "resumed_from": self.resumed_from,
        }

    def save_state(self, every: int) -> Path:
        """Write the resume checkpoint of the step just done (results/live/<run_id>/checkpoint.pt)."""
        return checkpoint.save(self.root, self.cfg.run_id, self.state_dict(),
                               {"step": self._step, "run_id": self.cfg.run_id, "config": self.cfg.to_dict(),
                                "checkpoint_every": every, "fraction": self.fraction()})

    def _restore(self) -> None:
        """Load the last checkpoint into the freshly set-up trainer (after _setup: the warm start, the
        reference and the backend exist; their weights are the warm start's)."""
        st = checkpoint.load(self.root, self.cfg.run_id, "cpu")  # RNG states must stay CPU tensors
        self.policy.model.load_state_dict(st["policy"])
        self.opt.load_state_dict(st["opt"])
        if self.critic is not None:
            self.critic.load_state_dict(st["critic"])
            self.critic_opt.load_state_dict(st["critic_opt"])
        self.behaviour.load_state_dict(st["behaviour"])
        self.entropy_state = st.get("entropy_state")
        self.backend.sync(self.behaviour.model)
        self.ledger = Ledger(**st["ledger"])
        self._order.set_state(st["order"])
        self._queue = list(st["queue"])
        self.steps, self.evals, self.samples = list(st["steps"]), list(st["evals"]), list(st["samples"])
        for cb in self.callbacks:
            if type(cb).__name__ in st["callbacks"]:
                cb.load_state_dict(st["callbacks"][type(cb).__name__])
        torch.set_rng_state(st["rng"]["torch"])
        if st["rng"]["cuda"]:
            torch.cuda.set_rng_state_all(st["rng"]["cuda"])
        random.setstate(st["rng"]["python"])
        self._step = st["step"]
        self._wall_before = st["wall_s"]
        self.resumed_from = [*st["resumed_from"], self._step]
        self.log(f"resumed run {self.cfg.run_id} from its checkpoint at step {self._step} "
                 f"({len(self.steps)} steps, {len(self.evals)} evaluations so far)")

    # ---------------------------------------------------------------- the run
    def run(self) -> RunResult:
        cfg = self.cfg
        t_start = self._t_start = time.perf_counter()
        self._step = 0
        status, reason = "finished", ""
        if self.resume:  # before any record can be written: nothing to resume is bad input, not a failed run
            problem = checkpoint.resume_problem(self.root, cfg)
            if problem:
                raise algorithms.InputError(problem)
        else:
            results.remove_live(self.root, cfg.run_id)  # a fresh start: no rows or checkpoint of an earlier attempt
        try:
            with self.compute.exclusive():  # a stack's trainers set up one at a time (global RNG, warm start)
                self._setup()
            if self.resume:
                self._restore()
            for cb in self.callbacks:
                cb.on_start(self)
            if not self.resume:
                self.evaluate(0.0)
                self._value_pretrain()  # VAPO only (needs.value_pretrain_steps > 0)
            while self.fraction() < 1.0:
                self._step += 1
                for g in self.opt.param_groups:
                    g["lr"] = cfg.train.lr * self._lr_scale(self._step - 1, self.fraction())
                row = self.step(self._step)
                results.check_rows([row], "step")  # an undeclared metric fails the run now, not at its record
                self.steps.append(row)
                for cb in self.callbacks:  # evaluation when a budget fraction is reached, progress
                    cb.on_step(self, self.steps[-1])
            for cb in self.callbacks:
                cb.on_end(self)
        except Diverged as e:
            status, reason = "diverged", f"step {self._step}: {e}"
            self.log(f"run diverged at step {self._step}: {e}")
        except Stopped as e:
            status, reason = e.status, str(e)
        except Exception as e:  # never end without a record; then let the caller see the error
            phase = "set-up" if not hasattr(self, "ledger") else f"step {self._step}"
            meta = self._meta("failed", f"{type(e).__name__} during {phase}: {e}", t_start)
            meta["traceback"] = traceback.format_exc()
            results.write_run(self.root, cfg.run_id, meta, self.steps, self.evals, samples=self.samples)
            # the live directory stays: its checkpoint (if any) lets `bench run --resume` continue
            e.add_note(f"run {cfg.run_id}: `failed` record with the traceback in "
                       f"{results.run_dir(self.root, cfg.run_id) / 'run.json'}")
            raise
        finally:
            for cb in self.callbacks:
                cb.close()
        meta = self._meta(status, reason, t_start)
        save = None
        if self.save_checkpoint and status == "finished":
            def save(d: Path) -> None:  # transformers format: lm-eval and vLLM load it as is
                self.policy.model.save_pretrained(d)
                self.policy.tokenizer.save_pretrained(d)
        path = results.write_run(self.root, cfg.run_id, meta, self.steps, self.evals, checkpoint=save,
                                 samples=self.samples)
        results.remove_live(self.root, cfg.run_id)  # the record holds every row: the stream and checkpoint go
        return RunResult(cfg.run_id, status, path, self.evals[-1] if self.evals else {}, reason)

    def _meta(self, status: str, reason: str, t_start: float) -> dict:
        cfg = self.cfg
        ws, shape = getattr(self, "ws", None), getattr(self, "shape", None)
        ledger = getattr(self, "ledger", None) or Ledger()
        return {
            "run_id": cfg.run_id, "config_id": cfg.config_id, "recipe_name": cfg.recipe.name, "recipe_id": cfg.recipe.id,
            "status": status, "reason": reason, "diverged_step": self._step if status == "diverged" else None,
            "steps_done": self._step, "flops_spent": float(ledger.flops),
            "gen_tokens": ledger.gen_tokens, "train_tokens": ledger.train_tokens, "seconds_by_phase": ledger.seconds,
            "wall_s": self._wall_before + time.perf_counter() - t_start, "config": cfg.to_dict(), "regime": Regime.of(cfg).record(),
            "warmstart": record(ws),
            "model": {"params": shape.params, "layers": shape.layers, "attn_width": shape.attn_width} if shape else None,
            "max_new_tokens": getattr(self, "max_new", None), **results.environment(),
            **({"resumed_from": self.resumed_from} if self.resumed_from else {}),
        }
