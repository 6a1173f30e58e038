"""TRL's GRPOConfig (TRL 1.16) to a recipe and back.

TRL fuses the objective and the aggregation in one `loss_type` (STYLE.md); here they are two parts:

| loss_type | objective (importance_sampling_level token / sequence) | aggregation |
|---|---|---|
| grpo    | ppo_clip(epsilon, epsilon_high, delta) / gspo(epsilon, epsilon_high) | seq_mean_token_mean |
| bnpo    | as grpo                                      | token_mean (one process: TRL's local batch) |
| dapo    | as grpo                                      | token_mean |
| dr_grpo | as grpo                                      | seq_mean_token_sum_norm, L_max = max_completion_length |
| luspo   | as grpo                                      | seq_mean_token_sum |
| cispo   | cispo(ratio_max = epsilon_high: an absolute cap, no lower bound) | token_mean |
| sapo    | sapo(sapo_temperature_pos, sapo_temperature_neg) | seq_mean_token_mean |
| vespo   | vespo(vespo_k_*, vespo_lambda_*; behaviour = use_vllm) | token_mean |

Advantages: group_norm with eps 1e-4 (TRL's constant), scale_rewards group/batch/none -> scale
std/batch/none. KL: beta > 0 -> k3 in the loss, importance = use_bias_correction_kl (TRL's default
True). num_iterations × steps_per_generation / gradient_accumulation_steps -> Updates(epochs,
minibatches). mask_truncated_completions -> mask_truncated; top_entropy_quantile < 1 ->
top_entropy_mask(share); off_policy_mask_threshold -> opsm(against behaviour); with use_vllm,
vllm_importance_sampling_correction -> rollout_correction(level, mode, c_min, c_max) (TRL applies
it only with vLLM); entropy_coef -> entropy_coef; use_adaptive_entropy -> adaptive_entropy.
The tests (tests/interop/test_trl.py) run TRL's own `GRPOTrainer._compute_loss` on both sides.
"""
from __future__ import annotations

from typing import Any

import algorithms
from algorithms import (CISPO, GSPO, KL, SAPO, VESPO, AdaptiveEntropy, Aggregation, GroupNorm, MaskTruncated,
                        OffPolicySequenceMask, PPOClip, RolloutCorrection, TopEntropyMask, Updates)
from algorithms.errors import InputError

from . import Translation, build, choice, expect

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo", "cispo", "sapo", "vespo")
AGGREGATION = {"grpo": "seq_mean_token_mean", "sapo": "seq_mean_token_mean", "bnpo": "token_mean",
               "dapo": "token_mean", "cispo": "token_mean", "vespo": "token_mean",
               "dr_grpo": "seq_mean_token_sum_norm", "luspo": "seq_mean_token_sum"}
CLIPPED = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")
TRL_STD_EPS = 1e-4  # trl/trainer/grpo_trainer.py: advantages / (std_rewards + 1e-4)
IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")

# GRPOConfig 1.16's defaults for every field read here (TrainingArguments' for the inherited ones)
DEFAULTS: dict[str, Any] = {
    "loss_type": "dapo", "importance_sampling_level": "token", "epsilon": 0.2, "epsilon_high": None,
    "delta": None, "beta": 0.0, "use_bias_correction_kl": True, "scale_rewards": "group",
    "num_iterations": 1, "steps_per_generation": None, "generation_batch_size": None,
    "gradient_accumulation_steps": 1, "per_device_train_batch_size": 8, "num_generations": 8,
    "max_completion_length": 512, "mask_truncated_completions": False, "top_entropy_quantile": 1.0,
    "off_policy_mask_threshold": None, "use_vllm": False, "vllm_importance_sampling_correction": True,
    "vllm_importance_sampling_mode": "sequence_mask", "vllm_importance_sampling_clip_max": 3.0,
    "vllm_importance_sampling_clip_min": None, "sapo_temperature_pos": 1.0, "sapo_temperature_neg": 1.05,
    "vespo_k_pos": 2.0, "vespo_lambda_pos": 3.0, "vespo_k_neg": 3.0, "vespo_lambda_neg": 2.0,
    "entropy_coef": 0.0, "use_adaptive_entropy": False, "entropy_coef_min": 0.0, "entropy_coef_max": 1.0,
    "entropy_coef_delta": 0.005, "entropy_target": 0.2, "multi_objective_aggregation": "sum_then_normalize",
}

