"""The KL to the reference at each evaluation (issue 40): on the policy's own sampled answers, the
estimators the training metrics use, rounding alone at the warm start, and the same figure a plain
transformers forward gives."""
import copy
import math

import polars as pl
import torch

from bench.config import EvalConfig
from bench.engine.evaluate import evaluate, kl_to_reference
from bench.engine.padding import left_pad
from bench.engine.rollout import NativeBackend, SamplingParams
from bench.harness import worker
from tests.engine.test_skill_eval import make_cfg, ready
from tests.fp32 import logprob_atol


def test_every_evaluation_logs_the_kl_to_the_reference(bench_cache, tmp_path):
    res = worker.trainer(make_cfg(), root=tmp_path).run()
    assert res.status == "finished", res.reason
    ev = pl.read_parquet(res.path / "evals.parquet").sort("step")
    assert ev.height == 3 and ev["step"][0] == 0
    assert ev["eval/kl_k1"].is_finite().all() and ev["eval/kl_k3"].is_finite().all()
    # per token e^u − 1 − u >= 0; float32 e^u carries a relative error <= 2u near 1 (u = 2⁻²⁴), so
    # one token's k3 can fall below 0 by 4·2⁻²⁴ at most, and so can their mean
    assert (ev["eval/kl_k3"] >= -4 * 2.0 ** -24).all()


def _sample(t, k: int, temperature: float):
    prompts = t.policy.encode_prompts([e.prompt for e in t.test[:5]])
    gen = NativeBackend(t.policy.model, t.policy.pad_id, t.policy.eos_id).generate(
        [p for p in prompts for _ in range(k)], SamplingParams(max_new_tokens=12, temperature=temperature, seed=3))
    return prompts, gen, list(range(0, len(gen.tokens), k))


def test_at_the_warm_start_the_kl_is_rounding_alone(bench_cache, tmp_path):
    """The reference is the warm start: its scoring pass and the sampler's decode compute the same
    log-probs through other kernels, so each token's u differs from 0 by rounding alone."""
    t = ready(make_cfg(), tmp_path)
    k, T = 3, 0.7
    prompts, gen, rows = _sample(t, k, T)
    got = kl_to_reference(t.reference, prompts, gen, rows, T, t.policy.pad_id, micro_batch_size=2)
    idx = torch.tensor(rows)
    logp, mask = gen.logp[idx], gen.mask[idx].bool()
    # each token's |u| within logprob_atol of its log-prob's size (max |log π| of the rows' tokens), so
    # the token mean k1 too; k3 ≈ u²/2 is far smaller still
    atol = logprob_atol(t.policy.model.config, gen.tokens.shape[1] + max(map(len, prompts)), logp[mask])
    assert abs(got["eval/kl_k1"]) <= atol and abs(got["eval/kl_k3"]) <= atol ** 2 + 4 * 2.0 ** -24


def test_no_reference_means_no_kl_columns(bench_cache, tmp_path):
    t = ready(make_cfg(), tmp_path)
    m = evaluate(t.policy, t.task, t.test, EvalConfig(n_examples=6, k=2), seed=0)
    assert "eval/kl_k1" not in m and "eval/kl_k3" not in m
    greedy = evaluate(t.policy, t.task, t.test, EvalConfig(n_examples=6, k=0), seed=0, reference=t.reference)
    assert "eval/kl_k1" not in greedy  # no samples from the policy, no estimate


def test_kl_matches_a_plain_forward_on_the_first_sample_of_each_problem(bench_cache, tmp_path):
    t = ready(make_cfg(), tmp_path)
    policy, ref = t.policy, copy.deepcopy(t.reference)
    with torch.no_grad():  # a reference that differs: every weight scaled, so every token's log-prob moves
        for p in ref.parameters():
            p.mul_(0.9)
    k, T = 3, 0.7
    prompts, gen, rows = _sample(t, k, T)
    got = kl_to_reference(ref, prompts, gen, rows, T, policy.pad_id, micro_batch_size=2)

    def plain(model, r):  # transformers' own forward over prompt + completion, no fusion, no batching
        ids, att = left_pad([prompts[r // k]], policy.pad_id)
        n = int(gen.mask[r].sum())
        comp = gen.tokens[r:r + 1, :n]
        full = torch.cat([ids, comp], 1)
        with torch.no_grad():
            logits = model(input_ids=full, attention_mask=torch.ones_like(full)).logits[0, ids.shape[1] - 1:-1]
        return (logits.float() / T).log_softmax(-1).gather(-1, comp[0, :, None]).squeeze(-1)

    lp_ref, lp_pol = (torch.cat([plain(m, r) for r in rows]) for m in (ref, policy.model))
    u = (lp_ref - lp_pol).double()
    want_k1, want_k3 = float((-u).mean()), float((u.exp() - 1 - u).mean())
    # each log-prob (the sampler's decode, the reference's scoring pass) is within logprob_atol of the
    # plain forward's (another summation order); u is a difference of two, k1 a mean of u, and k3's
    # derivative in u is e^u − 1, at most e^|u|max
    seq = gen.tokens.shape[1] + max(map(len, prompts))
    atol = 2 * logprob_atol(policy.model.config, seq, torch.cat([lp_ref, lp_pol]))
    assert want_k1 > 100 * atol  # the perturbation moved the estimate far above rounding
    assert math.isclose(got["eval/kl_k1"], want_k1, abs_tol=atol)
    assert math.isclose(got["eval/kl_k3"], want_k3, abs_tol=atol * math.exp(float(u.abs().max())))
