"""The vLLM rollout backend against the native one, run by `make test-vllm` in .venv-vllm and skipped
where vLLM is not installed. (The folder is not tests/vllm: under pytest that would shadow the vllm
package.) One trainer with rollout=vllm serves the module: after each of its optimizer steps, vLLM's
greedy rollouts on the pushed weights must be the native backend's tokens."""
import math
import os
import subprocess
import sys

import pytest

pytest.importorskip("vllm")

import polars as pl
import torch

import algorithms
from bench import results
from bench.config import Budget, EvalSchedule, RolloutConfig, RunConfig, TrainConfig
from bench.engine.policy import sequence_logprobs
from bench.engine.padding import left_pad
from bench.engine.rollout import NativeBackend, SamplingParams
from bench.harness import worker
from bench.engine.vllm_backend import VLLMBackend
from bench.warmstart import WarmStartConfig

WS = WarmStartConfig(steps=150, eval_examples=20)
SMALL = ["--set", "train.prompts_per_step=4", "--set", "train.group_size=4", "--set", "train.micro_batch_size=16",
         "--set", "eval.every=0.5", "--set", "eval.n_examples=8", "--set", "eval.k=2", "--set", "warmstart.steps=150",
         "--set", "warmstart.eval_examples=20", "--set", "task_params.difficulty=easy"]


@pytest.fixture(scope="module")
def trainer(bench_cache, tmp_path_factory):
    cfg = RunConfig(recipe=algorithms.get("grpo"), task="addition", task_params={"difficulty": "easy"}, scale="nano",
                    budget=Budget.parse("3steps"), train=TrainConfig(prompts_per_step=8, group_size=4, lr=1e-3),
                    eval=EvalSchedule(every=1.0, n_examples=8, k=0), warmstart=WS, rollout=RolloutConfig(backend="vllm"), threads=1)
    t = worker.trainer(cfg, root=tmp_path_factory.mktemp("results"))
    t._setup()
    t._step = 0
    return t


def _prompts(t, n=48):
    return t.policy.encode_prompts([e.prompt for e in t.test[:n]])


def _greedy_pair(t, prompts):
    p = SamplingParams(t.max_new, greedy=True)
    return t.backend.generate(prompts, p), NativeBackend(t.policy.model, t.policy.pad_id, t.policy.eos_id).generate(prompts, p)


def test_greedy_rollouts_token_identical_after_each_optimizer_step(trainer):
    t = trainer
    prompts = _prompts(t)
    before = t.policy.model.model.embed_tokens.weight.detach().clone()
    for step in range(1, 4):
        v, n = _greedy_pair(t, prompts)
        assert torch.equal(v.tokens, n.tokens) and torch.equal(v.mask, n.mask), f"step {step}"
        assert torch.equal(v.truncated, n.truncated)
        assert (~v.truncated).any()  # some completions end with EOS: mask and padding are exercised
        m = v.mask.bool()
        assert torch.allclose(v.logp[m], n.logp[m], atol=1e-4)
        t._step = step
        row = t.step(step)  # rollouts from vLLM, an update, then the new weights pushed into vLLM
        assert math.isfinite(row["rollout/logp_mismatch"]) and row["rollout/logp_mismatch"] < 1e-3
    assert not torch.equal(before, t.policy.model.model.embed_tokens.weight)  # the weights did change
    v, n = _greedy_pair(t, prompts)
    assert torch.equal(v.tokens, n.tokens)


def test_sampling_seeded_and_logp_is_the_tempered_policy(trainer):
    t = trainer
    prompts = _prompts(t, 16)
    rep = [p for p in prompts for _ in range(4)]
    a = t.backend.generate(rep, SamplingParams(t.max_new, temperature=0.7, seed=11))
    b = t.backend.generate(rep, SamplingParams(t.max_new, temperature=0.7, seed=11))
    c = t.backend.generate(rep, SamplingParams(t.max_new, temperature=0.7, seed=12))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.logp, b.logp)
    assert not torch.equal(a.tokens, c.tokens)
    assert len({tuple(r) for r in a.tokens[:4].tolist()}) > 1 or len({tuple(r) for r in a.tokens.tolist()}) > 8
    ids, att = left_pad(rep, t.policy.pad_id)
    logp, _ = sequence_logprobs(t.policy.model, ids, att, a.tokens, temperature=0.7)
    m = a.mask.bool()
    assert (logp[m] - a.logp[m]).abs().max() < 1e-4  # processed_logprobs = log_softmax(logits / T)


