"""verl's PPO trainer config (verl 0.9: algorithm.*, actor_rollout_ref.actor.*) to a recipe and back.

Keys are dotted paths (a nested YAML is flattened first, Hydra's `+key=value` overrides read alike).

- algorithm.adv_estimator: grpo (norm_adv_by_std_in_grpo: group_norm std / none, eps 1e-6), rloo,
  remax, reinforce_plus_plus(gamma), reinforce_plus_plus_baseline, opo, gpg, gae(gamma, lam) + critic.
- actor.policy_loss.loss_mode: vanilla -> ppo_clip(clip_ratio_low, clip_ratio_high, dual_clip =
  clip_ratio_c; verl's dual clip is always on); gspo -> gspo(low, high); cispo -> cispo(ratio_min =
  1 − low, ratio_max = 1 + high: two-sided, unlike TRL's absolute cap); sapo -> sapo(tau_pos, tau_neg;
  seq-mean-token-mean forced); geo_mean -> gmpo(low, high; a mean over sequences); dppo_tv/kl ->
  dppo(δ = clip_ratio, ratio_cap = clip_ratio_c); clip_cov, kl_cov -> clip_cov, kl_cov; dro ->
  kimi(tau = dro_beta); gpg -> kimi(tau 0), i.e. ℓ = −A·log π.
- actor.loss_agg_mode (+ loss_scale_factor) -> aggregation (seq-mean-token-sum-norm: L_max =
  loss_scale_factor, else data.max_response_length).
- actor.use_kl_loss, kl_loss_coef, kl_loss_type / algorithm.use_kl_in_reward, kl_penalty,
  kl_ctrl.kl_coef -> kl(placement loss / reward; kl k1, mse k2, low_var_kl k3).
- actor.entropy_coeff, ppo_epochs, data.train_batch_size / actor.ppo_mini_batch_size -> entropy_coef,
  updates(epochs, minibatches).
- algorithm.filter_groups, reward_model.overlong_buffer, algorithm.rollout_correction.rollout_is(_threshold)
  -> dynamic_sampling, overlong_penalty, rollout_correction(level, truncate, c_max).

Export writes is_pg (−ρA) as vanilla with no clip (clip_ratio_low 1, clip_ratio_high and clip_ratio_c
1e9, beyond the ±20 log-ratio clamp), and ppo_clip without dual clip with clip_ratio_c 1e9.
The tests (tests/interop/test_verl.py) run verl's own core_algos on both sides.
"""
from __future__ import annotations

from typing import Any

import algorithms
from algorithms import (CISPO, DPPO, GAE, GMPO, GPG, GSPO, KL, OPO, RLOO, SAPO, Aggregation, ClipCov, Critic,
                        DynamicSampling, GroupNorm, ISPG, Kimi, KLCov, OverlongPenalty, PPOClip, ReinforcePP,
                        ReinforcePPBaseline, ReMax, RolloutCorrection, Updates)
from algorithms.errors import InputError

from . import Translation, build, choice, expect

A = "actor_rollout_ref.actor."
ESTIMATORS = ("grpo", "grpo_vectorized", "rloo", "rloo_vectorized", "remax", "reinforce_plus_plus",
              "reinforce_plus_plus_baseline", "opo", "gpg", "gae")
LOSS_MODES = ("vanilla", "gspo", "cispo", "sapo", "geo_mean", "dppo_tv", "dppo_kl", "clip_cov", "kl_cov", "dro", "gpg")
AGG = {"token-mean": "token_mean", "seq-mean-token-mean": "seq_mean_token_mean",
       "seq-mean-token-sum": "seq_mean_token_sum", "seq-mean-token-sum-norm": "seq_mean_token_sum_norm"}
KL_TYPES = {"kl": "k1", "k1": "k1", "mse": "k2", "k2": "k2", "low_var_kl": "k3", "k3": "k3"}
NO_CAP = 1e9  # beyond exp(20), verl's clamp of the log-ratio: a clip that never binds

