"""The 2026-family objectives against outside references, on shared random inputs.

Each new part (and PPOClip's delta, and dual clip) is run through `Recipe.loss` with an aggregation
and compared, loss and gradient w.r.t. logp, with verbatim excerpts of verl (verl-project/verl
1dda039) and TRL (huggingface/trl f2cd577) in tests/algorithms/reference/. Inputs are float64,
ragged (a length-1 row, a full row), advantages of both signs, ratios inside and outside the clip
ranges. verl's aggregations leave fully masked rows out of "seq-mean"; ours and TRL's count them, so
verl comparisons use no empty row and TRL/geo_mean comparisons include one.
"""

import dataclasses
import json

import pytest
import torch

from algorithms import Aggregation, GroupNorm, GSPO, PPOClip, Recipe, Rollouts, aggregate
from algorithms.objectives import DPPO, GMPO, SAPO, VESPO, ClipCov, Kimi, KLCov
from algorithms.serialize import to_dict
from reference import trl_policy_losses as trl
from reference import verl_policy_losses as verl
from reference.verl_policy_losses import ActorConfig, PolicyLossConfig

F64 = torch.float64
SEEDS = [0, 1, 2, 3]
VERL_MODE = {"token_mean": "token-mean", "seq_mean_token_mean": "seq-mean-token-mean",
             "seq_mean_token_sum": "seq-mean-token-sum", "seq_mean_token_sum_norm": "seq-mean-token-sum-norm"}


@dataclasses.dataclass
class Case:
    batch: Rollouts
    logp: torch.Tensor      # (B, T) the current policy's log-probs (a plain tensor; leaves made per call)
    adv_row: torch.Tensor   # (B,) one advantage per completion
    adv: torch.Tensor       # (B, T) adv_row on valid tokens, 0 on padding (what the engine passes)


def case(seed: int, B: int = 8, T: int = 7, scale: float = 0.4, empty_row: bool = False,
         adv_scale: float = 1.0, zero_adv: bool = True) -> Case:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0], lengths[1] = 1, T
    if empty_row:
        lengths[2] = 0
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(F64)
    logp_old = -torch.rand(B, T, generator=g, dtype=F64) * 3
    logp = (logp_old + scale * torch.randn(B, T, generator=g, dtype=F64)).clamp(max=-1e-3)
    adv_row = adv_scale * torch.randn(B, generator=g, dtype=F64)
    if zero_adv:
        adv_row[3] = 0.0  # a zero advantage too
    behav = logp_old + 0.3 * torch.randn(B, T, generator=g, dtype=F64)
    batch = Rollouts(rewards=torch.zeros(B, dtype=F64), group=torch.arange(B) // 4, mask=mask,
                     logp_old=logp_old, max_new_tokens=T, logp_behav=behav)
    return Case(batch, logp, adv_row, adv_row[:, None] * mask)


def ours(objective, mode, c: Case):
    """(loss, grad w.r.t. logp, stats) through Recipe.loss."""
    recipe = Recipe(advantage=GroupNorm(), objective=objective, aggregation=Aggregation(mode))
    logp = c.logp.clone().requires_grad_(True)
    loss, stats = recipe.loss(logp, c.batch, c.adv)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad, stats


def verl_loss(name, c: Case, mode, config: ActorConfig):
    logp = c.logp.clone().requires_grad_(True)
    loss, metrics = verl.POLICY_LOSS_REGISTRY[name](
        old_log_prob=c.batch.logp_old, log_prob=logp, advantages=c.adv, response_mask=c.batch.mask,
        loss_agg_mode=VERL_MODE[mode], config=config)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad, metrics


def trl_loss(c: Case, importance_sampling_ratio=None, **kw):
    logp = c.logp.clone().requires_grad_(True)
    loss = trl.GRPOLossExcerpt(**kw).policy_loss(logp, c.batch.logp_old, c.adv_row, c.batch.mask,
                                                   importance_sampling_ratio)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad


# verl's seq-mean-token-mean divides a row by L_i + 1e-8: relative 1e-8 on a length-1 row
VERL_SEQ_RTOL = 1e-7


def assert_match(a, b, rtol=1e-9, atol=1e-12):
    (la, ga), (lb, gb) = a[:2], b[:2]
    assert ga.abs().sum() > 0, "vacuous: no gradient"
    torch.testing.assert_close(la, lb, rtol=rtol, atol=atol)
    torch.testing.assert_close(ga, gb, rtol=rtol, atol=atol)


