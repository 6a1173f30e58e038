"""Stacks of runs (bench/engine/stack.py): R trainers in threads whose model calls a shared server
runs together. With the Looped ops every call runs as the run alone makes it, so a replica's record
must equal the run alone bit for bit; with the Stacked ops (the default: sampling as one StackedLM
call) it agrees with the run alone within float rounding and does not depend on its companions; a
replica that diverges or fails ends alone."""
import json

import polars as pl
import pytest
import torch
from test_trainer import make_cfg

from bench.engine import compute as compute_mod
from bench.engine.stack import Looped, Server, Stacked
from bench.engine.trainer import Trainer
from bench.harness import worker


def tables(res) -> tuple[pl.DataFrame, pl.DataFrame]:
    steps = pl.read_parquet(res.path / "steps.parquet").select(pl.exclude("^time/.*$"))
    return steps, pl.read_parquet(res.path / "evals.parquet")


def assert_close_record(a, b, atol: float = 1e-5) -> None:
    """The same run within float rounding: every step and evaluation, discrete columns equal, float
    columns within atol (a stacked sampler's log-probs round ~1e-6 apart from a model alone's)."""
    assert (a.run_id, a.status) == (b.run_id, b.status), (a, b)
    for x, y in zip(tables(a), tables(b)):
        assert x.columns == y.columns and x.height == y.height, a.run_id
        for col in x.columns:
            u, v = x[col], y[col]
            if u.dtype.is_float():
                assert ((u - v).abs() <= atol + 1e-4 * v.abs()).fill_null(True).all() and \
                    u.is_nan().equals(v.is_nan()), (a.run_id, col, u.to_list(), v.to_list())
            else:
                assert u.equals(v), (a.run_id, col)


def assert_same_record(a, b) -> None:
    assert (a.run_id, a.status) == (b.run_id, b.status), (a, b)
    for x, y in zip(tables(a), tables(b)):
        assert x.equals(y), a.run_id
    ma, mb = (json.loads((r.path / "run.json").read_text()) for r in (a, b))
    for k in ("status", "steps_done", "flops_spent", "gen_tokens", "train_tokens", "config"):
        assert ma[k] == mb[k], k


@pytest.mark.parametrize("recipe", ["grpo", "dapo", "ppo", "decoupled_ppo"])
def test_a_looped_stack_writes_the_records_of_runs_alone(recipe, bench_cache, tmp_path):
    """dapo refills (replicas leave lockstep), ppo has a critic, decoupled_ppo at lag 2 samples from
    stale weights and recomputes the proximal policy."""
    over = {"rollout.lag": 2, "recipe.updates.minibatches": 2} if recipe == "decoupled_ppo" else {}
    cfgs = [make_cfg(recipe, budget="2steps", seed=s, **over) for s in (0, 1)]
    alone = [worker.trainer(c, root=tmp_path / "alone").run() for c in cfgs]
    out = worker.stack(cfgs, tmp_path / "stack", ops=Looped())
    for a, b in zip(alone, out.results):
        assert_same_record(a, b)
    assert out.requests["generate"] > out.calls["generate"]  # calls were grouped, not run one by one
    if recipe == "grpo":  # in lockstep: one group per step of each kind, and per evaluation's greedy and sampled call
        assert out.calls["generate"] == 2 + 3 * 2 and out.requests["generate"] == 2 * (2 + 3 * 2)


@pytest.mark.parametrize("recipe", ["grpo", "dapo"])
def test_a_stacked_stack_agrees_with_runs_alone(recipe, bench_cache, tmp_path):
    """Sampling stacked (rollouts and evaluations): the records of runs alone within float rounding."""
    cfgs = [make_cfg(recipe, budget="2steps", seed=s) for s in (0, 1, 2)]
    alone = [worker.trainer(c, root=tmp_path / "alone").run() for c in cfgs]
    out = worker.stack(cfgs, tmp_path / "stack")
    for a, b in zip(alone, out.results):
        assert_close_record(a, b)
    assert out.requests["generate"] > out.calls["generate"]


@pytest.mark.parametrize("ops", [Looped, Stacked])
def test_a_replica_is_the_same_whatever_its_companions(ops, bench_cache, tmp_path):
    """Looped runs each replica's own calls on its own shapes, whatever its companions: the same kernels
    on the same shapes in one process, so bitwise on any CPU. Stacked batches the companions into one
    call, whose shapes (and a BLAS's blocking of them) change with the company: within float rounding,
    as tests/engine/test_stacked.py derives."""
    cfgs = [make_cfg("grpo", budget="2steps", seed=s) for s in (0, 5, 7)]
    a = worker.stack(cfgs[:2], tmp_path / "a", ops=ops()).results[0]
    b = worker.stack([cfgs[0], cfgs[2]], tmp_path / "b", ops=ops()).results[0]
    c = worker.stack(cfgs[:1], tmp_path / "c", ops=ops()).results[0]
    same = assert_same_record if ops is Looped else assert_close_record
    same(a, b)
    same(a, c)


