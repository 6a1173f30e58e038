"""The 2026 family in the engine (issue 25): the mismatch regime (a sampler with rounded weights), the
behaviour log-probs a correction reads (logp_behav: the sampler's; logp_old: the proximal policy),
and the adaptive entropy controller's state. One cached warm start serves every test."""
import json

import pytest
import torch

import algorithms
from algorithms.entropy import AdaptiveEntropy
from bench.config import Regime, RolloutConfig
from bench.engine.policy import sequence_logprobs
from bench.harness import worker
from tests import fp32
from test_offpolicy import track_versions
from test_trainer import make_cfg, steps_of


def test_rollout_precision_is_a_later_field_and_native_only():
    assert RolloutConfig.parse("native").canonical() == "native"  # every earlier run id stays
    assert RolloutConfig.build({"lag": 2}).canonical() == {"backend": "native", "lag": 2}
    assert RolloutConfig.build({"precision": "bf16"}).canonical() == {"backend": "native", "lag": 0, "precision": "bf16"}
    with pytest.raises(ValueError, match="precision"):
        RolloutConfig.build({"backend": "vllm", "precision": "bf16"})
    with pytest.raises(ValueError, match="fp32"):
        RolloutConfig.build({"precision": "int4"})
    r = Regime(precision="bf16")
    assert r.auto_name == "bf16" and r.patch()["rollout"] == {"lag": 0, "precision": "bf16"}
    assert Regime(lag=2).record() == {"name": "lag2", "lag": 2, "epochs": 1, "minibatches": 1, "updates_per_batch": 1}


def test_bf16_sampler_gives_a_real_mismatch_that_grpo_tis_corrects(bench_cache, tmp_path, monkeypatch):
    cfg = make_cfg("grpo_tis", budget="3steps", **{"rollout.precision": "bf16"})
    t = worker.trainer(cfg, root=tmp_path)
    seen = {}
    real = t._train_on

    def train_on(b, n, train_policy=True):
        seen[n] = b.rollouts
        return real(b, n, train_policy)

    monkeypatch.setattr(t, "_train_on", train_on)
    res = t.run()
    assert res.status == "finished", res.reason
    steps = steps_of(res)
    # bf16 weights: each rounded by up to 2⁻⁹ relative (~2e-3), a perturbation of the logits of that
    # relative size, far above float32's reordering (~1e-7 per sum); 1e-4 is 20x under the former
    assert (steps["rollout/logp_mismatch"] > 1e-4).all()
    w = steps["correction/weight_mean"]
    assert ((w - 1).abs() > 0).all() and ((w - 1).abs() < 0.05).all()
    for roll in seen.values():
        m = roll.mask.bool()
        gap = (roll.logp_old - roll.logp_behav)[m]
        assert gap.abs().max() > 0  # logp_old is the fp32 recomputation, logp_behav the sampler's numbers
    meta = json.loads((res.path / "run.json").read_text())
    assert meta["config"]["rollout"] == {"backend": "native", "lag": 0, "precision": "bf16"}
    # the same run in fp32 needs no recomputation: no mismatch, weights exactly 1, one forward fewer per step
    fp = steps_of(worker.trainer(make_cfg("grpo_tis", budget="3steps"), root=tmp_path / "fp32").run())
    assert fp["rollout/logp_mismatch"].is_null().all() or fp["rollout/logp_mismatch"].is_nan().all()
    assert (fp["correction/weight_mean"] == 1.0).all() and (fp["correction/masked_frac"] == 0.0).all()


def test_stale_rollouts_give_a_correction_the_samplers_logprobs_and_the_proximal_policy(
        bench_cache, tmp_path, monkeypatch):
    """decoupled_ppo at lag 2 with a large lr: logp_behav of step t is the behaviour policy's
    (version t − 3), logp_old the live policy's (version t − 1), recomputed by one more forward."""
    cfg = make_cfg("decoupled_ppo", budget="4steps", **{"train.lr": 3e-2, "rollout.lag": 2})
    t = worker.trainer(cfg, root=tmp_path)
    versions, used = track_versions(t, monkeypatch, lambda b: (
        b.prompt_ids.clone(), b.prompt_mask.clone(), b.tokens.clone(), b.rollouts))
    res = t.run()
    assert res.status == "finished", res.reason
    probe = t.reference
    moved = 0
    for n, (pids, patt, toks, roll) in used.items():
        m = roll.mask.bool()
        for version, logp in ((max(0, n - 1 - 2), roll.logp_behav), (n - 1, roll.logp_old)):
            probe.load_state_dict(versions[version])
            exact = sequence_logprobs(probe, pids, patt, toks, cfg.train.temperature)[0]
            tol = fp32.logprob_atol(probe.config, pids.shape[-1] + toks.shape[-1], exact[m])  # decode vs one forward
            assert torch.allclose(logp[m], exact[m], atol=tol, rtol=0), (n, version)
        moved += bool((roll.logp_old - roll.logp_behav)[m].abs().max() > 1e-3)
    assert moved >= 2
    steps = steps_of(res)
    assert (steps["correction/weight_mean"][2:] != 1.0).all()
    # one more forward per step than grpo's token-mean twin without the correction, from step 1 on
    twin = algorithms.get("decoupled_ppo").replace(corrections=())
    plain = steps_of(worker.trainer(make_cfg(twin, budget="4steps", **{"train.lr": 3e-2, "rollout.lag": 2}),
                                    root=tmp_path / "twin").run())
    lagged = steps["rollout/lag"] > 0
    assert (steps["compute/flops"] > plain["compute/flops"]).filter(lagged).all()


def test_adaptive_entropy_moves_its_coefficient_each_update_and_survives_a_checkpoint(bench_cache, tmp_path):
    ctl = AdaptiveEntropy(target=100.0, delta=0.01)  # entropy is always below: the coefficient only rises
    recipe = algorithms.get("grpo").replace(entropy_control=ctl)
    assert recipe.needs.entropy
    t = worker.trainer(make_cfg(recipe, budget="3steps"), root=tmp_path)
    res = t.run()
    assert res.status == "finished", res.reason
    steps = steps_of(res)
    assert steps["policy/entropy_coef"].to_list() == pytest.approx([0.0, 0.01, 0.02])  # off before the first update
    assert t.state_dict()["entropy_state"]["coef"] == pytest.approx(0.03)
    with pytest.raises(ValueError, match="Recipe.entropy_control"):
        recipe.replace(entropy_coef=0.01)
    low = AdaptiveEntropy(target=0.0, delta=0.5, init=0.5)
    st = low.advance(low.state(), 1.0)
    assert st == {"coef": 0.0, "last_entropy": 1.0} and low.applied(st) == 0.0
    with pytest.raises(ValueError, match="AdaptiveEntropy.init"):
        AdaptiveEntropy(init=2.0)
