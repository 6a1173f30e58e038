"""Off-policy regimes in the engine (issue 12): stale rollouts (rollout.lag), behaviour log-probs,
ratio telemetry, the regime record, every recipe at lag 2, and the seams (no recipe-name or
backend branches in the engine). One cached warm start serves every test (BENCH_CACHE is a temp dir)."""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import torch

import algorithms
from bench.config import RolloutConfig, RunConfig
from bench.engine import trainer as trainer_mod
from bench.engine.lag import BehaviourPolicy
from bench.engine.policy import sequence_logprobs
from bench.engine.trainer import Trainer
from bench.harness import worker
from tests import fp32
from test_trainer import make_cfg, steps_of

ENGINE = Path(trainer_mod.__file__).resolve().parent


def test_behaviour_policy_ring_gives_the_weights_of_step_t_minus_lag():
    model = torch.nn.Linear(2, 1, bias=False)
    beh = BehaviourPolicy(model, lag=2)
    assert beh.model is not model and not any(p.requires_grad for p in beh.model.parameters())
    seen = []
    for version in range(1, 6):  # the policy's weight after update `version` is `version`
        with torch.no_grad():
            model.weight.fill_(float(version))
        beh.advance(model)
        seen.append((beh.version, beh.staleness, beh.model.weight[0, 0].item()))
    # step t + 1 samples with version max(0, t − 2); version 0 is the initial weight
    init = seen[0][2]
    assert seen == [(0, 1, init), (0, 2, init), (1, 2, 1.0), (2, 2, 2.0), (3, 2, 3.0)]
    assert len(beh._ring) == 2  # memory: lag copies + the sampling module
    live = BehaviourPolicy(model, lag=0)
    live.advance(model)
    assert live.model is model and live.staleness == 0


def track_versions(t: Trainer, monkeypatch, keep) -> tuple[list[dict], dict]:
    """Patch trainer t to record the policy's weights after every step (versions[v] = version v, the
    warm start first) and keep(batch) of the batch each step n trains on (used[n])."""
    versions, used = [], {}
    real_step, real_train = t.step, t._train_on

    def step(n):
        if not versions:
            versions.append({k: v.clone() for k, v in t.policy.model.state_dict().items()})
        row = real_step(n)
        versions.append({k: v.clone() for k, v in t.policy.model.state_dict().items()})
        return row

    def train_on(b, n, train_policy=True):
        used[n] = keep(b)
        return real_train(b, n, train_policy)

    monkeypatch.setattr(t, "step", step)
    monkeypatch.setattr(t, "_train_on", train_on)
    return versions, used


