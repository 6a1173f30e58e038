"""Held-out evaluation: greedy accuracy, avg@k and pass@k from k samples, lengths, truncation."""
from __future__ import annotations

import math
import torch

from bench.config import EvalConfig  # noqa: F401  (defined with the other config sections)
from bench.engine.policy import Policy
from bench.engine.rollout import NativeBackend, RolloutBackend, SamplingParams


SAMPLES = 8  # greedy completions kept per evaluation when the caller asks (samples=[])


def _nanmean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


@torch.no_grad()
def evaluate(
    policy: Policy,
    task,
    examples: list,
    cfg: EvalConfig = EvalConfig(),
    max_new_tokens: int | None = None,
    seed: int = 0,
    backend: RolloutBackend | None = None,
    samples: list | None = None,
) -> dict[str, float]:
    """Metrics named `eval/...` on `examples` (a task's held-out split).

    avg_k is the mean correctness of k samples per prompt (avg@k); pass_k is the share of prompts with at least
    one correct sample among k (n = k, so the unbiased estimator reduces to this).
    samples: when a list, the first SAMPLES greedy completions are appended to it as dicts (prompt,
    completion, answer, correct): the evaluation's own outputs, no extra generation.
    """
    backend = backend or NativeBackend(policy.model, policy.pad_id, policy.eos_id, chunk_size=cfg.batch_size)
    max_new = max_new_tokens or task.max_new_tokens
    examples = examples[: cfg.n_examples]
    prompts = policy.encode_prompts([e.prompt for e in examples])

    g = backend.generate(prompts, SamplingParams(max_new_tokens=max_new, greedy=True, seed=seed))
    texts = policy.decode(g.tokens, g.mask)
    correct = [task.score(t, e) >= 1.0 for t, e in zip(texts, examples)]
    lengths = g.lengths.tolist()
    if samples is not None:
        samples.extend({"prompt": e.prompt, "completion": t, "answer": e.answer, "correct": bool(c)}
                       for e, t, c in list(zip(examples, texts, correct))[:SAMPLES])
    out = {
        "eval/acc_greedy": _nanmean([float(c) for c in correct]),
        "eval/len_mean": _nanmean([float(n) for n in lengths]),
        "eval/len_correct": _nanmean([float(n) for n, c in zip(lengths, correct) if c]),
        "eval/len_incorrect": _nanmean([float(n) for n, c in zip(lengths, correct) if not c]),
        "eval/truncated_frac": g.truncated.float().mean().item(),
        "eval/gen_tokens": float(sum(lengths)),
        "eval/n": float(len(examples)),
    }
    if cfg.k > 0:
        rep = [p for p in prompts for _ in range(cfg.k)]
        s = backend.generate(rep, SamplingParams(max_new_tokens=max_new, temperature=cfg.temperature, seed=seed + 1))
        stexts = policy.decode(s.tokens, s.mask)
        hits = torch.tensor([task.score(t, examples[i // cfg.k]) >= 1.0 for i, t in enumerate(stexts)], dtype=torch.float32)
        hits = hits.view(len(examples), cfg.k)
        out["eval/avg_k"] = hits.mean().item()
        out["eval/pass_k"] = (hits.amax(1)).mean().item()
        out["eval/gen_tokens"] += float(s.mask.sum().item())
    return out
