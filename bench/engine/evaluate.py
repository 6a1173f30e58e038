"""Held-out evaluation: greedy accuracy, avg@k and pass@k from k samples, format rate and accuracy among
well-formed answers, the KL to the reference on the policy's own samples, a harder out-of-distribution
split, lengths, truncation."""
from __future__ import annotations

import math
import torch

from algorithms.metrics import PASS_AT_MAX
from bench.config import EvalConfig
from bench.engine.padding import left_pad
from bench.engine.policy import Policy, sequence_logprobs
from bench.engine.rollout import Generation, NativeBackend, RolloutBackend, SamplingParams


SAMPLES = 8  # greedy completions kept per evaluation when the caller asks (samples=[])
# samples per problem on the harder split: acc_ood is a mean (avg@k), which needs no coverage curve, so
# it stays at k = 4's cost when k is raised for pass@k (every suite with ood_examples had k = 4)
OOD_K = 4


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
    ood: tuple | None = None,
    reference: torch.nn.Module | None = None,
) -> dict[str, float]:
    """Metrics named `eval/...` on `examples` (a task's held-out problems).

    Greedy: `acc_greedy` and `format_greedy` (share of greedy answers that are well-formed, see
    Task.well_formed). With k > 0, k answers sampled per prompt at cfg.temperature, on the first
    cfg.sampled_examples problems (all when None; `n_sampled` says how many): `avg_k` (avg@k,
    the sampled pass@1), `pass_k` (share of prompts with a correct sample among k; n = k, so the
    unbiased estimator reduces to this), `format_rate` (share of samples that are well-formed) and
    `acc_formatted` (accuracy among the well-formed samples: skill apart from format), and the
    coverage curve `pass@1`, `pass@2`, `pass@4`, ... `pass@k` (pass_at_k: the unbiased estimator from
    the same k samples, no extra generation).
    reference: the frozen reference (the warm start); with k > 0, `kl_k1` and `kl_k3` (see kl_to_reference)
    on the first sampled answer of every problem.
    ood: (task, examples, max_new_tokens) of a harder split (Task.ood): `acc_ood` is avg@min(k, OOD_K)
    there (greedy accuracy when k = 0).
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
        "eval/format_greedy": _nanmean([float(task.well_formed(t)) for t in texts]),
    }
    if cfg.k > 0:
        m = cfg.sampled_examples or len(examples)
        hits, formed, tokens, s = _sampled(policy, backend, task, examples[:m], prompts[:m], cfg.k, cfg, max_new,
                                           seed + 1)
        out["eval/n_sampled"] = float(hits.shape[0])
        if reference is not None:
            first = list(range(0, hits.shape[0] * cfg.k, cfg.k))
            out.update(kl_to_reference(reference, prompts[:m], s, first, cfg.temperature, policy.pad_id,
                                       cfg.batch_size))
        out["eval/avg_k"] = hits.mean().item()
        out["eval/pass_k"] = hits.amax(1).mean().item()
        out.update(pass_at_k(hits))
        out["eval/format_rate"] = formed.float().mean().item()
        out["eval/acc_formatted"] = hits[formed].mean().item() if formed.any() else math.nan
        out["eval/gen_tokens"] += tokens
    if ood is not None:
        ood_task, ood_examples, ood_max_new = ood
        ood_examples = ood_examples[: cfg.ood_examples or len(ood_examples)]
        ood_prompts = policy.encode_prompts([e.prompt for e in ood_examples])
        if cfg.k > 0:
            hits, _, tokens, _ = _sampled(policy, backend, ood_task, ood_examples, ood_prompts, min(cfg.k, OOD_K), cfg,
                                          ood_max_new, seed + 2)
        else:
            o = backend.generate(ood_prompts, SamplingParams(max_new_tokens=ood_max_new, greedy=True, seed=seed + 2))
            hits = torch.tensor([ood_task.score(t, e) >= 1.0 for t, e in zip(policy.decode(o.tokens, o.mask), ood_examples)],
                                dtype=torch.float32)
            tokens = float(o.lengths.sum().item())
        out["eval/acc_ood"] = hits.mean().item()
        out["eval/gen_tokens"] += tokens
    return out


def pass_ks(n: int) -> list[int]:
    """The K a coverage curve reports from n samples per problem: 1, 2, 4, ... up to n (and at most
    PASS_AT_MAX, the largest declared)."""
    return [1 << i for i in range(min(n, PASS_AT_MAX).bit_length())]


def pass_at_k(hits: torch.Tensor) -> dict[str, float]:
    """`eval/pass@K` for K in pass_ks(n), from correct [problems, n]: the unbiased estimator (Chen et al.
    2021, the one lm-eval and the Codex paper use) of the chance that K of a problem's answers drawn
    without replacement from its n include a correct one, 1 - C(n - c, K) / C(n, K) with c correct,
    averaged over problems. Integer counts and exact binomials: the same figures on any CPU. pass@1 is
    avg@n (eval/avg_k) and, where n is a power of two, pass@n the share of problems with any correct
    answer (eval/pass_k), here in float64."""
    n = hits.shape[1]
    counts = [int(c) for c in hits.sum(1).round().tolist()]
    return {f"eval/pass@{k}": _nanmean([1.0 - math.comb(n - c, k) / math.comb(n, k) for c in counts])
            for k in pass_ks(n)}


@torch.no_grad()
def kl_to_reference(reference: torch.nn.Module, prompts: list[list[int]], gen: Generation, rows: list[int],
                    temperature: float, pad_id: int, micro_batch_size: int) -> dict[str, float]:
    """`eval/kl_k1` and `eval/kl_k3`: the policy's KL to the reference on `rows` of `gen` (its own samples,
    drawn at `temperature`, whose prompt is prompts[row // k]: the caller passes one sample per problem),
    as the training metrics kl/k1 and kl/k3 define it: per token u = log π_ref − log π at that
    temperature, k1 = −u and k3 = e^u − 1 − u, each averaged over every generated token of the rows.
    log π is the sampler's own (gen.logp: the policy's tempered log-probs, computed while decoding),
    log π_ref one scoring pass of the reference: one forward, not two (a second pass of the policy
    cost as much again, 0.36 s of a 2.7 s nano evaluation of 500 problems). At the warm start the two
    are the same weights through other kernels (decode against scoring), so the figure there is
    rounding, |k1| <= 2γ(forward reductions)·(1 + mean |log π|), ~1e-3 at nano in the worst case and
    ~1e-7 measured, not the exact 0 of the warm start's definition."""
    k = len(gen.tokens) // len(prompts)
    u_sum = k3_sum = n_tok = 0.0
    dev = next(reference.parameters()).device
    for i in range(0, len(rows), micro_batch_size):
        part = rows[i:i + micro_batch_size]
        ids, att = left_pad([prompts[r // k] for r in part], pad_id)
        idx = torch.tensor(part, device=gen.mask.device)
        mask = gen.mask.index_select(0, idx)
        width = max(1, int(mask.sum(1).max()))
        tokens, mask = gen.tokens.index_select(0, idx)[:, :width], mask[:, :width].float().cpu()
        logp = gen.logp.index_select(0, idx)[:, :width].float().cpu()
        ref = sequence_logprobs(reference, ids.to(dev), att.to(dev), tokens.to(dev), temperature)[0].float().cpu()
        u = (ref - logp) * mask
        u_sum += float(u.sum())
        k3_sum += float(((u.exp() - 1 - u) * mask).sum())
        n_tok += float(mask.sum())
    return {"eval/kl_k1": -u_sum / n_tok if n_tok else math.nan, "eval/kl_k3": k3_sum / n_tok if n_tok else math.nan}


def _sampled(policy: Policy, backend: RolloutBackend, task, examples: list, prompts: list, k: int, cfg: EvalConfig,
             max_new: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, float, Generation]:
    """k answers per prompt at cfg.temperature: (correct [n, k], well-formed [n, k], tokens generated, the
    generation itself)."""
    rep = [p for p in prompts for _ in range(k)]
    s = backend.generate(rep, SamplingParams(max_new_tokens=max_new, temperature=cfg.temperature, seed=seed))
    texts = policy.decode(s.tokens, s.mask)
    hits = torch.tensor([task.score(t, examples[i // k]) >= 1.0 for i, t in enumerate(texts)], dtype=torch.float32)
    formed = torch.tensor([task.well_formed(t) for t in texts], dtype=torch.bool)
    return hits.view(len(examples), k), formed.view(len(examples), k), float(s.mask.sum().item()), s
