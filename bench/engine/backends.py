"""Rollout backends by name: the native sampler (rollout.py) or vLLM (vllm_backend.py, imported only
when asked for: vLLM lives in its own venv). Above both, so neither imports the other."""
from __future__ import annotations

from algorithms.errors import ConfigError
from bench.engine.policy import Policy
from bench.engine.rollout import NativeBackend, RolloutBackend

BACKENDS = ("native", "vllm")


def make_backend(name: str, policy: Policy, seed: int = 0, device: str = "cpu",
                 precision: str = "fp32") -> RolloutBackend:
    """The rollout backend called `name`, sampling from `policy` until its first `sync`; `precision`
    (native only) rounds the sampler's weights, so its log-probs differ from the trainer's."""
    if name == "native":
        return NativeBackend(policy.model, policy.pad_id, policy.eos_id, precision=precision)
    if precision != "fp32":
        raise ConfigError(f"rollout precision {precision!r} needs the native backend (vLLM samples in fp32 here)")
    if name == "vllm":  # imported lazily: vLLM lives in its own venv
        from bench.engine.vllm_backend import VLLMBackend

        return VLLMBackend(policy, seed=seed, device=device)
    raise ConfigError(f"rollout backend {name!r} is not available; valid: {', '.join(BACKENDS)}")