# fields that set a run setting of ours (bench run --set PATH=VALUE)
SETTINGS = {"num_generations": "train.group_size", "max_completion_length": "train.max_new_tokens",
            "temperature": "train.temperature", "top_p": "train.top_p", "learning_rate": "train.lr",
            "weight_decay": "train.weight_decay", "adam_beta1": "train.adam_beta1", "adam_beta2": "train.adam_beta2",
            "adam_epsilon": "train.adam_eps", "max_grad_norm": "train.grad_clip", "warmup_steps": "train.warmup_steps",
            "lr_scheduler_type": "train.schedule", "seed": "seed"}

# fields that change only throughput, memory or bookkeeping: listed as ignored
IGNORED = {
    "output_dir", "overwrite_output_dir", "logging_dir", "logging_steps", "logging_strategy", "logging_first_step",
    "save_steps", "save_strategy", "save_total_limit", "save_only_model", "report_to", "run_name", "project",
    "push_to_hub", "hub_model_id", "hub_strategy", "hub_token", "hub_private_repo", "log_completions",
    "num_completions_to_print", "log_unique_prompts", "log_completions_hub_repo", "log_multimodal",
    "log_level", "disable_tqdm", "bf16", "fp16", "tf32", "bf16_full_eval", "fp16_full_eval", "use_cpu",
    "gradient_checkpointing", "gradient_checkpointing_kwargs", "torch_compile", "torch_compile_backend",
    "dataloader_num_workers", "dataloader_pin_memory", "dataloader_drop_last", "dataloader_persistent_workers",
    "dataloader_prefetch_factor", "ddp_find_unused_parameters", "ddp_backend", "ddp_timeout", "deepspeed",
    "fsdp", "fsdp_config", "ds3_gather_for_generation", "vllm_mode", "vllm_gpu_memory_utilization",
    "vllm_tensor_parallel_size", "vllm_server_base_url", "vllm_server_host", "vllm_server_port",
    "vllm_server_timeout", "vllm_group_port", "vllm_enable_sleep_mode", "vllm_model_impl",
    "vllm_max_model_length", "cache_implementation", "use_transformers_paged", "pad_to_multiple_of",
    "use_transformers_continuous_batching", "transformers_continuous_batching_config", "shuffle_dataset",
    "per_device_eval_batch_size", "eval_strategy", "eval_steps", "do_eval", "do_train", "remove_unused_columns",
    "model_init_kwargs", "trust_remote_code", "max_steps", "num_train_epochs", "cast_lm_head_to_fp32",
}


