"""Recipes to and from verl, proved by verl's own code: `core_algos` (verl 0.9.1) policy losses,
`agg_loss`, `kl_penalty` and advantage estimators, composed as verl's actor loss composes them
(verl/workers/utils/losses.py: pg_loss − entropy_coeff·agg(entropy) + kl_loss_coef·agg(kl_penalty)).

verl's wheel pins transformers<5.11 beside our 5.24, so `make test-interop` installs it without its
dependencies beside the venv (its core_algos is pure torch); these tests skip without it. Where verl is
absent, test_export_matches_vendored_verl still checks the export against the verbatim excerpts in
tests/algorithms/reference/ (verl 0.10.0.dev: vanilla, sapo, geo_mean, dppo, clip_cov, kl_cov, dro).

Inputs are float64 with no fully masked row (verl's seq-mean modes leave such rows out of the mean;
ours and TRL's count them); ≤ B·T = 56 terms of size ≤ ~20 per sum, so float64 rounding (~1e-13)
is far below the 1e-6 bound, and a wrong mapping (dual clip, two-sided cap, aggregation) moves the
loss by 1e-2..1.
"""
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import algorithms
from algorithms import Rollouts
from algorithms.errors import InputError
from bench.interop.verl import A, from_verl, to_verl

sys.path.insert(0, str(Path(__file__).parents[1] / "algorithms"))

F64 = torch.float64
B, T = 8, 7
ATOL = 1e-6