# verl 0.9.1's defaults (verl/trainer/config/*.yaml, verl/workers/config/actor.py) for every key read
DEFAULTS: dict[str, Any] = {
    "algorithm.adv_estimator": "gae", "algorithm.norm_adv_by_std_in_grpo": True, "algorithm.gamma": 1.0,
    "algorithm.lam": 1.0, "algorithm.use_kl_in_reward": False, "algorithm.kl_penalty": "kl",
    "algorithm.kl_ctrl.type": "fixed", "algorithm.kl_ctrl.kl_coef": 0.001,
    "algorithm.filter_groups.enable": False, "algorithm.filter_groups.metric": "acc",
    "algorithm.filter_groups.max_num_gen_batches": 10,
    "algorithm.rollout_correction.rollout_is": None, "algorithm.rollout_correction.rollout_is_threshold": 2.0,
    A + "policy_loss.loss_mode": "vanilla", A + "clip_ratio": 0.2, A + "clip_ratio_low": None,
    A + "clip_ratio_high": None, A + "clip_ratio_c": 3.0, A + "loss_agg_mode": "token-mean",
    A + "loss_scale_factor": None, A + "tau_pos": 1.0, A + "tau_neg": 1.05,
    A + "policy_loss.clip_cov_ratio": 0.0002, A + "policy_loss.clip_cov_lb": 1.0, A + "policy_loss.clip_cov_ub": 5.0,
    A + "policy_loss.kl_cov_ratio": 0.0002, A + "policy_loss.ppo_kl_coef": 0.1, A + "policy_loss.dro_beta": None,
    A + "use_kl_loss": False, A + "kl_loss_coef": 0.001, A + "kl_loss_type": "low_var_kl",
    A + "entropy_coeff": 0.0, A + "ppo_epochs": 1, A + "ppo_mini_batch_size": 256, "data.train_batch_size": 1024,
    "data.max_response_length": 512, "actor_rollout_ref.rollout.n": 1,
    "reward_model.overlong_buffer.enable": False, "reward_model.overlong_buffer.len": 0,
    "reward_model.overlong_buffer.penalty_factor": 1.0, "critic.cliprange_value": 0.5,
}
SETTINGS = {"actor_rollout_ref.rollout.n": "train.group_size", "data.max_response_length": "train.max_new_tokens",
            "data.train_batch_size": "train.prompts_per_step", "actor_rollout_ref.rollout.temperature": "train.temperature",
            "actor_rollout_ref.rollout.top_p": "train.top_p", A + "optim.lr": "train.lr",
            A + "optim.weight_decay": "train.weight_decay", A + "grad_clip": "train.grad_clip",
            "critic.optim.lr": "train.critic_lr", "trainer.seed": "seed"}
# throughput, memory, placement and bookkeeping: a key with one of these parts is listed as ignored
IGNORED_PARTS = ("micro_batch", "max_token_len", "fsdp", "megatron", "gpu_memory", "parallel", "offload",
                 "use_dynamic_bsz", "use_remove_padding", "gradient_checkpointing", "use_torch_compile",
                 "use_fused_kernels", "checkpoint", "profiler", "free_cache_engine", "enforce_eager",
                 "load_format", "max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill",
                 "rollout.name", "rollout.mode", "ulysses", "shuffle", "dataloader", "data_loader_seed")
IGNORED_PREFIXES = ("trainer.", "data.train_files", "data.val_files", "data.prompt_key", "data.filter_overlong",
                    "data.truncation", "data.max_prompt_length", "data.val_batch_size", "actor_rollout_ref.model.",
                    "critic.model.", "ray_init.", "actor_rollout_ref.ref.", "reward_model.reward_manager",
                    "actor_rollout_ref.hybrid_engine", "actor_rollout_ref.rollout.val_kwargs.", "custom_reward_function.")


