"""Recipes to and from TRL, proved by TRL's own loss: `GRPOTrainer._compute_loss` (TRL installed, the
`interop` extra; `make test-interop`) on a stub trainer whose model returns fixed log-probs, as TRL's
tests stub the model. Both directions: every TRL `loss_type` (and GSPO's sequence level, the corrections
`_compute_loss` applies) imported by `from_trl` and run through `Recipe.loss`; every registered recipe
that `to_trl` exports built into a real `GRPOConfig` and run through TRL's loss; the rest name a part.

Inputs are float64, ragged (a length-1 row, a full row, an empty row), advantages of both signs, ratios
inside and outside the clip ranges. Both sides sum at most B·T = 56 terms of size ≤ ~20 in float64
(u = 2⁻⁵³): their difference is ≤ 56·2⁻⁵³·20 ≈ 1e-13, so the issue's 1e-6 holds with room on any CPU,
and a wrong mapping (another aggregation, cap or temperature) moves the loss by 1e-2..1.
"""
import math
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

trl = pytest.importorskip("trl", reason="TRL is in the interop extra: make test-interop")
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

import algorithms  # noqa: E402
from algorithms import Rollouts  # noqa: E402
from algorithms.errors import InputError  # noqa: E402
from bench.interop.trl import from_trl, to_trl  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1] / "algorithms"))
from reference import trl_corrections  # noqa: E402  TRL's verbatim vLLM IS ratio (inline in another method)

F64 = torch.float64
B, T = 8, 7
ATOL = 1e-6  # the acceptance bound; float64 rounding is ~1e-13 here (module docstring)


def inputs(seed: int, scale: float = 0.4):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0], lengths[1], lengths[2] = 1, T, 0
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(F64)
    logp_old = -torch.rand(B, T, generator=g, dtype=F64) * 3
    logp = (logp_old + scale * torch.randn(B, T, generator=g, dtype=F64)).clamp(max=-1e-3)
    adv = torch.randn(B, generator=g, dtype=F64)
    adv[3] = 0.0
    ref = logp_old + 0.2 * torch.randn(B, T, generator=g, dtype=F64)
    behav = logp_old + 0.3 * torch.randn(B, T, generator=g, dtype=F64)
    entropy = torch.rand(B, T, generator=g, dtype=F64) * 2
    return SimpleNamespace(mask=mask, logp_old=logp_old, logp=logp, adv=adv, ref=ref, behav=behav, entropy=entropy)


class Accelerator:
    """One process: every collective returns its input."""

    num_processes = 1
    sync_gradients = True

    def gather(self, t):
        return t

    gather_for_metrics = gather

    def reduce(self, t, reduction="sum"):
        return t

    def pad_across_processes(self, t, dim=0, pad_index=0):
        return t


def config(fields: dict, tmp_path) -> GRPOConfig:
    return GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none", **fields)


