"""The hand-fused forward (bench/engine/fused.py) against the transformers forward it replaces."""
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from bench import models
from bench.engine.fused import FusedLM, full_mask, unsupported
from bench.engine.policy import Policy, sequence_logprobs
from bench.engine.padding import left_pad
from bench.engine.rollout import NativeBackend, SamplingParams
from tests import fp32


def _policy(scale: str) -> Policy:
    tok = models.char_tokenizer()
    return Policy(models.build_model(models.get(scale), tok, seed=3), tok)


def _batch(policy, n=7):
    prompts = policy.encode_prompts([f"{i * 91 % 1000}+{i * 7}=" for i in range(n)])
    ids, att = left_pad(prompts, policy.pad_id)
    comp = torch.randint(4, 60, (n, 9), generator=torch.Generator().manual_seed(0))
    return prompts, ids, att, comp


@pytest.mark.parametrize("scale", ["nano", "micro"])  # micro: 4 query heads over 2 KV heads (GQA)
def test_fused_logits_match_transformers(scale):
    policy = _policy(scale)
    _, ids, att, comp = _batch(policy)
    seq = torch.cat([ids, comp], 1)
    full = torch.cat([att, torch.ones_like(comp)], 1)
    pos = (full.cumsum(-1) - 1).clamp(min=0)
    ref = policy.model(input_ids=seq, attention_mask=full, position_ids=pos).logits
    lm = FusedLM(policy.model)
    got = lm.forward(seq, lm.rope(pos), full_mask(full))
    real = full.bool()  # padding positions' logits are never read
    tol = fp32.logprob_atol(policy.model.config, seq.shape[1], ref[real])  # logits: one forward's reductions
    assert torch.allclose(got[real], ref[real], atol=tol, rtol=0), (got[real] - ref[real]).abs().max()
    assert torch.isfinite(got).all()  # a padding query sees itself: no all-masked NaN rows


@pytest.mark.parametrize("scale", ["nano", "micro"])
def test_decode_steps_match_the_full_forward(scale):
    """FusedLM.decode over the static cache (rotary from rope_table, mask as a bias) gives the
    full forward's logits at every generated position, left padding included."""
    policy = _policy(scale)
    _, ids, att, comp = _batch(policy)
    lm = FusedLM(policy.model)
    B, P, T = ids.shape[0], ids.shape[1], comp.shape[1]
    seq = torch.cat([ids, comp], 1)
    full = torch.cat([att, torch.ones_like(comp)], 1)
    pos = (full.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        ref = lm.forward(seq, lm.rope(pos), full_mask(full))
        _, kvs = lm.forward(ids, lm.rope(pos[:, :P]), full_mask(att), keep=1, want_kv=True)
        cache = torch.zeros((len(kvs), 2, B, lm.Hkv, P + T, lm.d))
        for i, (k, v) in enumerate(kvs):
            cache[i, 0, :, :, :P], cache[i, 1, :, :, :P] = k, v
        bias = torch.zeros(full.shape).masked_fill_(~full.bool(), float("-inf"))[:, None, None]
        bias = bias.expand(B, lm.Hkv, 1, P + T).contiguous()
        cos_t, sin_t = lm.rope_table(int(pos.max()) + 1)
        for t in range(T - 1):
            p = pos[:, P + t]
            got = lm.decode(comp[:, t], cos_t[p][:, None], sin_t[p][:, None], bias, cache, start=P + t)
            tol = fp32.logprob_atol(policy.model.config, P + T, ref[:, P + t])
            assert torch.allclose(got, ref[:, P + t], atol=tol, rtol=0), (t, (got - ref[:, P + t]).abs().max())


def test_fused_gradients_match_transformers():
    a, b = _policy("micro"), _policy("micro")
    _, ids, att, comp = _batch(a)
    (la, _), (lb, _) = (sequence_logprobs(p.model, ids, att, comp) for p in (a, b))
    assert torch.allclose(la, lb)
    la.sum().backward()
    seq = torch.cat([ids, comp], 1)
    full = torch.cat([att, torch.ones_like(comp)], 1)
    pos = (full.cumsum(-1) - 1).clamp(min=0)
    logits = b.model(input_ids=seq, attention_mask=full, position_ids=pos).logits[:, ids.shape[1] - 1:-1]
    logits.log_softmax(-1).gather(-1, comp[..., None]).sum().backward()
    for (name, pa), pb in zip(a.model.named_parameters(), b.model.parameters()):
        tol = fp32.grad_atol(a.model.config, seq.shape[1], seq.numel(), pb.grad)
        assert torch.allclose(pa.grad, pb.grad, atol=tol, rtol=0), name


def test_unsupported_models_fall_back_to_transformers():
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, hidden_act="gelu")
    model = LlamaForCausalLM(cfg)
    assert "activation" in unsupported(model)
    assert FusedLM.of(model) is None and not NativeBackend(model, 0, 1).fused
    assert unsupported(_policy("nano").model) is None


