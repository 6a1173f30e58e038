"""The tiny suite of the tune tests: addition/nano, the smoke warm start, a few steps per trial."""

TINY = """\
recipes = ["grpo", "rloo", "topr"]
seeds = [0, 1]
tasks = ["addition"]
scales = ["nano"]

[budget]
"addition/nano" = "{steps}steps"

[task_params.addition]
difficulty = "easy"

[train]
prompts_per_step = 4
group_size = 8
lr = 1e-3

[eval]
every = 0.5
n_examples = {n_examples}
k = 2

[warmstart]
steps = 40
eval_examples = 20

[tune]
trials = 3
startup_trials = 2

[tune.space.grpo]
"train.lr" = {{low = 1e-6, high = 1e-5, log = true}}
"train.group_size" = false
"recipe.updates.minibatches" = false
"recipe.objective.eps_low" = false
"recipe.objective.eps_high" = false
"recipe.kl.coef" = false

[tune.space.topr]  # every reward of a weak warm start is 0, mapped to -1: topr updates at every step
"train.group_size" = false
"recipe.updates.minibatches" = false

[tune.space.rloo]
"train.group_size" = false
"recipe.updates.minibatches" = false
"recipe.kl.coef" = false
"""


def write_tiny(path, steps: int = 2, n_examples: int = 16, extra: str = ""):
    path.write_text(TINY.format(steps=steps, n_examples=n_examples) + extra)
    return path