def test_lag_trains_on_the_samplers_logprobs_equal_to_a_recomputation_with_the_lagged_weights(
        bench_cache, tmp_path, monkeypatch):
    """lag 2, one update per batch, a large lr so versions differ: logp_old of step t is the
    behaviour policy's (version t − 3, the warm start until t = 3), not the live policy's."""
    cfg = make_cfg("grpo", budget="4steps", **{"train.lr": 3e-2, "rollout.lag": 2})
    t = worker.trainer(cfg, root=tmp_path)
    versions, used = track_versions(t, monkeypatch, lambda b: (
        b.prompt_ids.clone(), b.prompt_mask.clone(), b.tokens.clone(), b.rollouts.logp_old.clone(),
        b.rollouts.mask.clone()))
    res = t.run()
    assert res.status == "finished", res.reason
    assert sorted(used) == [1, 2, 3, 4]
    stale = 0
    probe = t.reference  # any module of the policy's architecture, loaded with each version in turn
    for n, (pids, patt, toks, logp_old, mask) in used.items():
        m = mask.bool()
        behaviour = max(0, n - 1 - 2)
        probe.load_state_dict(versions[behaviour])
        exact = sequence_logprobs(probe, pids, patt, toks, cfg.train.temperature)[0]
        # the rollout's log-probs come from the incremental decode, these from one forward: other sums
        tol = fp32.logprob_atol(probe.config, pids.shape[-1] + toks.shape[-1], exact[m])
        assert torch.allclose(logp_old[m], exact[m], atol=tol, rtol=0), n
        moved = any(not torch.equal(versions[behaviour][k], versions[n - 1][k]) for k in versions[0])
        if moved:  # the live policy (version n − 1) differs: its log-probs are not the ones used
            probe.load_state_dict(versions[n - 1])
            live = sequence_logprobs(probe, pids, patt, toks, cfg.train.temperature)[0]
            assert (logp_old[m] - live[m]).abs().max() > 1e-3, n
            stale += 1
    assert stale >= 2  # steps 3 and 4 at least (a step whose groups all tie does not move the policy)
    steps = steps_of(res)
    assert steps["rollout/lag"].to_list() == [0.0, 1.0, 2.0, 2.0]
    assert steps["policy/ratio_max"][0] == 1.0 and steps["policy/ratio_dev_frac"][0] == 0.0  # step 1 is on-policy
    assert (steps["policy/ratio_max"][2:] > 1).all() and (steps["policy/log_ratio_abs_mean"][2:] > 0).all()
    assert (steps["policy/seq_ratio_max"][2:] != 1).all()
    meta = json.loads((res.path / "run.json").read_text())
    assert meta["regime"] == {"name": "lag2", "lag": 2, "epochs": 1, "minibatches": 1, "updates_per_batch": 1}
    assert meta["config"]["rollout"] == {"backend": "native", "lag": 2}


def test_clip_fractions_positive_at_lag_two(bench_cache, tmp_path):
    steps = steps_of(worker.trainer(make_cfg("grpo", budget="4steps", **{"train.lr": 3e-2, "rollout.lag": 2}),
                                    root=tmp_path).run())
    assert (steps["policy/clip_frac_low"] + steps["policy/clip_frac_high"])[2:].sum() > 0
    assert (steps["policy/ratio_dev_frac"][2:] > 0).all()


def test_on_policy_rows_are_exactly_on_policy_and_group_stats_are_logged(bench_cache, tmp_path):
    steps = steps_of(worker.trainer(make_cfg("grpo", budget="2steps"), root=tmp_path).run())
    assert steps["rollout/lag"].to_list() == [0.0, 0.0]
    assert steps["policy/ratio_dev_frac"].to_list() == [0.0, 0.0]
    assert steps["policy/log_ratio_abs_mean"].to_list() == [0.0, 0.0]
    assert steps["policy/seq_ratio_mean"].to_list() == [1.0, 1.0] == steps["policy/seq_ratio_max"].to_list()
    spread = steps.filter(pl.col("adv/zero_std_group_frac") < 1)
    assert spread.height >= 1
    for q in ("adv/group_std_q10", "adv/group_std_q50", "adv/group_std_q90"):
        # a group of 4 binary rewards with a spread has Bessel std 0.5 (1 or 3 correct) or 0.577 (2 correct)
        assert ((spread[q] > 0.5 - 1e-6) & (spread[q] < 0.5774)).all(), q
    assert (spread["adv/group_std_q10"] <= spread["adv/group_std_q90"]).all()
    assert ((spread["adv/low_std_group_frac"] >= 0) & (spread["adv/low_std_group_frac"] < 1)).all()
    assert ((spread["adv/low_std_weight_frac"] >= 0) & (spread["adv/low_std_weight_frac"] <= 1)).all()