def clip_fracs(stats):
    return stats["policy/clip_frac_low"].item(), stats["policy/clip_frac_high"].item()


# ------------------------------------------------------------------ SAPO


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("taus", [(1.0, 1.05), (0.75, 1.625)])
def test_sapo_matches_verl_and_trl(seed, taus):
    c = case(seed, scale=0.6)
    mine = ours(SAPO(*taus), "seq_mean_token_mean", c)
    ref = verl_loss("sapo", c, "seq_mean_token_mean", ActorConfig(tau_pos=taus[0], tau_neg=taus[1]))
    assert_match(mine, ref, rtol=VERL_SEQ_RTOL)
    assert clip_fracs(mine[2]) == (0.0, 0.0)
    # TRL builds τ with torch.where over Python floats, i.e. in float32 (1.05 becomes 1.0499999523):
    # it equals SAPO at the float32-rounded τ. Its mean over sequences counts a fully masked row, as
    # our B does
    taus32 = tuple(float(torch.tensor(t, dtype=torch.float32)) for t in taus)
    for c in (c, case(seed, scale=0.6, empty_row=True)):  # noqa: B020 (the first case, then one more)
        assert_match(ours(SAPO(*taus32), "seq_mean_token_mean", c),
                     trl_loss(c, loss_type="sapo", sapo_temperature_pos=taus[0],
                              sapo_temperature_neg=taus[1]))


def test_sapo_gate_by_hand():
    # ρ = 1: ℓ = −(4/τ)·σ(0)·A = −2A/τ; ρ = e: −(4/τ)σ(τ(e−1))A
    logp_old = torch.zeros(2, 2, dtype=F64)
    logp = torch.tensor([[0.0, 1.0], [0.0, 1.0]], dtype=F64)
    adv = torch.tensor([[2.0, 2.0], [-1.0, -1.0]], dtype=F64)
    loss, _ = SAPO(1.0, 1.05).per_token(logp, logp_old, adv, torch.ones(2, 2))
    e = torch.e
    s = lambda x: 1 / (1 + torch.exp(torch.tensor(-x, dtype=F64)))  # noqa: E731
    expect = torch.stack([torch.stack([-8 * s(0.0), -8 * s(e - 1)]),
                          torch.stack([4 / 1.05 * s(0.0), 4 / 1.05 * s(1.05 * (e - 1))])])
    torch.testing.assert_close(loss, expect, rtol=1e-14, atol=0)


def test_sapo_gate_damped_frac_counts_the_tokens_the_gate_acts_on():
    """4σ(τ(ρ−1))(1−σ) is 1 at ρ = 1 and below 0.99 once |ρ − 1| passes ~0.2/τ: on-policy no token
    is damped; off-policy exactly those past the 1% line are (GATE_TOL)."""
    logp_old = torch.zeros(1, 4, dtype=F64)
    adv = torch.ones(1, 4, dtype=F64)
    _, st = SAPO(1.0, 1.05).per_token(logp_old.clone(), logp_old, adv, torch.ones(1, 4))
    assert float(st["policy/gate_damped_frac"]) == 0.0
    rho = torch.tensor([[1.0, 1.1, 1.3, 0.5]], dtype=F64)  # factor 4σ(1−σ) at τ = 1: 1, 0.9975, 0.978, 0.94
    _, st = SAPO(1.0, 1.05).per_token(rho.log(), logp_old, adv, torch.tensor([[1.0, 1.0, 1.0, 0.0]]))
    assert float(st["policy/gate_damped_frac"]) == pytest.approx(1 / 3)  # of the 3 valid tokens only ρ = 1.3


