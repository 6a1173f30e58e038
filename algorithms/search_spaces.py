"""Default hyperparameter search spaces for `bench tune`, as data: BASE here, each recipe's own
knobs in its registration (`@recipe(name, space=...)` in algorithms/recipes/), with CLIP and BETA
the ranges several recipes share.

Each entry maps a RunConfig override path (the paths `bench run --set` and a suite's
[overrides.RECIPE] take) to a range, in the same form a suite's [tune.space.RECIPE] table uses:

    {"low": 1e-5, "high": 5e-4, "log": True}   a float, sampled on a log scale
    {"low": 0.1, "high": 0.3}                  a float, uniform
    {"low": 1, "high": 4}                      an int (both ends ints)
    {"choices": [4, 8, 16]}                    categorical

BASE applies to every recipe; a recipe's space adds its own knobs (clip ranges, β, caps). Ranges
bracket each paper's default, so the default is always a point the study can find. β is searched
only for recipes whose paper uses a KL term (adding one to a KL-free recipe changes the algorithm);
recipes with one update per batch are on-policy (ρ ≡ 1), so their clip ranges matter only when
`recipe.updates.minibatches` > 1 is sampled. No imports: bench/tune/space.py validates and samples;
`algorithms.search_space(name)` gives a recipe's whole default space.
"""

BASE = {
    "train.lr": {"low": 1e-5, "high": 5e-4, "log": True},
    "train.group_size": {"choices": [4, 8, 16]},
    "recipe.updates.minibatches": {"choices": [1, 2, 4]},
}

CLIP = {"recipe.objective.eps_low": {"low": 0.1, "high": 0.3}, "recipe.objective.eps_high": {"low": 0.1, "high": 0.4}}
BETA = {"recipe.kl.coef": {"low": 1e-4, "high": 0.1, "log": True}}
