"""The KL to the reference at each evaluation (issue 40): on the policy's own sampled answers, the
estimators the training metrics use, exactly 0 at the warm start, and the same figure a plain
transformers forward gives."""
import copy
import math

import polars as pl
import torch

from bench.config import EvalConfig
from bench.engine.evaluate import evaluate, kl_to_reference
from bench.engine.padding import left_pad
from bench.engine.rollout import NativeBackend, SamplingParams
from bench.engine.trainer import Trainer
from tests.engine.test_skill_eval import make_cfg, ready
from tests.fp32 import logprob_atol


def test_every_evaluation_logs_the_kl_to_the_reference_and_the_warm_start_s_is_exactly_0(bench_cache, tmp_path):
    res = Trainer(make_cfg(), root=tmp_path).run()
    assert res.status == "finished", res.reason
    ev = pl.read_parquet(res.path / "evals.parquet").sort("step")
    assert ev.height == 3 and ev["step"][0] == 0
    # the warm start is the reference: the same weights through the same kernels on the same tokens
    assert ev["eval/kl_k1"][0] == 0.0 and ev["eval/kl_k3"][0] == 0.0
    # after the updates the policy has moved: finite, and k3 >= 0 up to rounding
    # (per token e^u − 1 − u >= 0; float32 e^u carries a relative error <= u·2 near 1: 4·2⁻²⁴ bounds
    # one token's negative part, and so the mean's)
    assert ev["eval/kl_k1"].is_finite().all() and (ev["eval/kl_k3"] >= -4 * 2.0 ** -24).all()


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
    prompts = policy.encode_prompts([e.prompt for e in t.test[:5]])
    gen = NativeBackend(policy.model, policy.pad_id, policy.eos_id).generate(
        [p for p in prompts for _ in range(k)], SamplingParams(max_new_tokens=12, temperature=T, seed=3))
    rows = list(range(0, len(gen.tokens), k))
    got = kl_to_reference(policy.model, ref, prompts, gen, rows, T, policy.pad_id, micro_batch_size=2)

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
    assert want_k1 > 1e-3  # the perturbation moved the estimate far above rounding
    # each log-prob is within logprob_atol of the plain forward's (another summation order); u is a
    # difference of two, k1 a mean of u, and k3's derivative in u is e^u − 1, at most e^|u|max
    seq = gen.tokens.shape[1] + max(map(len, prompts))
    atol = 2 * logprob_atol(policy.model.config, seq, torch.cat([lp_ref, lp_pol]))
    assert math.isclose(got["eval/kl_k1"], want_k1, abs_tol=atol)
    assert math.isclose(got["eval/kl_k3"], want_k3, abs_tol=atol * math.exp(float(u.abs().max())))