def from_verl(fields: dict[str, Any], source: str) -> Translation:
    """A verl config's dotted keys (missing ones at verl 0.9.1's defaults) as a recipe and run settings."""
    c = {**DEFAULTS, **fields}
    given = set(fields)
    read: set[str] = set()
    tr = Translation(recipe=None, source=source)  # type: ignore[arg-type]

    def get(key: str) -> Any:
        read.add(key)
        return c[key]

    def num(key: str, *, integer: bool = False, optional: bool = False) -> Any:
        v = get(key)
        if v is None and optional:
            return None
        return expect(source, key, v, (int,) if integer else (int, float),
                      ("an integer" if integer else "a number") + (" or null" if optional else ""))

    def flag(key: str) -> bool:
        return expect(source, key, get(key), bool, "true or false")

    def mapped(keys, to: str) -> None:
        for k in keys:
            if k in given:
                tr.mapped.append(f"{k} = {c[k]!r} -> {to}")

    est = choice(source, "algorithm.adv_estimator", get("algorithm.adv_estimator"), ESTIMATORS)
    critic = None
    if est.startswith("grpo"):
        advantage = GroupNorm(scale="std" if flag("algorithm.norm_adv_by_std_in_grpo") else "none", eps=1e-6)
    elif est.startswith("rloo"):
        advantage = RLOO()
    elif est == "remax":
        advantage = ReMax()
    elif est == "reinforce_plus_plus":
        advantage = ReinforcePP(gamma=num("algorithm.gamma"))
    elif est == "reinforce_plus_plus_baseline":
        advantage = ReinforcePPBaseline()
    elif est == "opo":
        advantage = OPO()
    elif est == "gpg":
        advantage = GPG()
    else:
        advantage = GAE(gamma=num("algorithm.gamma"), lam=num("algorithm.lam"))
        critic = Critic(value_clip=num("critic.cliprange_value"))
        tr.notes.append("gae: verl trains the critic with its own optimizer and loss; ours shares the step "
                        f"(value_coef {critic.value_coef!r}, see algorithms/critic.py)")
    mapped(("algorithm.adv_estimator", "algorithm.norm_adv_by_std_in_grpo", "algorithm.gamma", "algorithm.lam",
            "critic.cliprange_value"), f"advantage {advantage.short()}")

    mode = choice(source, A + "policy_loss.loss_mode", get(A + "policy_loss.loss_mode"), LOSS_MODES)
    eps = num(A + "clip_ratio")
    low = num(A + "clip_ratio_low", optional=True)
    high = num(A + "clip_ratio_high", optional=True)
    low, high = (eps if low is None else low), (eps if high is None else high)
    cap = num(A + "clip_ratio_c")
    agg = AGG.get(choice(source, A + "loss_agg_mode", get(A + "loss_agg_mode"), tuple(AGG)))
    pl = A + "policy_loss."
    if mode == "vanilla":
        objective = PPOClip(eps_low=low, eps_high=high, dual_clip=None if cap >= NO_CAP else cap)
    elif mode == "gspo":
        objective = GSPO(eps_low=low, eps_high=high)
    elif mode == "cispo":
        objective = CISPO(ratio_max=1 + high, ratio_min=1 - low)
        tr.notes.append(f"cispo: verl clamps the weight to [1 − clip_ratio_low, 1 + clip_ratio_high] = "
                        f"[{1 - low!r}, {1 + high!r}] (TRL's cap is absolute)")
    elif mode == "sapo":
        objective = SAPO(tau_pos=num(A + "tau_pos"), tau_neg=num(A + "tau_neg"))
        agg = "seq_mean_token_mean"  # verl's sapo ignores loss_agg_mode
    elif mode == "geo_mean":
        objective = GMPO(eps_low=low, eps_high=high)
        agg = "seq_mean_token_mean"  # verl's geo_mean is a mean over sequences whatever loss_agg_mode says
    elif mode in ("dppo_tv", "dppo_kl"):
        if low != high:
            raise InputError(f"{source}: {A}clip_ratio_low: {low!r} differs from clip_ratio_high ({high!r}); "
                             f"{mode} is modelled with one δ (clip_ratio)")
        objective = DPPO(divergence=mode[-2:], delta=low, ratio_cap=cap)
    elif mode == "clip_cov":
        objective = ClipCov(eps_low=low, eps_high=high, frac=num(pl + "clip_cov_ratio"),
                            cov_low=num(pl + "clip_cov_lb"), cov_high=num(pl + "clip_cov_ub"))
    elif mode == "kl_cov":
        objective = KLCov(frac=num(pl + "kl_cov_ratio"), kl_coef=num(pl + "ppo_kl_coef"))
    elif mode == "dro":
        tau = num(pl + "dro_beta", optional=True)
        if tau is None:
            raise InputError(f"{source}: {pl}dro_beta: missing; verl's dro needs it (e.g. 0.1)")
        objective = Kimi(tau=tau)
    else:
        objective = Kimi(tau=0.0)
        tr.notes.append("gpg loss −A·log π: kimi with tau 0")
    mapped((pl + "loss_mode", A + "clip_ratio", A + "clip_ratio_low", A + "clip_ratio_high", A + "clip_ratio_c",
            A + "tau_pos", A + "tau_neg") + tuple(pl + k for k in ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub",
                                                                   "kl_cov_ratio", "ppo_kl_coef", "dro_beta")),
           f"objective {objective.short()}")
    max_len = num("data.max_response_length", integer=True)
    scale = num(A + "loss_scale_factor", optional=True)
    if agg == "seq_mean_token_sum_norm" and scale is not None and scale != max_len:
        tr.notes.append(f"seq-mean-token-sum-norm divides by loss_scale_factor {scale!r}: our L_max, "
                        "train.max_new_tokens, is set to it")
        max_len = int(scale)
    aggregation = Aggregation(agg)
    mapped((A + "loss_agg_mode", A + "loss_scale_factor"), f"aggregation {agg}")

    kl = KL()
    in_loss, in_reward = flag(A + "use_kl_loss"), flag("algorithm.use_kl_in_reward")
    if in_loss and in_reward:
        raise InputError(f"{source}: {A}use_kl_loss: true with algorithm.use_kl_in_reward: true; a recipe has one "
                         "KL term, valid: one of them")
    if in_loss:
        t = choice(source, A + "kl_loss_type", get(A + "kl_loss_type"), tuple(KL_TYPES))
        kl = KL(coef=num(A + "kl_loss_coef"), estimator=KL_TYPES[t], placement="loss")
        if t == "low_var_kl":
            tr.notes.append("low_var_kl: verl clamps k3 to [−10, 10]; ours is unclamped (equal below 10)")
    if in_reward:
        t = choice(source, "algorithm.kl_penalty", get("algorithm.kl_penalty"), tuple(KL_TYPES))
        if get("algorithm.kl_ctrl.type") != "fixed":
            tr.unmodelled.append(f"algorithm.kl_ctrl.type = {c['algorithm.kl_ctrl.type']!r}: our KL coefficient is "
                                 "fixed (kl_ctrl.kl_coef is its start)")
        kl = KL(coef=num("algorithm.kl_ctrl.kl_coef"), estimator=KL_TYPES[t], placement="reward")
    mapped((A + "use_kl_loss", A + "kl_loss_coef", A + "kl_loss_type", "algorithm.use_kl_in_reward",
            "algorithm.kl_penalty", "algorithm.kl_ctrl.kl_coef", "algorithm.kl_ctrl.type"), f"kl {kl.short()}")

    epochs = num(A + "ppo_epochs", integer=True)
    tbs, mbs = num("data.train_batch_size", integer=True), num(A + "ppo_mini_batch_size", integer=True)
    if mbs <= 0 or tbs % mbs:
        raise InputError(f"{source}: {A}ppo_mini_batch_size: {mbs!r} must divide data.train_batch_size ({tbs!r})")
    updates = Updates(epochs=epochs, minibatches=tbs // mbs)
    mapped((A + "ppo_epochs", A + "ppo_mini_batch_size", "data.train_batch_size"), f"updates {updates.short()}")

    filt = algorithms.NoFilter()
    if flag("algorithm.filter_groups.enable"):
        metric = get("algorithm.filter_groups.metric")
        filt = DynamicSampling(metric="correct" if metric == "acc" else "reward",
                               max_generation_rounds=num("algorithm.filter_groups.max_num_gen_batches", integer=True))
        if metric not in ("acc", "score"):
            tr.unmodelled.append(f"algorithm.filter_groups.metric = {metric!r}: we filter on correctness or reward")
    mapped(("algorithm.filter_groups.enable", "algorithm.filter_groups.metric",
            "algorithm.filter_groups.max_num_gen_batches"), f"filter {filt.short()}")
    shaping = ()
    if flag("reward_model.overlong_buffer.enable"):
        shaping = (OverlongPenalty(buffer=num("reward_model.overlong_buffer.len", integer=True), buffer_frac=None,
                                   factor=num("reward_model.overlong_buffer.penalty_factor")),)
    mapped(("reward_model.overlong_buffer.enable", "reward_model.overlong_buffer.len",
            "reward_model.overlong_buffer.penalty_factor"), "shaping " + (shaping[0].short() if shaping else "none"))
    corrections = ()
    rc = "algorithm.rollout_correction."
    level = get(rc + "rollout_is")
    if level is not None:
        level = {"token": "token", "sequence": "sequence", "seq": "sequence"}.get(level)
        if level is None:
            choice(source, rc + "rollout_is", c[rc + "rollout_is"], ("token", "sequence", "null"))
        corrections = (RolloutCorrection(level=level, mode="truncate", c_max=num(rc + "rollout_is_threshold")),)
    mapped((rc + "rollout_is", rc + "rollout_is_threshold"),
           corrections[0].short() if corrections else "no rollout correction")

    entropy_coef = float(num(A + "entropy_coeff"))
    mapped((A + "entropy_coeff",), f"entropy_coef {entropy_coef!r}")
    tr.recipe = build(source, name="from_verl", advantage=advantage, objective=objective, aggregation=aggregation,
                      kl=kl, filter=filt, shaping=shaping, critic=critic, updates=updates,
                      entropy_coef=entropy_coef, corrections=corrections)
    settings = {"train.group_size": num("actor_rollout_ref.rollout.n", integer=True), "train.max_new_tokens": max_len,
                "train.prompts_per_step": tbs}
    for k in sorted(given - read):
        v = fields[k]
        if k in SETTINGS:
            settings[SETTINGS[k]] = v
            tr.mapped.append(f"{k} = {v!r} -> {SETTINGS[k]}")
        elif any(p in k for p in IGNORED_PARTS) or k.startswith(IGNORED_PREFIXES):
            tr.ignored.append(f"{k}: throughput, placement or bookkeeping only")
        else:
            tr.unmodelled.append(f"{k} = {v!r}: no part or setting of ours expresses it")
    if settings["train.group_size"] < 2:
        tr.notes.append("actor_rollout_ref.rollout.n = 1: group estimators need n >= 2 (our train.group_size >= 2)")
        settings["train.group_size"] = 2
    tr.settings = settings
    return tr


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in flat.items():
        *head, last = k.split(".")
        t = out
        for h in head:
            t = t.setdefault(h, {})
        t[last] = v
    return out


def overrides(tree: dict[str, Any], prefix: str = "") -> list[str]:
    """Hydra command-line overrides (key=value) for a nested config."""
    out = []
    for k, v in tree.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.extend(overrides(v, key))
        else:
            out.append(f"{key}={'null' if v is None else str(v).lower() if isinstance(v, bool) else v}")
    return out


def to_verl(recipe: algorithms.Recipe, max_response_length: int | None = None,
            prompts_per_step: int = 16) -> tuple[dict[str, Any], list[str]]:
    """verl config (nested) that reproduces the recipe, and notes; InputError naming the first part verl
    cannot express."""
    def no(path: str, value: Any, why: str) -> InputError:
        return InputError(f"recipe {recipe.name}: {path} = {value}: verl cannot express it ({why})")

    f: dict[str, Any] = {}
    notes: list[str] = []
    obj = recipe.objective
    if isinstance(obj, PPOClip):
        caps = [x for x in (obj.dual_clip, obj.delta) if x is not None]  # the same cap for A < 0 (objectives.py)
        f.update({A + "policy_loss.loss_mode": "vanilla", A + "clip_ratio_low": obj.eps_low,
                  A + "clip_ratio_high": obj.eps_high, A + "clip_ratio_c": min(caps) if caps else NO_CAP})
    elif isinstance(obj, ISPG):
        f.update({A + "policy_loss.loss_mode": "vanilla", A + "clip_ratio_low": 1.0, A + "clip_ratio_high": NO_CAP,
                  A + "clip_ratio_c": NO_CAP})
        notes.append("is_pg (−ρA) as vanilla PPO whose clips never bind (clip_ratio_low 1, clip_ratio_high and "
                     "clip_ratio_c 1e9)")
    elif isinstance(obj, GSPO):
        f.update({A + "policy_loss.loss_mode": "gspo", A + "clip_ratio_low": obj.eps_low, A + "clip_ratio_high": obj.eps_high})
    elif isinstance(obj, CISPO):
        f.update({A + "policy_loss.loss_mode": "cispo", A + "clip_ratio_high": obj.ratio_max - 1,
                  A + "clip_ratio_low": 1.0 if obj.ratio_min is None else 1 - obj.ratio_min})
        if obj.ratio_min is not None and obj.ratio_min > 1:
            raise no("objective.ratio_min", obj.ratio_min, "its cispo lower bound is 1 − clip_ratio_low ≤ 1")
    elif isinstance(obj, (SAPO, GMPO)):
        if recipe.aggregation.mode != "seq_mean_token_mean":
            raise no("aggregation", recipe.aggregation.short(), f"its {obj.tag} is a mean over sequences")
        if isinstance(obj, SAPO):
            f.update({A + "policy_loss.loss_mode": "sapo", A + "tau_pos": obj.tau_pos, A + "tau_neg": obj.tau_neg})
        else:
            f.update({A + "policy_loss.loss_mode": "geo_mean", A + "clip_ratio_low": obj.eps_low,
                      A + "clip_ratio_high": obj.eps_high})
    elif isinstance(obj, DPPO):
        d = obj.delta if obj.delta is not None else algorithms.objectives.DPPO_DELTA[obj.divergence]
        f.update({A + "policy_loss.loss_mode": f"dppo_{obj.divergence}", A + "clip_ratio": d, A + "clip_ratio_low": d,
                  A + "clip_ratio_high": d, A + "clip_ratio_c": obj.ratio_cap})
    elif isinstance(obj, ClipCov):
        f.update({A + "policy_loss.loss_mode": "clip_cov", A + "clip_ratio_low": obj.eps_low,
                  A + "clip_ratio_high": obj.eps_high, A + "policy_loss.clip_cov_ratio": obj.frac,
                  A + "policy_loss.clip_cov_lb": obj.cov_low, A + "policy_loss.clip_cov_ub": obj.cov_high})
    elif isinstance(obj, KLCov):
        f.update({A + "policy_loss.loss_mode": "kl_cov", A + "policy_loss.kl_cov_ratio": obj.frac,
                  A + "policy_loss.ppo_kl_coef": obj.kl_coef})
    elif isinstance(obj, Kimi):
        f.update({A + "policy_loss.loss_mode": "dro", A + "policy_loss.dro_beta": obj.tau})
    else:
        raise no("objective", obj.short(), "its loss modes cover ppo_clip, is_pg, gspo, cispo, sapo, gmpo, dppo, "
                 "clip_cov, kl_cov and kimi (dro)")
    agg = recipe.aggregation.mode
    inv = {v: k for k, v in AGG.items()}
    if agg not in inv:
        raise no("aggregation", recipe.aggregation.short(), "loss_agg_mode has token-mean, seq-mean-token-mean, "
                 "seq-mean-token-sum and seq-mean-token-sum-norm")
    f[A + "loss_agg_mode"] = inv[agg]
    if agg == "seq_mean_token_sum_norm":
        if max_response_length is None:
            notes.append("seq-mean-token-sum-norm divides by loss_scale_factor: set it to the run's max_new_tokens")
        else:
            f[A + "loss_scale_factor"] = max_response_length

    adv = recipe.advantage
    if isinstance(adv, GroupNorm):
        if adv.scale == "batch":
            raise no("advantage", adv.short(), "grpo divides by the group std or not at all")
        f.update({"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": adv.scale == "std"})
        if adv.scale == "std" and adv.eps != 1e-6:
            notes.append(f"advantage eps: verl's grpo divides by std + 1e-6, the recipe by std + {adv.eps!r}")
    elif isinstance(adv, GAE):
        if not adv.whiten:
            raise no("advantage.whiten", False, "its gae always whitens")
        f.update({"algorithm.adv_estimator": "gae", "algorithm.gamma": adv.gamma, "algorithm.lam": adv.lam})
        notes.append(f"gae whitening: verl divides by sqrt(var + 1e-8), the recipe by std + {adv.eps!r}")
        if recipe.critic is not None:
            f["critic.cliprange_value"] = recipe.critic.value_clip
            notes.append("critic: verl trains it with its own optimizer (critic.optim.lr)")
    else:
        names = {RLOO: "rloo", ReMax: "remax", ReinforcePP: "reinforce_plus_plus",
                 ReinforcePPBaseline: "reinforce_plus_plus_baseline", OPO: "opo", GPG: "gpg"}
        name = names.get(type(adv))
        if name is None:
            raise no("advantage", adv.short(), "adv_estimator has grpo, rloo, remax, reinforce_plus_plus(_baseline), "
                     "opo, gpg and gae")
        f["algorithm.adv_estimator"] = name
        if isinstance(adv, ReinforcePP) and type(adv) is ReinforcePP:
            f["algorithm.gamma"] = adv.gamma
    kl = recipe.kl
    verl_kl = {"k1": "kl", "k2": "mse", "k3": "low_var_kl"}[kl.estimator]
    f.update({A + "use_kl_loss": kl.active and kl.placement == "loss", "algorithm.use_kl_in_reward":
              kl.active and kl.placement == "reward"})
    if kl.active and kl.importance:
        raise no("kl.importance", True, "its KL has no importance weight")
    if kl.active and kl.placement == "loss":
        f.update({A + "kl_loss_coef": kl.coef, A + "kl_loss_type": verl_kl})
    elif kl.active:
        f.update({"algorithm.kl_penalty": verl_kl, "algorithm.kl_ctrl.type": "fixed", "algorithm.kl_ctrl.kl_coef": kl.coef})
    filt = recipe.filter
    if isinstance(filt, DynamicSampling):
        f.update({"algorithm.filter_groups.enable": True, "algorithm.filter_groups.metric":
                  "acc" if filt.metric == "correct" else "score",
                  "algorithm.filter_groups.max_num_gen_batches": filt.max_generation_rounds})
    elif filt.tag != "no_filter":
        raise no("filter", filt.short(), "its filter_groups refills (dynamic sampling) only")
    for s in recipe.shaping:
        if isinstance(s, OverlongPenalty) and s.buffer is not None:
            f.update({"reward_model.overlong_buffer.enable": True, "reward_model.overlong_buffer.len": s.buffer,
                      "reward_model.overlong_buffer.penalty_factor": s.factor})
        elif isinstance(s, OverlongPenalty):
            f.update({"reward_model.overlong_buffer.enable": True, "reward_model.overlong_buffer.penalty_factor": s.factor})
            notes.append(f"overlong_buffer.len: {s.buffer_frac!r} × the run's max_new_tokens")
        else:
            raise no("shaping", s.short(), "its reward shaping is overlong_buffer")
    for corr in recipe.corrections:
        if isinstance(corr, RolloutCorrection) and corr.mode == "truncate" and corr.c_min is None:
            f.update({"algorithm.rollout_correction.rollout_is": corr.level,
                      "algorithm.rollout_correction.rollout_is_threshold": corr.c_max})
        else:
            raise no("corrections", corr.short(), "rollout_is truncates at an upper threshold; its rejection "
                     "sampling (rollout_rs) drops tokens from the denominator, ours keeps them")
    if recipe.entropy_control is not None:
        raise no("entropy_control", recipe.entropy_control.short(), "its entropy_coeff is fixed")
    if recipe.nll_coef > 0:
        raise no("nll_coef", recipe.nll_coef, "no NLL term on correct completions")
    f[A + "entropy_coeff"] = recipe.entropy_coef
    f[A + "ppo_epochs"] = recipe.updates.epochs
    m = recipe.updates.minibatches  # verl's mini-batches count prompts, as our train.prompts_per_step does
    tbs = m * max(1, prompts_per_step // m)
    f.update({"data.train_batch_size": tbs, A + "ppo_mini_batch_size": tbs // m})
    if max_response_length is not None:
        f["data.max_response_length"] = max_response_length
    return nest(f), notes