# ------------------------------------------------------------------ GMPO


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("eps", [(0.4, 0.4), (0.1, 0.25)])
def test_gmpo_with_seq_mean_token_mean_is_verl_geo_mean(seed, eps):
    c = case(seed, scale=0.5, empty_row=True)  # geo_mean's torch.mean counts every row, as our B does
    mine = ours(GMPO(*eps), "seq_mean_token_mean", c)
    ref = verl_loss("geo_mean", c, "token_mean",  # verl's geo_mean ignores loss_agg_mode
                    ActorConfig(clip_ratio=eps[0], clip_ratio_low=eps[0], clip_ratio_high=eps[1]))
    assert_match(mine, ref, rtol=VERL_SEQ_RTOL)  # verl divides by L_i + 1e-8
    # clip fractions count where the clip binds (convention 7); verl's count every out-of-range
    # token by A's sign, binding or not (for A > 0, δ < −eps_low keeps its gradient)
    low, high = clip_fracs(mine[2])
    m, delta = c.batch.mask.bool(), c.logp - c.batch.logp_old
    n = m.sum().item()
    assert low == pytest.approx(((c.adv < 0) & (delta < -eps[0]) & m).sum().item() / n, abs=1e-15)
    assert high == pytest.approx(((c.adv > 0) & (delta > eps[1]) & m).sum().item() / n, abs=1e-15)
    assert low <= ref[2]["actor/pg_clipfrac_lower"] + 1e-9 and high <= ref[2]["actor/pg_clipfrac"] + 1e-9
    if eps == (0.1, 0.25):
        assert low > 0 and high > 0  # both clips bind somewhere


# ------------------------------------------------------------------ LUSPO: no new part


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("eps", [(3e-4, 4e-4), (0.03, 0.05), (0.2, 0.2)])
def test_luspo_is_gspo_with_seq_mean_token_sum(seed, eps):
    # TRL's luspo: GSPO's sequence ratio s_i (importance_sampling_level="sequence"), PPO's clip on it,
    # the (B, 1) loss times L_i, mean over every row: mean_i L_i·ℓ_i(s_i). Our GSPO puts ℓ_i(s_i) on each
    # token (gradient s_i ∇log π_t), and seq_mean_token_sum sums a row's tokens and divides by B.
    c = case(seed, scale=0.3, empty_row=True)
    mine = ours(GSPO(*eps), "seq_mean_token_sum", c)
    assert_match(mine, trl_loss(c, loss_type="luspo", importance_sampling_level="sequence",
                                epsilon_low=eps[0], epsilon_high=eps[1]))


# ------------------------------------------------------------------ VESPO


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scale", [0.3, 4.0])  # 4.0: sequence log-weights past the [log 1e-8, 20] clamp
@pytest.mark.parametrize("params", [(2.0, 3.0, 3.0, 2.0), (1.0, 0.5, 4.0, 1.5)])
def test_vespo_matches_trl_gamma_weights(seed, scale, params):
    c = case(seed, scale=scale)
    kp, lp, kn, ln = params
    trl_kw = dict(loss_type="vespo", vespo_k_pos=kp, vespo_lambda_pos=lp, vespo_k_neg=kn, vespo_lambda_neg=ln)
    mine = ours(VESPO(kp, lp, kn, ln), "token_mean", c)  # TRL: token sum over num_items_in_batch
    assert_match(mine, trl_loss(c, **trl_kw))
    # the behaviour term: TRL's token-level vLLM ratio exp((old − sampler)·mask), untruncated
    beh = VESPO(kp, lp, kn, ln, behaviour=True)
    assert Recipe(advantage=GroupNorm(), objective=beh).needs.behaviour
    ratio = torch.exp((c.batch.logp_old - c.batch.logp_behav) * c.batch.mask)
    assert_match(ours(beh, "token_mean", c), trl_loss(c, importance_sampling_ratio=ratio, **trl_kw))


def test_vespo_clamps_match_trl():
    # rows whose Σδ passes e^20 (φ underflows to 0), passes 1e-8 (clamped), a token δ past ±20, and
    # a behaviour term that pushes a row's log-weight past the clamp on its own
    T = 7
    logp_old = torch.full((4, T), -6.0, dtype=F64)
    logp = torch.full((4, T), -0.1, dtype=F64)
    logp[1] = -12.0                                       # Σδ = −42 → log 1e-8
    logp_old[2, 0], logp[2, 1:] = -35.0, logp_old[2, 1:]  # one token δ = 34.9 → 20
    logp[3] = logp_old[3] + 0.05                          # near on-policy ...
    behav = logp_old.clone()
    behav[3] = logp_old[3] + 4.0                          # ... but log ρ_behav sums to −28
    mask = torch.ones(4, T, dtype=F64)
    mask[0, 5:] = 0                                       # row 0: Σδ = 5 · 5.9 → 20
    batch = Rollouts(rewards=torch.zeros(4, dtype=F64), group=torch.zeros(4, dtype=torch.long), mask=mask,
                     logp_old=logp_old, max_new_tokens=T, logp_behav=behav)
    adv_row = torch.tensor([1.0, -0.5, 0.7, -1.2], dtype=F64)
    c = Case(batch, logp, adv_row, adv_row[:, None] * mask)
    # φ at the clamps is tiny (e^−34 at log 1e-8) or 0: compare relatively, no absolute slack
    assert_match(ours(VESPO(), "token_mean", c), trl_loss(c, loss_type="vespo"), atol=0)
    ratio = torch.exp((logp_old - behav) * mask)
    assert_match(ours(VESPO(behaviour=True), "token_mean", c),
                 trl_loss(c, importance_sampling_ratio=ratio, loss_type="vespo"), atol=0)