def test_fused_and_transformers_rollouts_agree_greedily():
    policy = _policy("micro")
    prompts, *_ = _batch(policy)
    rep = [p for p in prompts for _ in range(3)]  # repeated prompts: prefilled once, shared
    params = SamplingParams(max_new_tokens=12, greedy=True)
    fused = NativeBackend(policy.model, policy.pad_id, policy.eos_id).generate(rep, params)
    hf = NativeBackend(policy.model, policy.pad_id, policy.eos_id, fused=False).generate(rep, params)
    assert torch.equal(fused.tokens, hf.tokens) and torch.equal(fused.mask, hf.mask)
    assert torch.allclose(fused.logp, hf.logp, atol=fp32.logprob_atol(policy.model.config, 12 + max(map(len, rep)), hf.logp))


def test_no_drop_mode_gives_the_same_samples_as_dropping_rows():
    """The accelerator loop (finished rows stay, checked every sync_every tokens) samples the same
    tokens as the CPU loop that drops finished rows: each row's draws never depend on the others."""
    policy = _policy("nano")
    prompts, *_ = _batch(policy, 10)
    params = SamplingParams(max_new_tokens=24, temperature=1.3, seed=4)
    # a random model rarely emits its EOS: stop instead on the token it samples most
    free = NativeBackend(policy.model, policy.pad_id, -1).generate(prompts, params)
    stop = int(free.tokens.flatten().mode().values)
    a = NativeBackend(policy.model, policy.pad_id, stop).generate(prompts, params)
    assert a.truncated.any() and not a.truncated.all()  # both kinds of row, or the test is empty
    b = NativeBackend(policy.model, policy.pad_id, stop, sync_every=3, drop_finished=False).generate(prompts, params)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.mask, b.mask) and torch.equal(a.truncated, b.truncated)
    assert torch.allclose(a.logp, b.logp, atol=fp32.logprob_atol(policy.model.config, 24 + max(map(len, prompts)), b.logp))


def test_prefix_sharing_and_padding_skip_keep_every_real_logprob():
    """Rows sharing a prompt and rows padded after EOS: the shared, padding-free forward gives the
    full forward's log-prob on every real token (up to and including EOS)."""
    policy = _policy("micro")
    prompts, *_ = _batch(policy, 4)
    rep = [p for p in prompts for _ in range(3)]
    ids, att = left_pad(rep, policy.pad_id)
    comp = torch.randint(4, 60, (len(rep), 9), generator=torch.Generator().manual_seed(1))
    eos = policy.eos_id
    ends = [2, 8, 4, 0, 5, 8, 1, 3, 6, 7, 2, 4]  # EOS column of each row (8: the last column)
    mask = torch.zeros_like(comp, dtype=torch.float)
    for r, e in enumerate(ends):
        comp[r, e], mask[r, :e + 1] = eos, 1.0
        comp[r, e + 1:] = policy.pad_id
    assert policy.model.config.eos_token_id == eos
    got, _ = sequence_logprobs(policy.model, ids, att, comp)
    seq = torch.cat([ids, comp], 1)
    full = torch.cat([att, torch.ones_like(comp)], 1)
    pos = (full.cumsum(-1) - 1).clamp(min=0)
    ref = policy.model(input_ids=seq, attention_mask=full, position_ids=pos).logits[:, ids.shape[1] - 1:-1]
    want = ref.log_softmax(-1).gather(-1, comp[..., None]).squeeze(-1)
    m = mask.bool()
    tol = fp32.logprob_atol(policy.model.config, seq.shape[1], want[m])
    assert torch.allclose(got[m], want[m], atol=tol, rtol=0), (got[m] - want[m]).abs().max()