def from_trl(fields: dict[str, Any], source: str) -> Translation:
    """A GRPOConfig's fields (missing ones at TRL 1.16's defaults) as a recipe and run settings."""
    c = {**DEFAULTS, **fields}
    given = set(fields)
    tr = Translation(recipe=None, source=source)  # type: ignore[arg-type]
    read: set[str] = set()

    def get(key: str) -> Any:
        read.add(key)
        return c[key]

    def num(key: str, *, integer: bool = False, optional: bool = False) -> Any:
        v = get(key)
        if v is None and optional:
            return None
        kinds = (int,) if integer else (int, float)
        return expect(source, key, v, kinds, "an integer" if integer else "a number" + (" or null" if optional else ""))

    def flag(key: str) -> bool:
        return expect(source, key, get(key), bool, "true or false")

    def note_mapped(key: str, to: str) -> None:
        if key in given:
            tr.mapped.append(f"{key} = {c[key]!r} -> {to}")

    loss_type = choice(source, "loss_type", get("loss_type"), LOSS_TYPES)
    level = choice(source, "importance_sampling_level", get("importance_sampling_level"), ("token", "sequence"))
    eps_low = num("epsilon")
    eps_high = num("epsilon_high", optional=True)
    eps_high = eps_low if eps_high is None else eps_high
    delta = num("delta", optional=True)
    use_vllm = flag("use_vllm")

    if level == "sequence" and loss_type not in CLIPPED:
        raise InputError(f"{source}: importance_sampling_level: 'sequence' with loss_type {loss_type!r} is not "
                         f"modelled; the sequence ratio is modelled for loss_type {', '.join(CLIPPED)}")
    if loss_type == "cispo":
        objective = CISPO(ratio_max=eps_high)
        to = f"cispo(ratio_max={eps_high!r}): TRL's cap is absolute (epsilon_high), no lower bound"
    elif loss_type == "sapo":
        objective = SAPO(tau_pos=num("sapo_temperature_pos"), tau_neg=num("sapo_temperature_neg"))
        to = "sapo"
    elif loss_type == "vespo":
        objective = VESPO(k_pos=num("vespo_k_pos"), lambda_pos=num("vespo_lambda_pos"),
                          k_neg=num("vespo_k_neg"), lambda_neg=num("vespo_lambda_neg"),
                          behaviour=use_vllm and flag("vllm_importance_sampling_correction"))
        to = "vespo" + (" (behaviour=True: the sampler's ratio folded in, untruncated)" if objective.behaviour else "")
        if objective.behaviour:
            tr.notes.append("vespo with vLLM: TRL truncates or masks its token ratio at vllm_importance_sampling_clip_"
                            "max before folding it in; ours folds it in untruncated (equal below the cap)")
    elif level == "sequence":
        if delta is not None:
            raise InputError(f"{source}: delta: {delta!r} with importance_sampling_level 'sequence' is not modelled "
                             "(gspo has no delta); valid: null")
        objective = GSPO(eps_low=eps_low, eps_high=eps_high)
        to = f"gspo({eps_low!r}, {eps_high!r})"
    else:
        objective = PPOClip(eps_low=eps_low, eps_high=eps_high, delta=delta) if delta is None or delta > 1 + eps_high \
            else None
        if objective is None:
            raise InputError(f"{source}: delta: {delta!r}: must be > 1 + epsilon_high ({1 + eps_high!r}) or null")
        to = objective.short()
    for k in ("loss_type", "importance_sampling_level", "epsilon", "epsilon_high", "delta"):
        note_mapped(k, f"objective {to}, aggregation {AGGREGATION[loss_type]}")
    for k in ("sapo_temperature_pos", "sapo_temperature_neg", "vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg",
              "vespo_lambda_neg"):
        if k in given and not k.startswith(loss_type):
            tr.ignored.append(f"{k}: read only with loss_type {k.split('_')[0]!r}")
        elif k in given:
            note_mapped(k, f"objective {to}")
    aggregation = Aggregation(AGGREGATION[loss_type])
    max_len = num("max_completion_length", integer=True)
    if loss_type == "dr_grpo":
        tr.notes.append(f"dr_grpo divides by max_completion_length = {max_len}: our L_max is train.max_new_tokens, "
                        "set below")

    scale = get("scale_rewards")
    scale = {True: "group", False: "none"}.get(scale, scale)
    scale = choice(source, "scale_rewards", scale, ("group", "batch", "none"))
    advantage = GroupNorm(scale={"group": "std", "batch": "batch", "none": "none"}[scale], eps=TRL_STD_EPS)
    note_mapped("scale_rewards", f"advantage {advantage.short()}")
    if get("multi_objective_aggregation") != "sum_then_normalize":
        tr.unmodelled.append(f"multi_objective_aggregation = {c['multi_objective_aggregation']!r}: "
                             "our rewards are summed, then normalised (TRL's sum_then_normalize)")

    beta = num("beta")
    if beta < 0:
        raise InputError(f"{source}: beta: {beta!r}: must be >= 0")
    importance = flag("use_bias_correction_kl")
    kl = KL(coef=float(beta), estimator="k3", placement="loss", importance=importance and beta > 0)
    note_mapped("beta", f"kl {kl.short()}")
    note_mapped("use_bias_correction_kl", f"kl {kl.short()}" if beta > 0 else "nothing (beta = 0)")
    if beta > 0 and importance and level == "sequence":
        tr.notes.append("use_bias_correction_kl with sequence-level ratios: TRL weights the KL by the sequence "
                        "ratio, ours by the token ratio (algorithms/kl.py)")

    epochs = num("num_iterations", integer=True)
    ga = num("gradient_accumulation_steps", integer=True)
    spg = num("steps_per_generation", integer=True, optional=True)
    gbs = num("generation_batch_size", integer=True, optional=True)
    bs = num("per_device_train_batch_size", integer=True)
    if spg is not None and gbs is not None:
        raise InputError(f"{source}: steps_per_generation: set with generation_batch_size too; TRL accepts one of them")
    if spg is None:
        spg = gbs // bs if gbs is not None else ga
    if spg % ga:
        raise InputError(f"{source}: steps_per_generation: {spg} is not a multiple of gradient_accumulation_steps "
                         f"({ga}): optimizer steps would straddle generation batches")
    updates = Updates(epochs=epochs, minibatches=spg // ga)
    for k in ("num_iterations", "steps_per_generation", "generation_batch_size"):
        note_mapped(k, f"updates {updates.short()}")
    if "gradient_accumulation_steps" in given or "per_device_train_batch_size" in given:
        tr.ignored.append("gradient_accumulation_steps, per_device_train_batch_size: micro-batching "
                          f"(they set the optimizer step's rows, {bs * ga}, and the minibatch count above)")
    if loss_type in ("dapo", "cispo", "vespo") and updates.minibatches > 1:
        tr.notes.append(f"{loss_type} normalises by the generation batch's tokens / steps_per_generation; ours by "
                        "each optimizer step's tokens (equal in expectation)")
    group_size = num("num_generations", integer=True)
    settings = {"train.group_size": group_size, "train.max_new_tokens": max_len,
                "train.prompts_per_step": max(1, bs * spg // max(group_size, 1))}

    shaping = (algorithms.MaskTruncated(),) if flag("mask_truncated_completions") else ()
    note_mapped("mask_truncated_completions", "shaping mask_truncated" if shaping else "nothing")
    corrections = []
    q = num("top_entropy_quantile")
    if q < 1:
        corrections.append(TopEntropyMask(share=float(q)))
    note_mapped("top_entropy_quantile", f"top_entropy_mask(share={q!r})" if q < 1 else "nothing (1.0 keeps all)")
    opsm = num("off_policy_mask_threshold", optional=True)
    if opsm is not None:
        corrections.append(OffPolicySequenceMask(threshold=float(opsm), against="behaviour"))
    note_mapped("off_policy_mask_threshold", "opsm(against='behaviour')")
    is_keys = ("vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
               "vllm_importance_sampling_clip_max", "vllm_importance_sampling_clip_min")
    correct = flag(is_keys[0])
    mode = choice(source, is_keys[1], get(is_keys[1]), IS_MODES)
    c_max, c_min = num(is_keys[2], optional=True), num(is_keys[3], optional=True)
    if use_vllm and correct and loss_type != "vespo":
        lvl, _, how = mode.partition("_")
        rc = RolloutCorrection(level=lvl, mode=how, c_min=c_min, c_max=c_max)
        corrections.append(rc)
        for k in is_keys:
            note_mapped(k, rc.short())
    else:
        why = "use_vllm is false" if not use_vllm else "vespo folds the ratio into its weight" if correct else "off"
        tr.ignored.extend(f"{k}: not applied ({why})" for k in is_keys if k in given)
    note_mapped("use_vllm", "rollout=vllm (bench run --rollout vllm)" if use_vllm else "the native sampler")
    if use_vllm:
        settings["rollout"] = "vllm"

    entropy_coef, control = 0.0, None
    if flag("use_adaptive_entropy"):
        control = AdaptiveEntropy(target=num("entropy_target"), delta=num("entropy_coef_delta"),
                                  init=num("entropy_coef"), low=num("entropy_coef_min"), high=num("entropy_coef_max"))
        for k in ("use_adaptive_entropy", "entropy_coef", "entropy_coef_min", "entropy_coef_max",
                  "entropy_coef_delta", "entropy_target"):
            note_mapped(k, control.short())
    else:
        entropy_coef = float(num("entropy_coef"))
        note_mapped("entropy_coef", f"entropy_coef {entropy_coef!r}")
        tr.ignored.extend(f"{k}: read only with use_adaptive_entropy" for k in
                          ("entropy_coef_min", "entropy_coef_max", "entropy_coef_delta", "entropy_target") if k in given)
    if (entropy_coef > 0 or control is not None) and aggregation.mode != "token_mean":
        tr.notes.append("TRL's entropy bonus is a plain token mean; ours is aggregated like the loss "
                        f"({aggregation.mode})")

    tr.recipe = build(source, name="from_trl", advantage=advantage, objective=objective, aggregation=aggregation,
                      kl=kl, shaping=shaping, updates=updates, entropy_coef=entropy_coef,
                      corrections=tuple(corrections), entropy_control=control)
    for k in sorted(given - read):
        v = fields[k]
        if k == "lr_scheduler_type" and v not in ("constant", "cosine"):
            tr.unmodelled.append(f"lr_scheduler_type = {v!r}: our schedules are constant and cosine")
        elif k in SETTINGS:
            settings[SETTINGS[k]] = v
            tr.mapped.append(f"{k} = {v!r} -> {SETTINGS[k]}")
        elif k in IGNORED:
            tr.ignored.append(f"{k}: throughput or bookkeeping only")
        elif k not in DEFAULTS:
            tr.unmodelled.append(f"{k} = {v!r}: no part or setting of ours expresses it")
    tr.settings = settings
    return tr


def unexpressible(recipe: algorithms.Recipe, path: str, value: Any, why: str) -> InputError:
    return InputError(f"recipe {recipe.name}: {path} = {value}: TRL's GRPOTrainer cannot express it ({why})")


def to_trl(recipe: algorithms.Recipe, max_completion_length: int | None = None) -> tuple[dict[str, Any], list[str]]:
    """GRPOConfig fields that reproduce the recipe's loss in TRL, and notes on what else to set;
    InputError naming the first part TRL cannot express."""
    out: dict[str, Any] = {}
    notes: list[str] = []
    no = lambda path, value, why: unexpressible(recipe, path, value, why)  # noqa: E731
    if recipe.critic is not None:
        raise no("critic", recipe.critic.short(), "no value model")
    agg = recipe.aggregation.mode
    obj = recipe.objective
    if isinstance(obj, (PPOClip, GSPO)):
        caps = [c for c in (getattr(obj, "dual_clip", None), getattr(obj, "delta", None)) if c is not None]
        if caps:  # dual_clip and delta cap the same loss (−cA for A < 0; objectives.py): the smaller binds
            if min(caps) <= 1 + obj.eps_high:
                raise no("objective.dual_clip", min(caps), "its delta must exceed 1 + epsilon_high")
            out["delta"] = min(caps)
        out["importance_sampling_level"] = "sequence" if isinstance(obj, GSPO) else "token"
        loss_type = {"seq_mean_token_mean": "grpo", "token_mean": "dapo", "seq_mean_token_sum_norm": "dr_grpo",
                     "seq_mean_token_sum": "luspo"}.get(agg)
        if loss_type is None:
            raise no("aggregation", recipe.aggregation.short(), "loss_type grpo, dapo, dr_grpo and luspo aggregate "
                     "as seq_mean_token_mean, token_mean, seq_mean_token_sum_norm and seq_mean_token_sum")
        out.update(loss_type=loss_type, epsilon=obj.eps_low, epsilon_high=obj.eps_high)
        if loss_type == "dr_grpo":
            if max_completion_length is None:
                notes.append("dr_grpo divides by max_completion_length: set it to the run's max_new_tokens")
            else:
                out["max_completion_length"] = max_completion_length
    elif isinstance(obj, CISPO):
        if obj.ratio_min is not None:
            raise no("objective.ratio_min", obj.ratio_min, "TRL's cispo caps the weight above only")
        if agg != "token_mean":
            raise no("aggregation", recipe.aggregation.short(), "TRL's cispo aggregates as token_mean")
        out.update(loss_type="cispo", epsilon_high=obj.ratio_max, importance_sampling_level="token")
    elif isinstance(obj, SAPO):
        if agg != "seq_mean_token_mean":
            raise no("aggregation", recipe.aggregation.short(), "TRL's sapo aggregates as seq_mean_token_mean")
        out.update(loss_type="sapo", sapo_temperature_pos=obj.tau_pos, sapo_temperature_neg=obj.tau_neg,
                   importance_sampling_level="token")
    elif isinstance(obj, VESPO):
        if agg != "token_mean":
            raise no("aggregation", recipe.aggregation.short(), "TRL's vespo aggregates as token_mean")
        out.update(loss_type="vespo", vespo_k_pos=obj.k_pos, vespo_lambda_pos=obj.lambda_pos, vespo_k_neg=obj.k_neg,
                   vespo_lambda_neg=obj.lambda_neg, importance_sampling_level="token")
        if obj.behaviour:
            out.update(use_vllm=True, vllm_importance_sampling_correction=True,
                       vllm_importance_sampling_mode="token_truncate", vllm_importance_sampling_clip_max=1e30)
            notes.append("vespo with behaviour: TRL folds in its vLLM token ratio, truncated at clip_max (set huge)")
    else:
        raise no("objective", obj.short(), "loss_type covers ppo_clip, gspo, cispo, sapo and vespo")

    adv = recipe.advantage
    if not isinstance(adv, GroupNorm):
        raise no("advantage", adv.short(), "its advantage is the group mean, divided by the group or batch std or not")
    out["scale_rewards"] = {"std": "group", "batch": "batch", "none": "none"}[adv.scale]
    if adv.scale != "none" and adv.eps != TRL_STD_EPS:
        notes.append(f"advantage eps: TRL divides by std + 1e-4, the recipe by std + {adv.eps!r}")
    kl = recipe.kl
    if kl.active:
        if kl.placement != "loss" or kl.estimator != "k3":
            raise no("kl", kl.short(), "its KL is k3 in the loss")
        if kl.importance and isinstance(obj, GSPO):
            raise no("kl.importance", True, "with sequence-level ratios TRL weights the KL by the sequence ratio")
        out.update(beta=kl.coef, use_bias_correction_kl=kl.importance)
    else:
        out["beta"] = 0.0
    if recipe.filter.tag != "no_filter":
        raise no("filter", recipe.filter.short(), "no group filter or dynamic sampling in GRPOTrainer")
    for s in recipe.shaping:
        if isinstance(s, MaskTruncated):
            out["mask_truncated_completions"] = True
        elif s.tag == "overlong_penalty":
            notes.append(f"shaping {s.short()}: add TRL's reward function trl.rewards.get_soft_overlong_punishment("
                         "max_completion_len=L_max, soft_punish_cache=buffer) to reward_funcs")
        else:
            raise no("shaping", s.short(), "no reward shaping in GRPOConfig")
    out.update(num_iterations=recipe.updates.epochs, steps_per_generation=recipe.updates.minibatches,
               gradient_accumulation_steps=1)
    if recipe.updates.minibatches > 1:
        notes.append("steps_per_generation = minibatches with gradient_accumulation_steps = 1; scale "
                     "per_device_train_batch_size to one optimizer step's completions")
    out.update(use_vllm=out.get("use_vllm", False), vllm_importance_sampling_correction=out.get(
        "vllm_importance_sampling_correction", False), off_policy_mask_threshold=None, top_entropy_quantile=1.0)
    for corr in recipe.corrections:
        if isinstance(corr, RolloutCorrection):
            out.update(use_vllm=True, vllm_importance_sampling_correction=True,
                       vllm_importance_sampling_mode=f"{corr.level}_{corr.mode}",
                       vllm_importance_sampling_clip_max=corr.c_max, vllm_importance_sampling_clip_min=corr.c_min)
            notes.append("rollout_correction: TRL applies it only with use_vllm = true (vLLM rollouts)")
        elif isinstance(corr, OffPolicySequenceMask) and corr.against == "behaviour":
            out["off_policy_mask_threshold"] = corr.threshold
        elif isinstance(corr, TopEntropyMask):
            out["top_entropy_quantile"] = corr.share
        else:
            raise no("corrections", corr.short(), "its corrections are vllm_importance_sampling_*, "
                     "off_policy_mask_threshold (against behaviour) and top_entropy_quantile")
    if recipe.nll_coef > 0:
        raise no("nll_coef", recipe.nll_coef, "no NLL term on correct completions")
    out["entropy_coef"] = recipe.entropy_coef
    if recipe.entropy_control is not None:
        e = recipe.entropy_control
        out.update(use_adaptive_entropy=True, entropy_coef=e.init, entropy_coef_min=e.low, entropy_coef_max=e.high,
                   entropy_coef_delta=e.delta, entropy_target=e.target)
    if (recipe.entropy_coef > 0 or recipe.entropy_control is not None) and agg != "token_mean":
        notes.append("TRL's entropy bonus is a plain token mean; the recipe aggregates it like its loss")
    return out, notes