def test_vespo_weight_is_one_on_policy():
    c = case(0)
    loss, _ = VESPO().per_token(c.batch.logp_old.clone(), c.batch.logp_old, c.adv, c.batch.mask)
    torch.testing.assert_close(loss, -c.adv * c.batch.logp_old, rtol=1e-14, atol=0)  # φ(1) = 1
    with pytest.raises(ValueError, match="logp_behav"):
        VESPO(behaviour=True).per_token(c.logp, c.batch.logp_old, c.adv, c.batch.mask)


# ------------------------------------------------------------------ DPPO


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("divergence, delta", [("tv", None), ("tv", 0.05), ("kl", None), ("kl", 0.01)])
@pytest.mark.parametrize("cap", [3.0, 1.5])
@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_sum_norm"])
def test_dppo_matches_verl(seed, divergence, delta, cap, mode):
    c = case(seed, scale=0.8, zero_adv=False)  # verl masks A = 0 by the A < 0 rule; convention 7 by neither
    obj = DPPO(divergence, delta, cap)
    d = obj.threshold
    mine = ours(obj, mode, c)
    ref = verl_loss(f"dppo_{divergence}", c, mode,
                    ActorConfig(clip_ratio=d, clip_ratio_low=d, clip_ratio_high=d, clip_ratio_c=cap))
    assert_match(mine, ref)
    low, high = clip_fracs(mine[2])
    assert low + high == pytest.approx(ref[2]["actor/pg_clipfrac"], rel=1e-7, abs=1e-12)
    capped = mine[2]["policy/weight_capped_frac"].item()
    assert capped == pytest.approx(ref[2]["actor/pg_clipfrac_lower"], rel=1e-7, abs=1e-12)


def test_dppo_masks_and_caps_bind_somewhere():
    c = case(0, scale=0.8)
    for divergence in ("tv", "kl"):
        _, _, stats = ours(DPPO(divergence, ratio_cap=1.5), "token_mean", c)
        low, high = clip_fracs(stats)
        assert low > 0 and high > 0 and stats["policy/weight_capped_frac"].item() > 0, divergence


# ------------------------------------------------------------------ Kimi k1.5 / DRO


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("tau", [0.1, 1.3])
@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean"])
def test_kimi_matches_verl_dro(seed, tau, mode):
    c = case(seed, scale=0.5)
    ref = verl_loss("dro", c, mode, ActorConfig(policy_loss=PolicyLossConfig(dro_beta=tau)))
    rtol = VERL_SEQ_RTOL if mode == "seq_mean_token_mean" else 1e-9
    assert_match(ours(Kimi(tau), mode, c), ref, rtol=rtol)


# ------------------------------------------------------------------ Clip-Cov / KL-Cov


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("frac, window, eps", [(2e-4, (1.0, 5.0), (0.2, 0.2)),
                                                (0.15, (0.5, 5.0), (0.2, 0.28)),
                                                (0.6, (0.2, 3.0), (0.1, 0.1))])
def test_clip_cov_matches_verl_with_the_same_seed(seed, frac, window, eps):
    c = case(seed, B=12, T=9, scale=0.3, adv_scale=2.5)
    cfg = ActorConfig(clip_ratio=eps[0], clip_ratio_low=eps[0], clip_ratio_high=eps[1],
                      policy_loss=PolicyLossConfig(clip_cov_ratio=frac, clip_cov_lb=window[0],
                                                   clip_cov_ub=window[1]))
    with torch.random.fork_rng():  # both draw from the global generator; leave it as it was
        torch.manual_seed(100 + seed)
        mine = ours(ClipCov(eps[0], eps[1], frac, *window), "token_mean", c)
        state = torch.get_rng_state()
        torch.manual_seed(100 + seed)
        ref = verl_loss("clip_cov", c, "token_mean", cfg)
        assert torch.equal(state, torch.get_rng_state())  # the same number of draws
    assert_match(mine, ref)
    share = mine[2]["policy/cov_frac"].item()
    assert share > 0  # not vacuous: some token was detached
    assert share == pytest.approx(ref[2]["actor/pg_clipfrac"], rel=1e-7)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("frac, coef", [(2e-4, 0.1), (0.2, 0.1), (0.5, 1.0)])
