"""Many runs, one kernel: R trainers whose model calls run together (issue 27).

`run_stack(cfgs, root, start)` trains R runs of one cell at once: each run is an ordinary `Trainer` in a
thread of its own, with its own recipe, parts, metrics, optimizer, clipping, ledger, callbacks and
record, so a replica's run.json, steps and evaluations have the schema, run id and resume semantics
of a run alone. Only its model calls (compute.py: sampling, log-probs with and without gradients,
the backward pass) go to a shared `Server`, which waits until every live replica is waiting on one,
then runs each group of like calls as one call of its `ops`:

    Looped   each call as the run alone would make it, one after another: records identical to
             runs alone, bit for bit (the reference the stacked ops are tested against)
    Stacked  the calls of a group as one stacked call over the replicas' weights
             (bench/engine/stacked.py): every matmul R times larger, the overhead paid once

A replica that diverges or fails ends its own run (its record says so) and leaves the server; the
others go on. Backward passes are grouped by the forward call their loss came from, so one stacked
forward gets one backward over the sum of its replicas' losses (the gradient of each replica's
loss reaches only its own weights).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from algorithms.errors import InputError
from bench.config import RunConfig
from bench.engine.compute import Local
from bench.engine.policy import Policy, sequence_logprobs
from bench.engine.backends import make_backend
from bench.engine.padding import pad_cat
from bench.engine.rollout import Generation, NativeBackend, RolloutBackend, SamplingParams, batch_logprobs
from bench.engine.stacked import StackedLM
from bench.engine.start import InitialPolicy


@dataclass(eq=False)
class _Request:
    replica: int
    kind: str  # generate | logprobs | frozen | backward
    key: Any  # calls of one kind and key run as one group
    payload: dict
    done: bool = False
    result: Any = None
    error: BaseException | None = None


class Looped:
    """Each call of a group on its own, exactly as a run alone makes it."""

    def generate(self, calls: list[dict]) -> list:
        return [c["backend"].generate(c["prompts"], c["params"]) for c in calls]

    def logprobs(self, calls: list[dict]) -> list:
        return [sequence_logprobs(c["model"], c["prompt_ids"], c["prompt_mask"], c["tokens"], c["temperature"],
                                  with_entropy=c["with_entropy"], entropy_grad=c["entropy_grad"]) for c in calls]

    def frozen(self, calls: list[dict]) -> list:
        return [batch_logprobs(c["model"], c["batch"], c["temperature"], c["micro_batch_size"]) for c in calls]


class Stacked(Looped):
    """Sampling as StackedLM.generate over the weights the replicas' samplers hold at the call (the
    rollouts and the evaluations: most of a tiny model's step on a CPU); log-probs, frozen passes
    and backward passes as Looped.

    Every call goes through a stack, a lone one too (a stack of one), so a replica's tokens come from
    the same code whichever companions share its group: its records do not depend on them (the
    sampler's row floor, MIN_ROWS in stacked.py, keeps its matmuls on one kernel path). Against a run
    alone (NativeBackend) a row can differ where float rounding flips a token, as stacked.py says.
    A call of several chunks (the backend's chunk_size) draws the chunks in turn from one generator
    per replica, as NativeBackend does. Calls of unequal sizes or chunkings (a replica's rollout beside
    another's evaluation, where replicas drift apart) run as separate stacks. A sampler
    at a rounded precision, or a model the fused forward does not cover, samples as Looped.
    """

    def __init__(self) -> None:
        self._stacks: dict[int, StackedLM] = {}  # by number of replicas: leaves reused, weights refilled

    def generate(self, calls: list[dict]) -> list:
        out: list = [None] * len(calls)
        sized: dict[tuple, list[int]] = {}  # calls that can share a stack: size, chunking, special tokens
        for i, c in enumerate(calls):
            b = c["backend"]
            if b.precision != "fp32" or not b.fused:
                out[i] = b.generate(c["prompts"], c["params"])
            else:
                sized.setdefault((len(c["prompts"]), b.chunk_size, b.pad_id, b.eos_id, b.drop_finished), []).append(i)
        for (n, *_), idx in sized.items():
            for i, g in zip(idx, self._generate([calls[i] for i in idx], n)):
                out[i] = g
        return out

    def _generate(self, calls: list[dict], n: int) -> list:
        backends = [c["backend"] for c in calls]
        stack = self._stacks.get(len(calls))
        if stack is None:  # the replicas of one stack share an architecture: load_replica checks it
            stack = self._stacks[len(calls)] = StackedLM(backends[0].model, len(calls))
        with torch.no_grad():
            for r, b in enumerate(backends):
                stack.load_replica(r, b.model)
        device = stack.inv_freq.device
        gens = [torch.Generator(device=device).manual_seed(c["params"].seed) for c in calls]
        size = backends[0].chunk_size or n
        parts = [stack.generate([c["prompts"][i:i + size] for c in calls], calls[0]["params"], gens,
                                backends[0].pad_id, backends[0].eos_id, drop_finished=backends[0].drop_finished)
                 for i in range(0, n, size)]
        if len(parts) == 1:
            return parts[0]
        pad = backends[0].pad_id
        return [Generation(tokens=pad_cat([p[r].tokens for p in parts], pad), mask=pad_cat([p[r].mask for p in parts], 0.0),
                           logp=pad_cat([p[r].logp for p in parts], 0.0), truncated=torch.cat([p[r].truncated for p in parts]))
                for r in range(len(calls))]


class Server:
    """The rendezvous of R replica threads: a call waits until every live replica waits, then each
    group of like calls runs at once, in the thread of the replica that arrived last."""

    def __init__(self, ops, replicas: int):
        self.ops = ops
        self._cv = threading.Condition()
        self._live = set(range(replicas))
        self._waiting: list[_Request] = []
        self._owing: dict[int, set[int]] = {}  # forward id -> replicas whose backward for it is still to come
        self._next_forward = 0
        self.setup_lock = threading.Lock()
        self.calls = {"generate": 0, "logprobs": 0, "frozen": 0, "backward": 0}  # groups run, by kind
        self.requests = dict.fromkeys(self.calls, 0)
        self.seconds = dict.fromkeys(self.calls, 0.0)  # wall seconds in each kind's groups

    def request(self, replica: int, kind: str, key: Any, **payload) -> Any:
        req = _Request(replica, kind, key, payload)
        with self._cv:
            self._waiting.append(req)
            self._run_ready()
            while not req.done:
                self._cv.wait()
        if req.error is not None:
            raise req.error
        return req.result

    def leave(self, replica: int) -> None:
        """A replica's run ended (finished, diverged or failed): nobody waits for it any more."""
        with self._cv:
            self._live.discard(replica)
            for owing in self._owing.values():
                owing.discard(replica)
            self._run_ready()

    # ------------------------------------------------------------------ dispatch (lock held)
    def _run_ready(self) -> None:
        while self._waiting and len(self._waiting) == len(self._live):
            ran = False
            for group in self._groups():
                self._execute(group)
                ran = True
            if not ran:  # every live replica waits on a backward whose forward partner waits elsewhere
                err = RuntimeError("stack deadlock: " + ", ".join(f"replica {r.replica} waits on {r.kind}"
                                                                  for r in self._waiting))
                for r in self._waiting:
                    r.error, r.done = err, True
            self._waiting = [r for r in self._waiting if not r.done]
            self._cv.notify_all()

    def _groups(self) -> list[list[_Request]]:
        groups: dict[tuple, list[_Request]] = {}
        for r in self._waiting:
            groups.setdefault((r.kind, r.key), []).append(r)
        ready = []
        for (kind, key), reqs in groups.items():
            if kind == "backward" and key is not None:
                owing = self._owing.get(key, set())
                if not owing <= {r.replica for r in reqs}:
                    continue  # a replica of that forward has not computed its loss yet
            ready.append(reqs)
        return ready

    def _execute(self, group: list[_Request]) -> None:
        kind = group[0].kind
        self.calls[kind] += 1
        self.requests[kind] += len(group)
        t0 = time.perf_counter()
        try:
            if kind == "backward":
                torch.autograd.backward([r.payload["loss"] for r in group])
                self._owing.pop(group[0].key, None)
                results = [None] * len(group)
            elif kind == "logprobs":
                with torch.set_grad_enabled(group[0].key[-1]):
                    outs = self.ops.logprobs([r.payload for r in group])
                fid = None
                if group[0].key[-1]:  # with gradients: each replica owes this forward a backward
                    fid = self._next_forward = self._next_forward + 1
                    self._owing[fid] = {r.replica for r in group}
                results = [(out, fid) for out in outs]
            else:
                with torch.no_grad():
                    results = getattr(self.ops, kind)([r.payload for r in group])
        except BaseException as e:  # noqa: BLE001 (every replica of the group sees the error: its run fails)
            for r in group:
                r.error, r.done = e, True
            return
        finally:
            self.seconds[kind] += time.perf_counter() - t0
        for r, res in zip(group, results):
            r.result, r.done = res, True


class _Backend:
    """A replica's rollout backend: the native one for syncing and behaviour log-probs, its
    sampling run by the server."""

    def __init__(self, native, replica: Replica):
        self.native = native
        self.replica = replica

    def sync(self, model: torch.nn.Module) -> None:
        self.native.sync(model)

    def behaviour_logprobs(self, batch, temperature: float, micro_batch_size: int):
        return self.native.behaviour_logprobs(batch, temperature, micro_batch_size)

    def generate(self, prompts: list[list[int]], params: SamplingParams):
        key = (params.max_new_tokens, params.temperature, params.top_p, params.greedy)
        return self.replica.server.request(self.replica.index, "generate", key, backend=self.native,
                                           prompts=prompts, params=params)


class Replica(Local):
    """The compute of replica `index` of a stack: its model calls go to the server."""

    def __init__(self, server: Server, index: int):
        self.server = server
        self.index = index
        self._forward: int | None = None  # the stacked forward the next backward belongs to

    def backend(self, name: str, policy: Policy, seed: int, device: str, precision: str) -> RolloutBackend:
        if name != "native":
            raise InputError(f"rollout {name!r}: a stack samples with the native backend only; run it alone "
                             "(--stack 1)")
        return _Backend(make_backend(name, policy, seed=seed, device=device, precision=precision), self)

    def eval_backend(self, policy: Policy, chunk_size: int) -> RolloutBackend:
        """The evaluation's sampler: the one a run alone builds, its sampling run by the server (with
        the other replicas' evaluations, which fall at the same fractions of the budget)."""
        return _Backend(NativeBackend(policy.model, policy.pad_id, policy.eos_id, chunk_size=chunk_size), self)

    def logprobs(self, model, prompt_ids, prompt_mask, tokens, temperature, with_entropy=False, entropy_grad=False):
        key = (temperature, with_entropy, entropy_grad, torch.is_grad_enabled())
        out, fid = self.server.request(self.index, "logprobs", key, model=model, prompt_ids=prompt_ids,
                                       prompt_mask=prompt_mask, tokens=tokens, temperature=temperature,
                                       with_entropy=with_entropy, entropy_grad=entropy_grad)
        if fid is not None:
            self._forward = fid
        return out

    def frozen_logprobs(self, model, batch, temperature, micro_batch_size):
        return self.server.request(self.index, "frozen", (temperature, micro_batch_size), model=model, batch=batch,
                                   temperature=temperature, micro_batch_size=micro_batch_size)

    def backward(self, loss: torch.Tensor) -> None:
        fid, self._forward = self._forward, None
        self.server.request(self.index, "backward", fid, loss=loss)

    def exclusive(self):
        return self.server.setup_lock


@dataclass
class StackOutcome:
    """What each replica's run returned (a RunResult) or raised."""

    results: list = field(default_factory=list)
    calls: dict = field(default_factory=dict)  # server groups run, by kind
    requests: dict = field(default_factory=dict)  # replica calls served, by kind
    seconds: dict = field(default_factory=dict)  # wall seconds the server spent on each kind's groups


def run_stack(cfgs: list[RunConfig], root: Path, start: InitialPolicy, ops=None,
              trainer_kw: Callable[[RunConfig], dict] | None = None) -> StackOutcome:
    """Train `cfgs` as one stack (threads sharing one server; ops: Stacked unless given); every
    replica writes its own record and starts from `start` (start.py), as a run alone does.
    trainer_kw(cfg): more Trainer arguments for a replica (its own callbacks). Returns each replica's
    RunResult, or the exception its run raised (a `failed` record is written for it, as for a run
    alone)."""
    from bench.engine.trainer import Trainer

    if not cfgs:
        raise ValueError("run_stack needs at least one run")
    server = Server(ops or Stacked(), len(cfgs))
    trainers = [Trainer(c, start=start, root=root, compute=Replica(server, i), **(trainer_kw(c) if trainer_kw else {}))
                for i, c in enumerate(cfgs)]
    results: list = [None] * len(cfgs)

    def work(i: int) -> None:
        try:
            results[i] = trainers[i].run()
        except BaseException as e:  # noqa: BLE001 (the trainer recorded it; the caller sees it per replica)
            results[i] = e
        finally:
            server.leave(i)

    threads = [threading.Thread(target=work, args=(i,), name=f"replica-{i}") for i in range(len(cfgs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return StackOutcome(results, dict(server.calls), dict(server.requests), dict(server.seconds))