def inputs(seed: int, scale: float = 0.4):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0], lengths[1] = 1, T
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(F64)
    logp_old = -torch.rand(B, T, generator=g, dtype=F64) * 3
    logp = (logp_old + scale * torch.randn(B, T, generator=g, dtype=F64)).clamp(max=-1e-3)
    rewards = torch.randint(0, 2, (B,), generator=g).to(F64)
    rewards[:2] = torch.tensor([0.0, 1.0], dtype=F64)  # no group of equal rewards only
    adv = torch.randn(B, generator=g, dtype=F64)
    adv[3] = 0.0
    ref = logp_old + 0.2 * torch.randn(B, T, generator=g, dtype=F64)
    entropy = torch.rand(B, T, generator=g, dtype=F64) * 2
    behav = logp_old + 0.3 * torch.randn(B, T, generator=g, dtype=F64)
    values = torch.randn(B, T, generator=g, dtype=F64) * 0.3
    baseline = torch.rand(B // 4, generator=g, dtype=F64).repeat_interleave(4)
    return SimpleNamespace(mask=mask, logp_old=logp_old, logp=logp, adv=adv, ref=ref, entropy=entropy,
                           rewards=rewards, group=torch.arange(B) // 4, values=values, baseline=baseline, behav=behav)


def flat(tree, prefix=""):
    out = {}
    for k, v in tree.items():
        key = f"{prefix}.{k}" if prefix else k
        out.update(flat(v, key) if isinstance(v, dict) else {key: v})
    return out


def actor_config(core, fields: dict):
    """verl's ActorConfig (or the vendored stand-in) from the export's actor_rollout_ref.actor.* keys."""
    actor = {k[len(A):]: v for k, v in fields.items() if k.startswith(A)}
    pl = {k[len("policy_loss."):]: v for k, v in actor.items() if k.startswith("policy_loss.")}
    actor = {k: v for k, v in actor.items() if not k.startswith("policy_loss.")}
    extra = dict(strategy="fsdp", rollout_n=1, ppo_mini_batch_size=B, ppo_micro_batch_size_per_gpu=B) \
        if core.real else {}
    keep = {f for f in core.ActorConfig.__dataclass_fields__}
    return core.ActorConfig(**extra, **{k: v for k, v in actor.items() if k in keep and k not in extra},
                            policy_loss=core.PolicyLossConfig(**pl))


def verl_actor_loss(core, fields: dict, x):
    """(loss, dlogp, dentropy): verl's policy loss function, entropy bonus and KL loss on x."""
    cfg = actor_config(core, fields)
    mode = fields[A + "policy_loss.loss_mode"]
    agg_mode = fields[A + "loss_agg_mode"]
    logp = x.logp.clone().requires_grad_(True)
    ent = x.entropy.clone().requires_grad_(True)
    adv = x.adv[:, None] * x.mask
    torch.manual_seed(0)  # clip_cov's random pick: the same draw on both sides
    weights = None
    level = fields.get("algorithm.rollout_correction.rollout_is")
    if level is not None:  # verl's own IS weights (rollout_corr_helper), as its trainer computes them
        from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_weights

        weights, _ = compute_rollout_correction_weights(
            log_ratio=x.logp_old - x.behav, response_mask=x.mask, rollout_is=level,
            rollout_is_threshold=fields["algorithm.rollout_correction.rollout_is_threshold"])
    pg, _ = core.loss_fn(mode)(old_log_prob=x.logp_old, log_prob=logp, advantages=adv, response_mask=x.mask,
                              loss_agg_mode=agg_mode, config=cfg, rollout_is_weights=weights)
    loss = pg
    kw = {} if fields.get(A + "loss_scale_factor") is None else {"loss_scale_factor": fields[A + "loss_scale_factor"]}
    coef = fields.get(A + "entropy_coeff", 0.0)
    if coef:
        loss = loss - coef * core.agg_loss(loss_mat=ent, loss_mask=x.mask, loss_agg_mode=agg_mode, **kw)
    if fields.get(A + "use_kl_loss"):
        kld = core.kl_penalty(logprob=logp, ref_logprob=x.ref, kl_penalty=fields[A + "kl_loss_type"])
        loss = loss + core.agg_loss(loss_mat=kld, loss_mask=x.mask, loss_agg_mode=agg_mode, **kw) * fields[A + "kl_loss_coef"]
    dlogp, dent = torch.autograd.grad(loss, (logp, ent), allow_unused=True)
    return loss.detach(), dlogp, torch.zeros_like(ent) if dent is None else dent


def our_loss(recipe, x):
    batch = Rollouts(rewards=x.rewards, group=x.group, mask=x.mask, logp_old=x.logp_old, logp_ref=x.ref,
                     logp_behav=x.behav, max_new_tokens=T)
    logp = x.logp.clone().requires_grad_(True)
    ent = x.entropy.clone().requires_grad_(True)
    torch.manual_seed(0)
    loss, _ = recipe.loss(logp, batch, x.adv[:, None] * x.mask, entropy=ent)
    dlogp, dent = torch.autograd.grad(loss, (logp, ent), allow_unused=True)
    return loss.detach(), dlogp, torch.zeros_like(ent) if dent is None else dent


def assert_same(ours, theirs, mask, what=""):
    (l1, g1, e1), (l2, g2, e2) = ours, theirs
    assert math.isfinite(l2.item()), what
    assert l1.item() == pytest.approx(l2.item(), abs=ATOL), what
    m = mask.bool()
    torch.testing.assert_close(torch.where(m, g1, 0.0), torch.where(m, g2, 0.0), atol=ATOL, rtol=0, msg=what)
    torch.testing.assert_close(torch.where(m, e1, 0.0), torch.where(m, e2, 0.0), atol=ATOL, rtol=0, msg=what)


@pytest.fixture(scope="module")
def verl_core():
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos",
                                     reason="verl goes beside the venv without its dependencies: make test-interop")
    from verl.workers.config import ActorConfig, PolicyLossConfig

    return SimpleNamespace(real=True, loss_fn=core_algos.get_policy_loss_fn, agg_loss=core_algos.agg_loss,
                           kl_penalty=core_algos.kl_penalty, ActorConfig=ActorConfig, PolicyLossConfig=PolicyLossConfig,
                           algos=core_algos)


def exported(max_len=T):
    done, refused = {}, {}
    for name in algorithms.names():
        try:
            done[name] = flat(to_verl(algorithms.get(name), max_response_length=max_len)[0])
        except InputError as e:
            refused[name] = str(e)
    return done, refused


@pytest.mark.parametrize("seed", [0, 1])
def test_every_exportable_recipe_matches_verl_policy_loss(verl_core, seed):
    done, refused = exported()
    assert {"grpo", "dr_grpo", "gspo", "cispo", "sapo", "gmpo", "dppo_tv", "dppo_kl", "kimi", "clip_cov", "kl_cov",
            "rloo", "remax", "reinforce_pp", "gpg", "ppo", "dapo"} <= set(done)
    for name, fields in done.items():
        recipe = algorithms.get(name)
        small = isinstance(recipe.objective, algorithms.GSPO)
        x = inputs(seed, scale=3e-4 if small else 0.4)
        assert_same(our_loss(recipe, x), verl_actor_loss(verl_core, fields, x), x.mask, name)
    for name, msg in refused.items():
        assert msg.startswith(f"recipe {name}: ") and "verl cannot express" in msg and "\n" not in msg
    assert "objective = topr" in refused["topr"]


def whiten_atol(recipe, batch, theirs) -> float:
    """ATOL, or for a whitened estimator its epsilon convention's gap: ours is (a − μ)/(σ + eps), verl's
    masked_whiten (a − μ)/sqrt(σ² + 1e-8); the two differ by |z|·(eps/σ + 1e-8/(2σ²)) at most."""
    from algorithms.advantages import GAEBase, discounted_returns, token_rewards

    adv = recipe.advantage
    if isinstance(adv, GAEBase) and adv.whiten:
        raw = adv.raw(batch, None, adv.lam_of(batch))
    elif isinstance(adv, algorithms.ReinforcePP):
        raw = discounted_returns(token_rewards(adv.base(batch.rewards, batch), batch.mask, None), batch.mask, adv.gamma)
    else:
        return ATOL
    sd = raw[batch.mask.bool()].std().item()
    return ATOL + theirs.abs().max().item() * (adv.eps / sd + 1e-8 / (2 * sd * sd))


def verl_advantages(core, fields: dict, x):
    """verl's estimator on outcome rewards at the last valid token (its token_level_rewards)."""
    est = fields["algorithm.adv_estimator"]
    last = x.mask.sum(-1).long() - 1
    tlr = torch.zeros(B, T, dtype=F64)
    tlr[torch.arange(B), last] = x.rewards
    index = np.array([str(int(g)) for g in x.group])
    if est == "gae":
        adv, _ = core.algos.compute_gae_advantage_return(token_level_rewards=tlr, values=x.values, response_mask=x.mask,
                                                         gamma=fields["algorithm.gamma"], lam=fields["algorithm.lam"])
        return adv
    if est == "grpo":
        adv, _ = core.algos.compute_grpo_outcome_advantage(token_level_rewards=tlr, response_mask=x.mask, index=index,
                                                           norm_adv_by_std_in_grpo=fields["algorithm.norm_adv_by_std_in_grpo"])
        return adv
    from verl.trainer.config import AlgoConfig

    cfg = AlgoConfig(gamma=fields.get("algorithm.gamma", 1.0))
    kw = dict(token_level_rewards=tlr, response_mask=x.mask, config=cfg, index=index)
    if est == "remax":
        kw["reward_baselines"] = x.baseline
    adv, _ = core.algos.get_adv_estimator_fn(est)(**kw)
    return adv


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_exportable_advantage_matches_verl_estimator(verl_core, seed):
    x = inputs(seed)
    seen = set()
    for name, fields in exported()[0].items():
        recipe = algorithms.get(name).replace(kl=algorithms.KL())  # KL in the reward is verl's reward stage, apart
        batch = Rollouts(rewards=x.rewards, group=x.group, mask=x.mask, logp_old=x.logp_old, max_new_tokens=T,
                         values=x.values, baseline_rewards=x.baseline)
        ours = recipe.advantages(batch)
        theirs = verl_advantages(verl_core, fields, x)
        torch.testing.assert_close(torch.where(x.mask.bool(), ours, 0.0), torch.where(x.mask.bool(), theirs, 0.0),
                                   atol=whiten_atol(recipe, batch, theirs), rtol=0, msg=name)
        seen.add(fields["algorithm.adv_estimator"])
    assert {"grpo", "rloo", "remax", "reinforce_plus_plus", "gpg", "gae"} <= seen


# verl's documented example configs (examples/*/run_*.sh, recipe/dapo, docs/algo/*.md), as dotted keys
EXAMPLES = {
    "grpo": {"algorithm.adv_estimator": "grpo", A + "use_kl_loss": True, A + "kl_loss_coef": 0.001,
             A + "kl_loss_type": "low_var_kl", A + "loss_agg_mode": "seq-mean-token-mean", A + "entropy_coeff": 0.001},
    "dr_grpo": {"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": False,
                A + "loss_agg_mode": "seq-mean-token-sum-norm", A + "loss_scale_factor": T},
    "dapo": {"algorithm.adv_estimator": "grpo", A + "clip_ratio_low": 0.2, A + "clip_ratio_high": 0.28,
             A + "clip_ratio_c": 10.0, A + "loss_agg_mode": "token-mean", "algorithm.filter_groups.enable": True},
    "gspo": {"algorithm.adv_estimator": "grpo", A + "policy_loss.loss_mode": "gspo", A + "clip_ratio_low": 3e-4,
             A + "clip_ratio_high": 4e-4, A + "loss_agg_mode": "seq-mean-token-mean"},
    "gspo_token_mean": {"algorithm.adv_estimator": "grpo", A + "policy_loss.loss_mode": "gspo",
                        A + "clip_ratio_low": 3e-4, A + "clip_ratio_high": 4e-4},
    "cispo": {"algorithm.adv_estimator": "grpo", A + "policy_loss.loss_mode": "cispo", A + "clip_ratio_low": 0.2,
              A + "clip_ratio_high": 0.28},
    "sapo": {"algorithm.adv_estimator": "grpo", A + "policy_loss.loss_mode": "sapo"},
    "geo_mean": {"algorithm.adv_estimator": "grpo", A + "policy_loss.loss_mode": "geo_mean", A + "clip_ratio_low": 0.4,
                 A + "clip_ratio_high": 0.4},
    "dppo_tv": {"algorithm.adv_estimator": "grpo", A + "policy_loss.loss_mode": "dppo_tv", A + "clip_ratio": 0.15,
                A + "clip_ratio_low": 0.15, A + "clip_ratio_high": 0.15},
    "clip_cov": {"algorithm.adv_estimator": "grpo", A + "policy_loss.loss_mode": "clip_cov"},
    "kl_cov": {"algorithm.adv_estimator": "grpo", A + "policy_loss.loss_mode": "kl_cov"},
    "dro": {"algorithm.adv_estimator": "grpo", A + "policy_loss.loss_mode": "dro", A + "policy_loss.dro_beta": 0.1},
    "gpg": {"algorithm.adv_estimator": "gpg", A + "policy_loss.loss_mode": "gpg"},
    "rloo": {"algorithm.adv_estimator": "rloo", "algorithm.use_kl_in_reward": True, "algorithm.kl_ctrl.kl_coef": 0.001},
    "reinforce_pp": {"algorithm.adv_estimator": "reinforce_plus_plus", A + "use_kl_loss": True, A + "kl_loss_type": "mse"},
    "ppo": {"algorithm.adv_estimator": "gae", "algorithm.lam": 0.95, A + "ppo_epochs": 2},
    "reinforce_pp_baseline": {"algorithm.adv_estimator": "reinforce_plus_plus_baseline"},
    "opo": {"algorithm.adv_estimator": "opo"},
    "remax": {"algorithm.adv_estimator": "remax", A + "loss_agg_mode": "seq-mean-token-sum"},
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", list(EXAMPLES))
def test_import_matches_verl(verl_core, name, seed):
    fields = {"data.max_response_length": T, "actor_rollout_ref.rollout.n": 4, **EXAMPLES[name]}
    tr = from_verl(fields, name)
    assert not tr.unmodelled
    full = {**{k: v for k, v in __import__("bench.interop.verl", fromlist=["DEFAULTS"]).DEFAULTS.items()}, **fields}
    small = fields.get(A + "policy_loss.loss_mode") == "gspo"
    x = inputs(seed, scale=3e-4 if small else 0.4)
    assert_same(our_loss(tr.recipe, x), verl_actor_loss(verl_core, full, x), x.mask, name)
    theirs = verl_advantages(verl_core, full, x)
    batch = Rollouts(rewards=x.rewards, group=x.group, mask=x.mask, logp_old=x.logp_old, max_new_tokens=T,
                     values=x.values, baseline_rewards=x.baseline)
    ours = tr.recipe.replace(kl=algorithms.KL()).advantages(batch)
    torch.testing.assert_close(torch.where(x.mask.bool(), ours, 0.0), torch.where(x.mask.bool(), theirs, 0.0),
                               atol=whiten_atol(tr.recipe, batch, theirs), rtol=0)


def test_import_is_not_vacuous(verl_core):
    """verl's always-on dual clip and two-sided CISPO matter: dropping them changes the loss."""
    x = inputs(0)
    full = {**__import__("bench.interop.verl", fromlist=["DEFAULTS"]).DEFAULTS, **EXAMPLES["cispo"]}
    cispo = verl_actor_loss(verl_core, full, x)
    trl_style = from_verl(EXAMPLES["cispo"], "t").recipe.replace(objective=algorithms.CISPO(ratio_max=1.28))
    assert abs(our_loss(trl_style, x)[0] - cispo[0]) > 1e-3
    full = {**__import__("bench.interop.verl", fromlist=["DEFAULTS"]).DEFAULTS, "algorithm.adv_estimator": "grpo",
            A + "clip_ratio_c": 1.5}
    dual = verl_actor_loss(verl_core, full, x)
    plain = from_verl(full, "t").recipe.replace(objective=algorithms.PPOClip())
    assert abs(our_loss(plain, x)[0] - dual[0]) > 1e-3


@pytest.fixture(scope="module")
def vendored():
    from reference import verl_policy_losses as v

    return SimpleNamespace(real=False, loss_fn=lambda mode: v.POLICY_LOSS_REGISTRY[mode], agg_loss=v.agg_loss,
                           kl_penalty=None, ActorConfig=v.ActorConfig, PolicyLossConfig=v.PolicyLossConfig,
                           modes=set(v.POLICY_LOSS_REGISTRY))


@pytest.mark.parametrize("seed", [0, 1])
def test_export_matches_vendored_verl(vendored, seed):
    """Without verl installed: the export against verl's verbatim policy losses (no KL in the loss)."""
    checked = []
    for name, fields in exported()[0].items():
        if fields[A + "policy_loss.loss_mode"] not in vendored.modes or fields.get(A + "use_kl_loss"):
            continue
        x = inputs(seed)
        assert_same(our_loss(algorithms.get(name), x), verl_actor_loss(vendored, fields, x), x.mask, name)
        checked.append(name)
    assert {"dr_grpo", "sapo", "gmpo", "dppo_tv", "kimi", "kl_cov", "rloo", "remax"} <= set(checked)