@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean"])
def test_kl_cov_matches_verl(seed, frac, coef, mode):
    c = case(seed, B=12, T=9, scale=0.3)
    mine = ours(KLCov(frac, coef), mode, c)
    cfg = ActorConfig(policy_loss=PolicyLossConfig(kl_cov_ratio=frac, ppo_kl_coef=coef))
    rtol = VERL_SEQ_RTOL if mode == "seq_mean_token_mean" else 1e-9
    assert_match(mine, verl_loss("kl_cov", c, mode, cfg), rtol=rtol)
    n = int(c.batch.mask.sum())
    assert mine[2]["policy/cov_frac"].item() == pytest.approx(max(1, int(n * frac)) / n)


# ------------------------------------------------------------------ PPOClip: dual clip and delta


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("eps", [(0.2, 0.2), (0.2, 0.28)])
@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_ppo_clip_and_dual_clip_match_verl_vanilla(seed, eps, mode):
    c = case(seed, scale=1.5)  # ratios past c = 3 for some A < 0 tokens
    cfg = dict(clip_ratio=eps[0], clip_ratio_low=eps[0], clip_ratio_high=eps[1])
    dual = ours(PPOClip(*eps, dual_clip=3.0), mode, c)
    rtol = VERL_SEQ_RTOL if mode == "seq_mean_token_mean" else 1e-9
    assert_match(dual, verl_loss("vanilla", c, mode, ActorConfig(clip_ratio_c=3.0, **cfg)), rtol=rtol)
    plain = ours(PPOClip(*eps), mode, c)
    assert_match(plain, verl_loss("vanilla", c, mode, ActorConfig(clip_ratio_c=1e300, **cfg)), rtol=rtol)
    assert not torch.allclose(dual[0], plain[0])  # the dual clip binds on these inputs


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("delta", [1.5, 3.0])
@pytest.mark.parametrize("loss_type, mode", [("grpo", "seq_mean_token_mean"), ("dapo", "token_mean"),
                                             ("bnpo", "token_mean")])
def test_ppo_clip_delta_matches_trl(seed, delta, loss_type, mode):
    c = case(seed, scale=1.5, empty_row=loss_type == "grpo")
    mine = ours(PPOClip(0.2, 0.28, delta=delta), mode, c)
    assert_match(mine, trl_loss(c, loss_type=loss_type, epsilon_low=0.2, epsilon_high=0.28, delta=delta))
    # for A < 0 it is the dual clip at c = δ; for A > 0 PPO's clip binds first
    same = ours(PPOClip(0.2, 0.28, dual_clip=delta), mode, c)
    assert_match(mine, same, rtol=0, atol=0)
    above = c.logp - c.batch.logp_old > torch.log(torch.tensor(delta, dtype=F64))
    binds = ((c.adv < 0) & above & c.batch.mask.bool()).any()
    assert binds == (not torch.allclose(mine[1], ours(PPOClip(0.2, 0.28), mode, c)[1]))


def test_ppo_clip_delta_leaves_existing_ids_alone():
    assert "delta" not in to_dict(PPOClip(0.2, 0.28))
    assert to_dict(PPOClip(0.2, 0.28, delta=2.0))["delta"] == 2.0
    assert json.loads(json.dumps(to_dict(PPOClip()))) == {"type": "ppo_clip", "eps_low": 0.2, "eps_high": 0.2,
                                                           "dual_clip": None}


# ------------------------------------------------------------------ invariants and validation


ON_POLICY = [SAPO(), SAPO(0.5, 2.0), GMPO(), GMPO(0.1, 0.2), VESPO(), VESPO(1.0, 0.5, 4.0, 1.5), DPPO("tv"),
             DPPO("kl"), Kimi(), Kimi(2.0), KLCov(0.3, 1.0), PPOClip(0.2, 0.28, delta=2.0)]