def test_recomputed_logp_old_mismatch_and_truncated_is_weights(trainer):
    t = trainer
    batch, _ = t._collect(99)
    roll = batch.rollouts
    fake = roll.replace(logp_old=roll.logp_old - 0.5 * roll.m)  # as if vLLM were less sure: ratio e^0.5 > cap
    cfg = t.cfg
    t.cfg = cfg.replace(train=cfg.train.replace(tis_cap=1.5))
    flops = t.ledger.flops
    batch.rollouts = fake
    try:
        out = t._frozen_passes(batch)  # backend.behaviour_logprobs recomputes; the trainer logs the gap, TIS
    finally:
        t.cfg = cfg
    m = roll.mask.bool()
    assert torch.allclose(out.logp_old[m], roll.logp_old[m], atol=1e-4)  # the training model's, not vLLM's
    assert torch.allclose(batch.tis[m], torch.full_like(batch.tis[m], 1.5))
    assert (batch.tis[~m] == 0).all()
    assert abs(batch.logp_mismatch.item() - 0.5) < 1e-3
    assert t.ledger.flops > flops  # the extra forward pass is charged


def _bench(*args, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "bench.cli", "run", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_bench_run_vllm_writes_the_same_tables_as_native(bench_cache, tmp_path):
    common = ["--recipe", "grpo", "--task", "addition", "--scale", "nano", "--budget", "2steps", "--threads", "1",
              "--quiet", "--results", str(tmp_path), *SMALL]
    out = {}
    for rollout, extra in (("native", []), ("vllm", ["--set", "train.tis_cap=2"])):
        r = _bench(*common, "--rollout", rollout, *extra, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        run_id = r.stdout.split()[1].rstrip(":")
        out[rollout] = results.run_dir(tmp_path, run_id)
    for name in ("steps.parquet", "evals.parquet"):
        a, b = pl.read_parquet(out["native"] / name), pl.read_parquet(out["vllm"] / name)
        assert a.schema == b.schema and a.height == b.height
    sn, sv = pl.read_parquet(out["native"] / "steps.parquet"), pl.read_parquet(out["vllm"] / "steps.parquet")
    assert sn["rollout/logp_mismatch"].is_nan().all()
    assert sv["rollout/logp_mismatch"].is_finite().all() and (sv["rollout/logp_mismatch"] < 1e-3).all()
    ev = pl.read_parquet(out["vllm"] / "evals.parquet")
    assert ev["eval/acc_greedy"].is_finite().all()


def test_backend_standalone_matches_native_on_a_fresh_model(bench_cache):
    from bench import models
    from bench.engine.policy import Policy

    tok = models.char_tokenizer()
    pol = Policy(models.build_model(models.get("nano"), tok, seed=3).eval(), tok)
    vb = VLLMBackend(pol, seed=0)
    prompts = pol.encode_prompts([f"{i}+{2 * i}=" for i in range(20)])
    p = SamplingParams(12, greedy=True)
    v = vb.generate(prompts, p)
    n = NativeBackend(pol.model, pol.pad_id, pol.eos_id).generate(prompts, p)
    assert torch.equal(v.tokens, n.tokens) and v.truncated.all()
    vb.close()


def test_bench_eval_through_lm_eval_vllm_equals_bench_greedy(bench_cache, tmp_path):
    from bench import lmeval, models, tasks
    from bench.warmstart import warm_start

    task = tasks.get("addition", difficulty="easy")
    ws = warm_start(task, models.get("nano"), WS)
    rec = lmeval.evaluate(str(ws.path), root=tmp_path, backend="vllm", log_samples=True)
    (name,) = rec["tasks"]
    assert rec["results"][name]["exact_match,none"] == ws.accuracy
    policy = ws.load()
    examples = task.split("test")[: WS.eval_examples]
    g = NativeBackend(policy.model, policy.pad_id, policy.eos_id).generate(
        policy.encode_prompts([e.prompt for e in examples]), SamplingParams(task.max_new_tokens, greedy=True))
    samples = sorted(rec["samples"][name], key=lambda s: s["doc_id"])
    assert [s["resps"][0][0] for s in samples] == policy.decode(g.tokens, g.mask)