def trl_loss(args: GRPOConfig, x) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """TRL's `_compute_loss` on a trainer whose attributes GRPOTrainer.__init__ sets from `args` (the lines
    it runs for them, copied), with a model stub returning x.logp and x.entropy; (loss, dlogp, dentropy)."""
    me = GRPOTrainer.__new__(GRPOTrainer)
    attrs = dict(
        args=args, loss_type=args.loss_type, importance_sampling_level=args.importance_sampling_level,
        epsilon_low=args.epsilon, epsilon_high=args.epsilon_high if args.epsilon_high is not None else args.epsilon,
        beta=args.beta, top_entropy_quantile=args.top_entropy_quantile, off_policy_mask_threshold=args.off_policy_mask_threshold,
        use_vllm=args.use_vllm, vllm_importance_sampling_correction=args.vllm_importance_sampling_correction,
        vllm_importance_sampling_mode=args.vllm_importance_sampling_mode,
        vllm_importance_sampling_clip_max=args.vllm_importance_sampling_clip_max,
        vllm_importance_sampling_clip_min=args.vllm_importance_sampling_clip_min,
        max_completion_length=args.max_completion_length, entropy_coef=args.entropy_coef,
        use_adaptive_entropy=args.use_adaptive_entropy,
        _entropy_bonus_enabled=args.entropy_coef != 0.0 or args.use_adaptive_entropy,
        _last_world_entropy=float("inf"), _entropy_window_stats=None, aux_loss_enabled=False, router_aux_loss_coef=0.0,
        current_gradient_accumulation_steps=args.gradient_accumulation_steps, accelerator=Accelerator(),
        model=SimpleNamespace(training=True), _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
    )
    for k, v in attrs.items():
        object.__setattr__(me, k, v)
    logp = x.logp.clone().requires_grad_(True)
    ent = x.entropy.clone().requires_grad_(True)
    object.__setattr__(me, "_get_per_token_logps_and_entropies", lambda *a, **k: (logp, ent, None))
    batch = {"prompt_ids": torch.zeros(B, 1, dtype=torch.long), "prompt_mask": torch.ones(B, 1, dtype=torch.long),
             "completion_ids": torch.zeros(B, T, dtype=torch.long), "completion_mask": x.mask,
             "advantages": x.adv, "old_per_token_logps": x.logp_old, "ref_per_token_logps": x.ref,
             "sampling_per_token_logps": x.behav, "num_items_in_batch": x.mask.sum()}
    if args.use_vllm and args.vllm_importance_sampling_correction:
        me_is = trl_corrections.stand_in(**{k: attrs[k] for k in attrs if k.startswith(("use_vllm", "vllm_"))})
        batch["importance_sampling_ratio"] = trl_corrections.importance_sampling_ratio(me_is, x.logp_old, x.behav, x.mask)
    loss = GRPOTrainer._compute_loss(me, None, batch)
    dlogp, dent = torch.autograd.grad(loss, (logp, ent), allow_unused=True)
    return loss.detach(), dlogp, torch.zeros_like(ent) if dent is None else dent


def our_loss(recipe: algorithms.Recipe, x) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    batch = Rollouts(rewards=torch.zeros(B, dtype=F64), group=torch.arange(B) // 4, mask=x.mask, logp_old=x.logp_old,
                     logp_ref=x.ref, logp_behav=x.behav, max_new_tokens=T)
    logp = x.logp.clone().requires_grad_(True)
    ent = x.entropy.clone().requires_grad_(True)
    coef = recipe.entropy_control.applied(recipe.entropy_control.state()) if recipe.entropy_control else None
    loss, _ = recipe.loss(logp, batch, x.adv[:, None] * x.mask, entropy=ent, entropy_coef=coef)
    dlogp, dent = torch.autograd.grad(loss, (logp, ent), allow_unused=True)
    return loss.detach(), dlogp, torch.zeros_like(ent) if dent is None else dent


def assert_same(ours, theirs, mask):
    (l1, g1, e1), (l2, g2, e2) = ours, theirs
    assert math.isfinite(l2.item())
    assert l1.item() == pytest.approx(l2.item(), abs=ATOL)
    m = mask.bool()
    torch.testing.assert_close(torch.where(m, g1, 0.0), torch.where(m, g2, 0.0), atol=ATOL, rtol=0)
    torch.testing.assert_close(torch.where(m, e1, 0.0), torch.where(m, e2, 0.0), atol=ATOL, rtol=0)