MODES = ["seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm", "seq_mean_token_sum", "prompt_mean"]


@pytest.mark.parametrize("objective", ON_POLICY, ids=lambda o: o.short())
@pytest.mark.parametrize("mode", MODES)
def test_on_policy_gradient_is_reinforce(objective, mode):
    c = case(7, empty_row=True)
    c.logp = c.batch.logp_old.clone()
    loss, grad, stats = ours(objective, mode, c)
    w = Aggregation(mode).weights(c.batch.mask, c.batch.group, c.batch.max_new_tokens)
    logp = c.batch.logp_old.clone().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(aggregate(-c.adv * logp, c.batch.mask, w), logp)
    torch.testing.assert_close(grad, g_ref, rtol=1e-10, atol=1e-14)
    assert clip_fracs(stats) == (0.0, 0.0)


def test_clip_cov_detaches_on_policy_too():
    # the covariance rule does not look at the ratio: on-policy, the picked tokens lose their gradient
    c = case(3, B=12, T=9, adv_scale=2.5)
    c.logp = c.batch.logp_old.clone()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        _, grad, stats = ours(ClipCov(frac=0.1, cov_low=0.5), "token_mean", c)
    assert stats["policy/cov_frac"].item() > 0 and clip_fracs(stats) == (0.0, 0.0)
    reinforce = -c.adv / c.batch.mask.sum()
    differs = ~torch.isclose(grad, reinforce, rtol=1e-12, atol=1e-15)
    assert differs.any() and torch.all(grad[differs] == 0)


@pytest.mark.parametrize("objective", [SAPO(), GMPO(), VESPO(), VESPO(behaviour=True), DPPO("kl"), Kimi()],
                         ids=lambda o: o.short())
def test_micro_batches_with_full_batch_weights_sum_to_the_full_loss(objective):
    c = case(5, B=8, scale=0.5)
    recipe = Recipe(advantage=GroupNorm(), objective=objective,
                    aggregation=Aggregation("seq_mean_token_mean"))
    logp = c.logp.clone().requires_grad_(True)
    full, _ = recipe.loss(logp, c.batch, c.adv)
    w = recipe.loss_weights(c.batch)
    parts = [recipe.loss(logp[i], c.batch.select(i), c.adv[i], weights=w[i])[0]
             for i in torch.split(torch.arange(8), [3, 5])]
    torch.testing.assert_close(sum(parts), full, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("make, field", [
    (lambda: SAPO(tau_pos=0.0), "SAPO.tau_pos"),
    (lambda: SAPO(tau_neg=-1.0), "SAPO.tau_neg"),
    (lambda: GMPO(eps_low=-0.1), "GMPO.eps_low"),
    (lambda: GMPO(eps_high=-0.4), "GMPO.eps_high"),
    (lambda: VESPO(k_pos=-1.0), "VESPO.k_pos"),
    (lambda: VESPO(lambda_neg=0.0), "VESPO.lambda_neg"),
    (lambda: VESPO(behaviour=1), "VESPO.behaviour"),
    (lambda: DPPO(divergence="js"), "DPPO.divergence"),
    (lambda: DPPO(delta=0.0), "DPPO.delta"),
    (lambda: DPPO(ratio_cap=0.5), "DPPO.ratio_cap"),
    (lambda: Kimi(tau=-0.1), "Kimi.tau"),
    (lambda: ClipCov(frac=0.0), "ClipCov.frac"),
    (lambda: ClipCov(frac=1.5), "ClipCov.frac"),
    (lambda: ClipCov(cov_low=5.0, cov_high=1.0), "ClipCov.cov_high"),
    (lambda: ClipCov(eps_low=1.5), "ClipCov.eps_low"),
    (lambda: KLCov(frac=0.0), "KLCov.frac"),
    (lambda: KLCov(kl_coef=-0.1), "KLCov.kl_coef"),
    (lambda: PPOClip(0.2, 0.28, delta=1.2), "PPOClip.delta"),
    (lambda: PPOClip(delta="2"), "PPOClip.delta"),
])
def test_bad_values_raise_naming_the_field(make, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        make()


def test_dppo_default_thresholds():
    assert DPPO("tv").threshold == 0.2 and DPPO("kl").threshold == 0.05 and DPPO("kl", 0.1).threshold == 0.1
