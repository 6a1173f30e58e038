"""The GRPO family as composable parts and named recipes. Pure torch, no I/O.

    import algorithms
    algorithms.names()                    # registered recipe names
    recipe = algorithms.get("dapo")       # unknown name -> error listing names, suggesting the closest
    recipe = recipe.replace(objective=algorithms.PPOClip(0.2, 0.28))
    batch = algorithms.Rollouts(rewards=..., group=..., mask=..., logp_old=..., max_new_tokens=...)
    adv = recipe.advantages(batch)                 # (B, T)
    loss, stats = recipe.loss(logp, batch, adv)    # logp (B, T) requires grad

See recipe.py for the full order of engine calls, stats.py for how micro-batch stats combine.
"""

from . import recipes as _recipes  # noqa: F401  (its modules register the named recipes)
from .advantages import (GAE, GDPO, GPG, OPO, RLOO, Advantage, BatchMean, GroupNorm, LengthAdaptiveGAE,
                         Raw, ReinforcePP, ReinforcePPBaseline, ReMax)
from .corrections import M2PO, Correction, OffPolicySequenceMask, RolloutCorrection, TopEntropyMask
from .aggregation import Aggregation, aggregate
from .critic import Critic, explained_variance
from .entropy import AdaptiveEntropy
from .errors import ConfigError, InputError, MissingInput
from .filters import (AffineReward, DropZeroVariance, DynamicSampling, Filter, MaskTruncated, NoFilter,
                      OverlongPenalty, Shaping)
from .kl import KL, kl_estimate
from .objectives import (CISPO, DPPO, GMPO, GSPO, ISPG, SAPO, TOPR, VESPO, ClipCov, Kimi, KLCov, Objective,
                         PPOClip)
from .parts import PARTS, Part
from .recipe import Needs, Recipe, Updates
from .registry import UnknownRecipeError, get, names, search_space
from .rollouts import Rollouts
from .serialize import from_json
from .stats import merge_stats
from .telemetry import group_weight_stats, off_policy_stats

__all__ = [
    "AdaptiveEntropy", "AffineReward", "Advantage", "Aggregation", "BatchMean", "CISPO", "ClipCov",
    "ConfigError", "Correction", "Critic", "DPPO", "DropZeroVariance", "DynamicSampling", "Filter",
    "GAE", "GDPO", "GMPO", "GPG", "GSPO", "GroupNorm", "ISPG", "InputError", "KL", "KLCov", "Kimi",
    "LengthAdaptiveGAE", "M2PO", "MaskTruncated", "MissingInput", "Needs", "NoFilter", "OPO",
    "Objective", "OffPolicySequenceMask", "OverlongPenalty", "PARTS", "PPOClip", "Part", "RLOO",
    "Raw", "ReMax", "Recipe", "ReinforcePP", "ReinforcePPBaseline", "RolloutCorrection", "Rollouts",
    "SAPO", "Shaping", "TOPR", "TopEntropyMask", "UnknownRecipeError", "Updates", "VESPO",
    "aggregate", "explained_variance", "from_json", "get", "group_weight_stats", "kl_estimate",
    "merge_stats", "names", "off_policy_stats", "search_space",
]