# TRL's documented settings for each loss type (GRPOConfig docstring, paper_index), at TRL's defaults otherwise
IMPORTS = {
    "grpo": {"loss_type": "grpo", "beta": 0.04},
    "grpo_biased_kl": {"loss_type": "grpo", "beta": 0.04, "use_bias_correction_kl": False},
    "dr_grpo": {"loss_type": "dr_grpo", "scale_rewards": False, "max_completion_length": T},
    "dapo": {"loss_type": "dapo", "epsilon_high": 0.28, "mask_truncated_completions": True},
    "bnpo": {"loss_type": "bnpo"},
    "cispo": {"loss_type": "cispo", "epsilon_high": 5.0},
    "cispo_default_cap": {"loss_type": "cispo"},  # epsilon_high = epsilon = 0.2: every weight capped at 0.2
    "sapo": {"loss_type": "sapo"},
    "luspo": {"loss_type": "luspo", "importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4},
    "vespo": {"loss_type": "vespo"},
    "vespo_vllm": {"loss_type": "vespo", "use_vllm": True, "vllm_importance_sampling_mode": "token_truncate",
                   "vllm_importance_sampling_clip_max": 1e30},  # a cap that never binds: ours folds μ in untruncated
    "gspo": {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4},
    "gspo_dapo": {"loss_type": "dapo", "importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4},
    "delta": {"loss_type": "dapo", "delta": 1.5},
    "top_entropy": {"loss_type": "dapo", "top_entropy_quantile": 0.2},
    "opsm": {"loss_type": "grpo", "off_policy_mask_threshold": 0.05},
    "entropy_bonus": {"loss_type": "dapo", "entropy_coef": 0.01},
    "vllm_is_seq_mask": {"loss_type": "grpo", "use_vllm": True},  # TRL's default correction: sequence mask, cap 3
    "vllm_is_token_truncate": {"loss_type": "dapo", "use_vllm": True, "vllm_importance_sampling_mode": "token_truncate",
                               "vllm_importance_sampling_clip_max": 1.2},
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", list(IMPORTS))
def test_import_matches_trl_compute_loss(name, seed, tmp_path):
    fields = IMPORTS[name]
    small = fields.get("importance_sampling_level") == "sequence"  # GSPO's ε ~ 1e-4: some sequences inside the clip
    x = inputs(seed, scale=3e-4 if small else 0.4)
    tr = from_trl(fields, name)
    assert not tr.unmodelled
    assert_same(our_loss(tr.recipe, x), trl_loss(config(fields, tmp_path), x), x.mask)


def test_import_is_not_vacuous(tmp_path):
    """The comparison can fail: another loss_type's aggregation, or TRL's CISPO cap read as verl's, differ."""
    x = inputs(0)
    theirs = trl_loss(config(IMPORTS["grpo"], tmp_path), x)
    dapo = from_trl({**IMPORTS["grpo"], "loss_type": "dapo"}, "t").recipe
    assert abs(our_loss(dapo, x)[0] - theirs[0]) > 1e-3
    cispo = trl_loss(config(IMPORTS["cispo_default_cap"], tmp_path), x)
    verl_style = from_trl(IMPORTS["cispo"], "t").recipe.replace(objective=algorithms.CISPO(ratio_max=1.2, ratio_min=0.8))
    assert abs(our_loss(verl_style, x)[0] - cispo[0]) > 1e-3


def exportable():
    out, refused = [], {}
    for name in algorithms.names():
        try:
            out.append((name, to_trl(algorithms.get(name), max_completion_length=T)))
        except InputError as e:
            refused[name] = str(e)
    return out, refused


@pytest.mark.parametrize("seed", [0, 1])
def test_every_exportable_recipe_matches_trl_compute_loss(seed, tmp_path):
    done, refused = exportable()
    # the recipes whose parts GRPOConfig has: these must export (a regression that refuses them fails here)
    assert {"grpo", "dr_grpo", "gspo", "cispo", "sapo", "luspo", "vespo", "opsm", "grpo_tis"} <= {n for n, _ in done}
    for name, (fields, _notes) in done:
        recipe = algorithms.get(name)
        small = isinstance(recipe.objective, algorithms.GSPO)
        x = inputs(seed, scale=3e-4 if small else 0.4)
        assert_same(our_loss(recipe, x), trl_loss(config(fields, tmp_path), x), x.mask), name
    for name, msg in refused.items():  # one line naming the recipe and the part
        assert msg.startswith(f"recipe {name}: ") and "cannot express" in msg and "\n" not in msg


def test_topr_and_dynamic_sampling_name_their_part():
    _, refused = exportable()
    assert "objective = topr" in refused["topr"]
    assert "filter = dynamic_sampling" in refused["dapo"]
    assert "critic" in refused["ppo"] or "advantage" in refused["ppo"]


def test_export_then_import_is_the_same_loss():
    for name, (fields, _) in exportable()[0]:
        back = from_trl(fields, name).recipe
        ours = algorithms.get(name)
        assert back.replace(advantage=ours.advantage, name=ours.name) == ours, name