@pytest.mark.parametrize("name", algorithms.names())
def test_every_recipe_runs_at_lag_two(name, bench_cache, tmp_path):
    """ppo/vapo (critic), remax (greedy baseline from the behaviour policy), dapo (refill rounds)."""
    recipe = algorithms.get(name)
    if recipe.critic is not None and recipe.critic.pretrain_steps:
        recipe = recipe.replace(critic=recipe.critic.replace(pretrain_steps=1))
    cfg = make_cfg(recipe, budget="3steps", **{"rollout.lag": 2})
    res = worker.trainer(cfg, root=tmp_path).run()
    assert res.status == "finished", res.reason
    steps = steps_of(res)
    assert steps["rollout/lag"].to_list() == [0.0, 1.0, 2.0]
    meta = json.loads((res.path / "run.json").read_text())
    u = recipe.updates
    assert meta["regime"]["lag"] == 2 and meta["regime"]["updates_per_batch"] == u.epochs * u.minibatches
    assert meta["regime"]["name"].endswith("lag2")
    row = steps.row(-1, named=True)
    if row["filter/kept_frac"] > 0:
        assert math.isfinite(row["policy/ratio_dev_frac"]) and math.isfinite(row["policy/seq_ratio_mean"])


def test_bench_run_set_rollout_lag(bench_cache, tmp_path):
    out = subprocess.run([sys.executable, "-m", "bench.cli", "run", "--recipe", "dapo", "--task", "addition",
                          "--scale", "nano", "--budget", "3steps", "--quiet", "--threads", "1", "--results", str(tmp_path),
                          "--set", "rollout.lag=2", "--set", "task_params.difficulty=easy",
                          "--set", "train.prompts_per_step=4", "--set", "train.group_size=4",
                          "--set", "warmstart.steps=150", "--set", "warmstart.eval_examples=20",
                          "--set", "eval.n_examples=8", "--set", "eval.k=2"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "regime lag2 (lag 2, 1 epoch(s) × 1 mini-batch(es)" in out.stdout
    run_dir = next((tmp_path / "runs").iterdir())
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["regime"]["name"] == "lag2" and meta["config"]["rollout"] == {"backend": "native", "lag": 2}
    assert pl.read_parquet(run_dir / "steps.parquet")["rollout/lag"].to_list() == [0.0, 1.0, 2.0]


def test_lag_zero_keeps_run_ids_and_the_old_rollout_form():
    cfg = make_cfg("grpo")
    d = cfg.to_dict()
    assert d["rollout"] == "native"  # lag 0: the bare backend string, as before lags existed
    assert RunConfig.from_dict(d).run_id == cfg.run_id
    assert cfg.with_overrides(["rollout.lag=0"]).run_id == cfg.run_id
    lagged = cfg.with_overrides(["rollout.lag=2"])
    assert lagged.rollout == RolloutConfig(backend="native", lag=2) and lagged.run_id != cfg.run_id
    assert RunConfig.from_dict(lagged.to_dict()).run_id == lagged.run_id
    assert cfg.with_overrides(["rollout=vllm"]).rollout == RolloutConfig(backend="vllm", lag=0)
    with pytest.raises(ValueError, match="rollout.lag: got -1; expected an integer >= 0"):
        cfg.with_overrides(["rollout.lag=-1"])
    with pytest.raises(ValueError, match="rollout.backend: got 'sglang'; expected one of 'native', 'vllm'"):
        cfg.with_overrides(["rollout.backend=sglang"])
    with pytest.raises(ValueError, match=r"rollout.lagg: unknown field 'lagg'; valid: backend, lag"):
        cfg.with_overrides(["rollout.lagg=1"])


def test_no_recipe_name_or_backend_branches_in_the_engine():
    """The engine reads recipe.needs and the backend protocol, never a name (STYLE rule 6)."""
    names = algorithms.names()
    for path in sorted(ENGINE.glob("*.py")):
        src = path.read_text()
        for name in names:
            assert not re.search(rf"""["']{re.escape(name)}["']""", src), f"{path.name} names recipe {name!r}"
        assert not re.search(r"\.name\s*==|recipe\.name\s+in\b", src), f"{path.name} branches on a recipe name"
    trainer_src = (ENGINE / "trainer.py").read_text()
    assert "hasattr(self.backend" not in trainer_src
    assert not re.search(r"rollout(\.backend)?\s*[!=]=", trainer_src), "the trainer branches on the rollout backend"
