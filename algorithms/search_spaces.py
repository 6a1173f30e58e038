"""Default hyperparameter search spaces for `bench tune`, as data, beside the recipes they tune.

Each entry maps a RunConfig override path (the paths `bench run --set` and a suite's
[overrides.RECIPE] take) to a range, in the same form a suite's [tune.space.RECIPE] table uses:

    {"low": 1e-5, "high": 5e-4, "log": True}   a float, sampled on a log scale
    {"low": 0.1, "high": 0.3}                  a float, uniform
    {"low": 1, "high": 4}                      an int (both ends ints)
    {"choices": [4, 8, 16]}                    categorical

BASE applies to every recipe; RECIPE adds each recipe's own knobs (clip ranges, β, caps). Ranges
bracket each paper's default, so the default is always a point the study can find. β is searched
only for recipes whose paper uses a KL term (adding one to a KL-free recipe changes the algorithm);
recipes with one update per batch are on-policy (ρ ≡ 1), so their clip ranges matter only when
`recipe.updates.minibatches` > 1 is sampled. No imports: bench/tune/space.py validates and samples.
"""

BASE = {
    "train.lr": {"low": 1e-5, "high": 5e-4, "log": True},
    "train.group_size": {"choices": [4, 8, 16]},
    "recipe.updates.minibatches": {"choices": [1, 2, 4]},
}

_CLIP = {"recipe.objective.eps_low": {"low": 0.1, "high": 0.3}, "recipe.objective.eps_high": {"low": 0.1, "high": 0.4}}
_BETA = {"recipe.kl.coef": {"low": 1e-4, "high": 0.1, "log": True}}

RECIPE = {
    "ppo": {**_CLIP, **_BETA, "recipe.advantage.lam": {"low": 0.9, "high": 1.0},
            "train.critic_lr": {"low": 1e-4, "high": 2e-3, "log": True}},
    "grpo": {**_CLIP, **_BETA},
    "dr_grpo": {**_CLIP},
    "dapo": {"recipe.objective.eps_low": {"low": 0.1, "high": 0.3},
             "recipe.objective.eps_high": {"low": 0.2, "high": 0.4}},
    "gspo": {"recipe.objective.eps_low": {"low": 1e-4, "high": 1e-2, "log": True},
             "recipe.objective.eps_high": {"low": 1e-4, "high": 1e-2, "log": True}},
    "cispo": {"recipe.objective.ratio_max": {"low": 1.5, "high": 10.0, "log": True}},
    "rloo": {**_BETA},
    "remax": {**_BETA},
    "reinforce": {},
    "reinforce_pp": {**_CLIP, **_BETA},
    "topr": {},
    # vapo's λ = 1 − 1/(α·L): the paper's α = 0.05 suits L ~ 1000; short answers need α up to ~1
    "vapo": {**_CLIP, "recipe.advantage.alpha": {"low": 0.01, "high": 2.0, "log": True},
             "recipe.nll_coef": {"low": 0.0, "high": 0.3}, "train.critic_lr": {"low": 1e-4, "high": 2e-3, "log": True}},
    # the 2026 family: each recipe's own knob, bracketing its reference default
    "sapo": {"recipe.objective.tau_pos": {"low": 0.5, "high": 2.0, "log": True},
             "recipe.objective.tau_neg": {"low": 0.5, "high": 2.0, "log": True}},
    "gmpo": {"recipe.objective.eps_low": {"low": 0.1, "high": 0.8}, "recipe.objective.eps_high": {"low": 0.1, "high": 0.8}},
    "luspo": {"recipe.objective.eps_low": {"low": 1e-4, "high": 1e-2, "log": True},
              "recipe.objective.eps_high": {"low": 1e-4, "high": 1e-2, "log": True}},
    "vespo": {},
    "dppo_tv": {"recipe.objective.delta": {"low": 0.05, "high": 0.5, "log": True}},
    "dppo_kl": {"recipe.objective.delta": {"low": 0.01, "high": 0.3, "log": True}},
    "gpg": {},
    "clip_cov": {**_CLIP, "recipe.objective.frac": {"low": 5e-5, "high": 2e-3, "log": True}},
    "kl_cov": {"recipe.objective.frac": {"low": 5e-5, "high": 2e-3, "log": True},
               "recipe.objective.kl_coef": {"low": 0.01, "high": 1.0, "log": True}},
    "kimi": {"recipe.objective.tau": {"low": 0.01, "high": 1.0, "log": True}},
    "opsm": {**_CLIP, **_BETA},
    "grpo_tis": {**_CLIP, **_BETA},
    "decoupled_ppo": {**_CLIP},
}