@pytest.mark.parametrize("ops", [Looped, Stacked])
def test_a_diverging_replica_ends_alone_and_the_others_finish(ops, bench_cache, tmp_path, monkeypatch):
    """The others never notice: bitwise with Looped; with Stacked (the default) the companions that
    remain change the sampling call's shapes, so what reads the sampler's log-probs (eval/kl_k1,
    eval/kl_k3) agrees within float rounding, as in test_a_replica_is_the_same_whatever_its_companions."""
    real = compute_mod.sequence_logprobs

    def poisoned(model, *args, **kw):  # replica seed 1's policy forward turns NaN at its second step
        logp, ent = real(model, *args, **kw)
        if torch.is_grad_enabled() and getattr(model, "_poison", False) and model._calls >= 1:
            logp = logp * float("nan")
        if torch.is_grad_enabled() and getattr(model, "_poison", False):
            model._calls += 1
        return logp, ent

    monkeypatch.setattr("bench.engine.stack.sequence_logprobs", poisoned)
    cfgs = [make_cfg("grpo", budget="3steps", seed=s) for s in (0, 1, 2)]
    real_setup = Trainer._setup

    def setup(self):
        real_setup(self)
        if self.cfg.seed == 1:
            self.policy.model._poison, self.policy.model._calls = True, 0

    monkeypatch.setattr(Trainer, "_setup", setup)
    out = worker.stack(cfgs, tmp_path / "stack", ops=ops())
    status = [r.status for r in out.results]
    assert status == ["finished", "diverged", "finished"], [getattr(r, "reason", r) for r in out.results]
    assert "non-finite" in out.results[1].reason
    alone = worker.trainer(cfgs[2], root=tmp_path / "alone").run()
    (assert_same_record if ops is Looped else assert_close_record)(alone, out.results[2])


def test_a_failing_replica_records_its_failure_and_the_others_finish(bench_cache, tmp_path, monkeypatch):
    real_setup = Trainer._setup

    def setup(self):
        if self.cfg.seed == 1:
            raise RuntimeError("disk on fire")
        real_setup(self)

    monkeypatch.setattr(Trainer, "_setup", setup)
    cfgs = [make_cfg("grpo", budget="2steps", seed=s) for s in (0, 1)]
    out = worker.stack(cfgs, tmp_path / "stack")
    assert out.results[0].status == "finished"
    assert isinstance(out.results[1], RuntimeError) and "disk on fire" in str(out.results[1])
    meta = json.loads((tmp_path / "stack" / "runs" / cfgs[1].run_id / "run.json").read_text())
    assert meta["status"] == "failed" and "disk on fire" in meta["reason"]


def test_the_server_groups_like_calls_and_waits_for_every_live_replica():
    class Ops:
        def __init__(self):
            self.groups = []

        def frozen(self, calls):
            self.groups.append(sorted(c["who"] for c in calls))
            return [c["who"] * 10 for c in calls]

    import threading

    ops = Ops()
    server = Server(ops, 3)
    out = {}

    def ask(i, key):
        out[i] = server.request(i, "frozen", key, who=i)

    threads = [threading.Thread(target=ask, args=(i, "k" if i < 2 else "other")) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert out == {0: 0, 1: 10, 2: 20}
    assert sorted(ops.groups) == [[0, 1], [2]]  # two keys: two groups, each one call
    assert isinstance(Looped(), Looped)


def test_the_runner_packs_seeds_of_one_config_into_stacks():
    from bench.harness.runner import pack

    g = [make_cfg("grpo", seed=s) for s in range(5)]
    d = [make_cfg("dapo", seed=s) for s in range(2)]
    cov = [make_cfg("clip_cov", seed=s) for s in range(2)]  # draws from the global generator: alone
    other_lr = make_cfg("grpo", seed=9, **{"train.lr": 3e-4})
    jobs = pack([g[0], d[0], g[1], cov[0], g[2], d[1], g[3], cov[1], g[4], other_lr], 2)
    assert [[c.recipe.name + str(c.seed) for c in j] for j in jobs] == [
        ["grpo0", "grpo1"], ["dapo0", "dapo1"], ["clip_cov0"], ["grpo2", "grpo3"], ["clip_cov1"], ["grpo4"],
        ["grpo9"]]
    assert pack(g, 1) == [[c] for c in g]
    # a cell of several warm starts (warmstart.seed = seed mod N): one stack, each replica loads its own;
    # another warm-start setting is another stack
    ws = [c.replace(warmstart=c.warmstart.replace(seed=c.seed % 3)) for c in g]
    longer = g[0].replace(warmstart=g[0].warmstart.replace(steps=g[0].warmstart.steps + 1))
    assert [len(j) for j in pack(ws + [longer], 8)] == [5, 1]
