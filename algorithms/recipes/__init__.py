"""The named recipes. Every module of this package registers its own with `@recipe(name, space=...)`
(algorithms/registry.py) and is imported here, so a new recipe is a builder in a new module (or an
existing one) plus its test: its docstring is its description (the paper, then its departures) and
`space` the knobs `bench tune` searches beside algorithms/search_spaces.BASE.

    family_2025   the twelve of early 2025: ppo, grpo, dr_grpo, dapo, gspo, cispo, rloo, remax,
                  reinforce, reinforce_pp, topr, vapo
    family_2026   what the field's trainers ship now (issue 25): sapo, gmpo, luspo, vespo, dppo_tv,
                  dppo_kl, gpg, clip_cov, kl_cov, kimi, opsm, grpo_tis, decoupled_ppo
"""

import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
