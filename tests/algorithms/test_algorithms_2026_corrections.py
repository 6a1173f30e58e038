"""The corrections (corrections.py) against verbatim excerpts of verl, TRL and AReaL
(tests/algorithms/reference/) on shared random float64 inputs: ragged masks, mixed-sign advantages,
ratios inside and outside the ranges (a few beyond the ±20 log guard), several seeds; one whole loss
and its gradient against TRL's composition; hand-computed numbers for the rules no excerpt pins down
(OPSM's per-token sign, M2PO's strict stop and ties, the unbounded weight)."""

from __future__ import annotations


import pytest
import torch
from alg_helpers import DTYPE
from reference import areal_losses as areal
from reference import trl_corrections as trl
from reference import verl_advantages_corrections as verl

from algorithms import Aggregation, GroupNorm, Recipe, Rollouts
from algorithms.corrections import M2PO, OffPolicySequenceMask, RolloutCorrection, TopEntropyMask
from algorithms.objectives import PPOClip

SEEDS = (0, 1, 2, 3)


def mismatch(seed: int, scale: float = 0.6, B: int = 10, T: int = 9, extreme: bool = True) -> Rollouts:
    """A batch whose behaviour log-probs differ from logp_old by N(0, scale) per token; with `extreme`,
    row 0 has one token at log ρ = −25 and the others near +1.5 (sequence sum ≈ −13, which a per-token
    clamp would turn into ≈ −8), row 1 a sequence sum of +27 (beyond the ±20 log guard)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[:2] = T
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(DTYPE)
    old = -torch.rand(B, T, generator=g, dtype=DTYPE) * 3
    behav = old + scale * torch.randn(B, T, generator=g, dtype=DTYPE)
    if extreme:
        behav[0] = behav[0] - 1.5
        behav[0, 3] = old[0, 3] + 25.0
        behav[1] = old[1] - 3.0
    return Rollouts(rewards=torch.randn(B, generator=g, dtype=DTYPE), group=torch.arange(B) // 2, mask=mask,
                    logp_old=old, max_new_tokens=T, logp_behav=behav)


def weight(corr, batch, logp=None, adv=None, entropy=None):
    logp = batch.logp_old.clone() if logp is None else logp
    adv = torch.zeros_like(batch.mask) if adv is None else adv
    c = corr.weight(logp, batch, adv, entropy)
    assert not c.requires_grad
    return c


def assert_on_valid(ours, theirs, mask, tol=1e-12):
    m = mask.bool()
    torch.testing.assert_close(ours[m].to(DTYPE), theirs.expand_as(ours)[m].to(DTYPE), rtol=tol, atol=tol)


# ---------------------------------------------------------------------------- RolloutCorrection vs verl

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ours,level,threshold", [
    (RolloutCorrection(level="token", mode="truncate", c_max=2.0), "token", 2.0),      # decoupled_token_is
    (RolloutCorrection(level="sequence", mode="truncate", c_max=2.0), "sequence", 2.0),  # decoupled_seq_is
    (RolloutCorrection(level="sequence", mode="truncate", c_max=1e9), "sequence", 1e9),
    (RolloutCorrection(level="token", mode="mask", c_min=0.5, c_max=5.0), "token", "0.5_5.0"),  # IcePop
    (RolloutCorrection(level="sequence", mode="mask", c_min=0.5, c_max=2.0), "sequence", "0.5_2.0"),
])
def test_rollout_correction_matches_verl_is_weights(seed, ours, level, threshold):
    scale = 0.6 if level == "token" else 0.25
    batch = mismatch(seed, scale=scale)
    theirs, _ = verl.compute_rollout_correction_weights(
        batch.logp_old - batch.logp_behav, batch.mask, rollout_is=level, rollout_is_threshold=threshold)
    assert_on_valid(weight(ours, batch), theirs, batch.mask)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("level,option", [("token", "token_k1"), ("sequence", "seq_sum_k1")])
def test_rollout_mask_matches_verl_rejection_sampling_with_inverted_bounds(seed, level, option):
    """verl's MIS of the 0.9 line: IS weights × rollout_rs "k1" mask. Its "lo_hi" bounds μ/π_old
    (k1 = −log ρ), so "0.5_4.0" keeps ρ in [1/4, 2]; verl also drops the rejected tokens from the loss
    mask (our correction keeps them in the denominator; here only the per-token factor is compared)."""
    batch = mismatch(seed, scale=0.6 if level == "token" else 0.25)
    log_ratio = batch.logp_old - batch.logp_behav
    w, _ = verl.compute_rollout_correction_weights(log_ratio, batch.mask, rollout_is=level,
                                                   rollout_is_threshold=1e9)
    keep, _ = verl.compute_rollout_rejection_mask(log_ratio, batch.mask, rollout_rs=option,
                                                  rollout_rs_threshold="0.5_4.0")
    ours = RolloutCorrection(level=level, mode="mask", c_min=0.25, c_max=2.0)
    if level == "sequence":  # verl's RS sums the ±20-clamped token k1; keep rows 0, 1 off the guard
        batch = batch.select(slice(2, None))
        w, keep = w[2:], keep[2:]
    assert_on_valid(weight(ours, batch), w * keep, batch.mask)


# ---------------------------------------------------------------------------- RolloutCorrection vs TRL

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"])
@pytest.mark.parametrize("c_min,c_max", [(None, 3.0), (0.5, 3.0), (0.5, None)])
def test_rollout_correction_matches_trl_importance_sampling(seed, mode, c_min, c_max):
    """Within the ±20 log guard (TRL has none: beyond it a ratio reads e^±20 here, verl's convention,
    exercised by the verl tests above)."""
    level, kind = mode.split("_")
    batch = mismatch(seed, scale=0.6 if level == "token" else 0.25, extreme=False)
    me = trl.stand_in(use_vllm=True, vllm_importance_sampling_correction=True,
                      vllm_importance_sampling_mode=mode, vllm_importance_sampling_clip_min=c_min,
                      vllm_importance_sampling_clip_max=c_max)
    theirs = trl.importance_sampling_ratio(me, batch.logp_old, batch.logp_behav, batch.mask)
    ours = RolloutCorrection(level=level, mode=kind, c_min=c_min, c_max=c_max)
    assert_on_valid(weight(ours, batch), theirs, batch.mask)


def test_rollout_correction_defaults_and_the_unbounded_weight():
    """Without bounds "truncate" returns ρ itself (torch.clamp refuses min = max = None); the sequence
    weight sums the unclamped log-ratios, then clamps the sum at ±20 (verl)."""
    batch = mismatch(5)
    rho = weight(RolloutCorrection(c_min=None, c_max=None), batch)
    m = batch.mask.bool()
    torch.testing.assert_close(rho[m], torch.exp((batch.logp_old - batch.logp_behav).clamp(-20, 20))[m])
    seq = weight(RolloutCorrection(level="sequence", c_max=None), batch)
    d = torch.where(m, batch.logp_old - batch.logp_behav, 0.0).sum(-1)
    torch.testing.assert_close(seq[:, 0], d.clamp(-20, 20).exp())
    assert seq[0, 0] < 2e-5  # row 0: Σ ≈ −13, not −20 + 12 (a per-token clamp before the sum)


@pytest.mark.parametrize("kwargs,field", [
    ({"c_min": 2.0, "c_max": 2.0}, "RolloutCorrection.c_min"),
    ({"c_min": -0.1}, "RolloutCorrection.c_min"),
    ({"c_max": 0.0}, "RolloutCorrection.c_max"),
    ({"mode": "mask", "c_min": None, "c_max": None}, "RolloutCorrection.c_max"),
    ({"level": "batch"}, "RolloutCorrection.level"),
])
def test_rollout_correction_bad_fields(kwargs, field):
    with pytest.raises(ValueError, match=field):
        RolloutCorrection(**kwargs)


def test_behaviour_corrections_need_logp_behav():
    batch = mismatch(0).replace(logp_behav=None)
    for corr in (RolloutCorrection(), M2PO(), OffPolicySequenceMask()):
        with pytest.raises(ValueError, match="Rollouts.logp_behav"):
            weight(corr, batch)
    weight(OffPolicySequenceMask(against="old"), batch)  # slime's form needs none


# ---------------------------------------------------------------------------- OPSM vs TRL

def drifted(batch: Rollouts, seed: int, against: str) -> torch.Tensor:
    """logp with a per-row drift in [−1, 1] from μ, so mean(μ − logp) straddles the thresholds."""
    g = torch.Generator().manual_seed(100 + seed)
    mu = batch.logp_behav if against == "behaviour" else batch.logp_old
    B, T = batch.mask.shape
    shift = 2 * torch.rand(B, 1, generator=g, dtype=DTYPE) - 1
    return (mu - shift + 0.2 * torch.randn(B, T, generator=g, dtype=DTYPE)).requires_grad_(True)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("threshold", [0.5, 0.1, 0.0])
@pytest.mark.parametrize("against", ["behaviour", "old"])
def test_opsm_matches_trl_off_policy_mask(seed, threshold, against):
    batch = mismatch(seed, extreme=False)
    logp = drifted(batch, seed, against)
    g = torch.Generator().manual_seed(200 + seed)
    a = torch.randn(batch.size, generator=g, dtype=DTYPE)
    a[::4] = 0.0  # A = 0 is kept (TRL: A >= 0)
    adv = a[:, None] * batch.mask
    ours = weight(OffPolicySequenceMask(threshold=threshold, against=against), batch, logp, adv)
    sampling = batch.logp_behav if against == "behaviour" else batch.logp_old  # TRL's fallback: old
    theirs = trl.get_off_policy_mask(a[:, None], logp, sampling, batch.mask, threshold)
    assert_on_valid(ours, theirs, batch.mask, tol=0)
    assert 0 < (ours[batch.mask.bool()] == 0).double().mean() < 1 or threshold == 0.5


def test_opsm_token_advantages_by_hand():
    """The paper's Eq. 9 (and slime) test each token's advantage: with A = (+1, −1, 0) on a drifted
    completion (mean μ − log π = 1 > 0.5) only the negative token is dropped (TRL, with one advantage
    per sequence, cannot express this case)."""
    mask = torch.ones(1, 3, dtype=DTYPE)
    batch = Rollouts(rewards=torch.zeros(1, dtype=DTYPE), group=torch.zeros(1, dtype=torch.long), mask=mask,
                     logp_old=torch.zeros(1, 3, dtype=DTYPE), max_new_tokens=3,
                     logp_behav=torch.full((1, 3), -1.0, dtype=DTYPE))
    logp = torch.full((1, 3), -2.0, dtype=DTYPE)
    c = weight(OffPolicySequenceMask(0.5), batch, logp, torch.tensor([[1.0, -1.0, 0.0]], dtype=DTYPE))
    torch.testing.assert_close(c, torch.tensor([[1.0, 0.0, 1.0]], dtype=DTYPE))
    c = weight(OffPolicySequenceMask(1.0), batch, logp, torch.tensor([[1.0, -1.0, 0.0]], dtype=DTYPE))
    assert c.min() == 1  # drift 1 is not > 1


def test_opsm_bad_fields_and_needs():
    with pytest.raises(ValueError, match="OffPolicySequenceMask.threshold"):
        OffPolicySequenceMask(threshold=-0.1)
    with pytest.raises(ValueError, match="OffPolicySequenceMask.against"):
        OffPolicySequenceMask(against="sampler")
    assert OffPolicySequenceMask().uses_behaviour and not OffPolicySequenceMask(against="old").uses_behaviour


# ---------------------------------------------------------------------------- top-entropy mask vs TRL

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("share", [0.2, 0.5, 0.05, 1.0])
def test_top_entropy_mask_matches_trl(seed, share):
    batch = mismatch(seed, extreme=False)
    g = torch.Generator().manual_seed(300 + seed)
    # float32-representable entropies: TRL takes its quantile in float32, we in float64
    ent = (5 * torch.rand(batch.mask.shape, generator=g)).to(DTYPE)
    ours = weight(TopEntropyMask(share=share), batch, entropy=ent)
    theirs = trl.get_high_entropy_mask(trl.stand_in(), ent, batch.mask, 1 - share)
    assert_on_valid(ours, theirs, batch.mask, tol=0)
    kept = ours[batch.mask.bool()].mean()
    assert kept == 1 if share == 1 else abs(kept - share) < 0.1


def test_top_entropy_mask_bad_inputs():
    with pytest.raises(ValueError, match="TopEntropyMask.share"):
        TopEntropyMask(share=0.0)
    with pytest.raises(ValueError, match="entropy"):
        weight(TopEntropyMask(), mismatch(0))


# ---------------------------------------------------------------------------- M2PO vs AReaL

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scale,threshold", [(0.1, 0.04), (0.3, 0.04), (0.3, 0.01), (1.0, 0.2), (0.05, 0.04)])
def test_m2po_matches_areal(seed, scale, threshold):
    batch = mismatch(seed, scale=scale, extreme=False)
    ours = weight(M2PO(threshold=threshold), batch)
    theirs = areal._apply_m2po_masking(batch.logp_behav, batch.logp_old, batch.mask.bool(), threshold)
    assert_on_valid(ours, theirs, batch.mask, tol=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_m2po_matches_areal_beyond_the_log_guard_and_when_nothing_qualifies(seed):
    batch = mismatch(seed, scale=0.3)  # a token at |log ρ| = 25: d = 625, not clamped to 400
    behav = batch.logp_behav.clone()  # row 1's equal d = 9 would be ties, which AReaL orders arbitrarily
    behav[1] += 0.01 * torch.randn(behav.shape[1], generator=torch.Generator().manual_seed(seed), dtype=DTYPE)
    batch = batch.replace(logp_behav=behav)
    for threshold in (0.04, 1.0, 10.0):  # 10: only the unclamped 625 lifts the mean over the threshold
        ours = weight(M2PO(threshold=threshold), batch)
        theirs = areal._apply_m2po_masking(batch.logp_behav, batch.logp_old, batch.mask.bool(), threshold)
        assert_on_valid(ours, theirs, batch.mask, tol=0)
    far = batch.replace(logp_behav=batch.logp_old + 1.0 + torch.rand_like(batch.logp_old))  # every d ≥ 1
    ours = weight(M2PO(threshold=0.5), far)
    theirs = areal._apply_m2po_masking(far.logp_behav, far.logp_old, far.mask.bool(), 0.5)
    assert_on_valid(ours, theirs, far.mask, tol=0)
    assert ours[far.mask.bool()].sum() == 1  # AReaL keeps the one smallest, never an empty loss


def test_m2po_strict_stop_and_ties_by_hand():
    """d = (1, 1/4, 1/4): suffix means (1/2, 1/4, 1/4). Threshold 1/4: no mean is < 1/4, so all but the
    smallest go, the tie broken in token order (keep the last). Threshold 0.3: mask the first only."""
    mask = torch.ones(1, 3, dtype=DTYPE)
    batch = Rollouts(rewards=torch.zeros(1, dtype=DTYPE), group=torch.zeros(1, dtype=torch.long), mask=mask,
                     logp_old=torch.zeros(1, 3, dtype=DTYPE), max_new_tokens=3,
                     logp_behav=torch.tensor([[1.0, -0.5, 0.5]], dtype=DTYPE))
    torch.testing.assert_close(weight(M2PO(0.25), batch), torch.tensor([[0.0, 0.0, 1.0]], dtype=DTYPE))
    torch.testing.assert_close(weight(M2PO(0.3), batch), torch.tensor([[0.0, 1.0, 1.0]], dtype=DTYPE))
    torch.testing.assert_close(weight(M2PO(0.51), batch), torch.ones(1, 3, dtype=DTYPE))
    empty = batch.replace(mask=torch.zeros(1, 3, dtype=DTYPE))
    torch.testing.assert_close(weight(M2PO(0.25), empty), torch.ones(1, 3, dtype=DTYPE))
    with pytest.raises(ValueError, match="M2PO.threshold"):
        M2PO(threshold=0.0)


# ---------------------------------------------------------------------------- a whole loss vs TRL

@pytest.mark.parametrize("seed", SEEDS)
def test_recipe_loss_with_corrections_matches_trl_composition(seed):
    """TRL's _compute_loss with loss_type "bnpo" (token mean over the local batch), ε = 0.2,
    vllm_importance_sampling_mode "sequence_mask" (c_max 3), off_policy_mask_threshold 0.5 and
    top_entropy_quantile 0.2: per_token_loss × off_policy_mask × entropy_mask × IS ratio. The loss and
    its gradient w.r.t. log π equal recipe.loss with the three corrections."""
    batch = mismatch(seed, scale=0.25, extreme=False)
    logp = drifted(batch, seed, "behaviour")
    g = torch.Generator().manual_seed(400 + seed)
    a = torch.randn(batch.size, generator=g, dtype=DTYPE)
    ent = (5 * torch.rand(batch.mask.shape, generator=g)).to(DTYPE)
    recipe = Recipe(advantage=GroupNorm(), objective=PPOClip(0.2, 0.2), aggregation=Aggregation("token_mean"),
                    corrections=(RolloutCorrection(level="sequence", mode="mask", c_max=3.0),
                                 OffPolicySequenceMask(threshold=0.5), TopEntropyMask(share=0.2)))
    ours, _ = recipe.loss(logp, batch, a[:, None] * batch.mask, entropy=ent)

    mask = batch.mask
    advantages = a[:, None]
    is_ratio = trl.importance_sampling_ratio(
        trl.stand_in(use_vllm=True, vllm_importance_sampling_correction=True,
                     vllm_importance_sampling_mode="sequence_mask", vllm_importance_sampling_clip_min=None,
                     vllm_importance_sampling_clip_max=3.0), batch.logp_old, batch.logp_behav, mask)
    off_policy_mask = trl.get_off_policy_mask(advantages, logp, batch.logp_behav, mask, 0.5)
    entropy_mask = trl.get_high_entropy_mask(trl.stand_in(), ent, mask, 1 - 0.2)
    coef_1 = torch.exp(logp - batch.logp_old)
    coef_2 = torch.clamp(coef_1, 1 - 0.2, 1 + 0.2)
    per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages)
    per_token_loss = per_token_loss * off_policy_mask * entropy_mask * is_ratio
    theirs = (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)

    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-14)
    g_ours, = torch.autograd.grad(ours, logp)
    g_theirs, = torch.autograd.grad(theirs, logp)
    torch.testing.assert_close(g_ours, g_theirs, rtol=1e-12, atol=1e-14)
    assert g_ours.abs().sum() > 0


def test_changed_frac_counts_tokens_whose_factor_leaves_1_by_more_than_1_percent():
    """correction/changed_frac: |c − 1| > 0.01 over valid tokens, masked (c = 0) tokens included: what
    a claim's engagement gate reads. A 1e-4-nat mismatch (TIS's weight 1.0001) changes nothing."""
    from algorithms.corrections import correction_stats

    c = torch.tensor([[1.0, 1.0001, 0.995, 1.02], [0.0, 2.0, 1.0, 1.0]], dtype=DTYPE)
    m = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]).bool()
    st = correction_stats(c, m)
    assert float(st["correction/changed_frac"]) == pytest.approx(3 / 7)  # 1.02, 0 and 2 of 7 valid tokens
    assert float(st["correction/masked_frac"]) == pytest.approx(1 / 7)
