import pytest
import torch

from bench import models
from bench.engine.policy import Policy, sequence_logprobs
from bench.engine.padding import left_pad
from bench.engine.rollout import NativeBackend, SamplingParams
from tests import fp32


@pytest.fixture(scope="module")
def policy():
    tok = models.char_tokenizer()
    return Policy(models.build_model(models.get("nano"), tok, seed=0), tok)


def _prompts(policy, n=24):
    return policy.encode_prompts([f"{i * 37 % 1000}+{i * 11}=" for i in range(n)])


def test_left_pad():
    ids, att = left_pad([[1, 2, 3], [4]], pad_id=0)
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4]] and att.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_same_seed_same_samples_other_seed_differs(policy):
    be = NativeBackend(policy.model, policy.pad_id, policy.eos_id)
    p = _prompts(policy)
    a = be.generate(p, SamplingParams(max_new_tokens=16, seed=5))
    b = be.generate(p, SamplingParams(max_new_tokens=16, seed=5))
    c = be.generate(p, SamplingParams(max_new_tokens=16, seed=6))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.logp, b.logp)
    assert not torch.equal(a.tokens, c.tokens)


def test_logp_matches_full_forward_and_eos_stops(policy):
    be = NativeBackend(policy.model, policy.pad_id, policy.eos_id)
    p = _prompts(policy)
    g = be.generate(p, SamplingParams(max_new_tokens=20, temperature=0.7, seed=1))
    ids, att = left_pad(p, policy.pad_id)
    logp, ent = sequence_logprobs(policy.model, ids, att, g.tokens, temperature=0.7, with_entropy=True)
    m = g.mask.bool()
    assert torch.allclose(logp[m], g.logp[m], atol=fp32.logprob_atol(policy.model.config, ids.shape[1] + 20, logp[m]))
    assert (ent[m] >= 0).all()
    for row, mask, trunc in zip(g.tokens.tolist(), g.mask.tolist(), g.truncated.tolist()):
        n = int(sum(mask))
        assert all(t == policy.pad_id for t in row[n:])  # nothing after the end
        assert (policy.eos_id in row[:n]) == (not trunc)
        if not trunc:
            assert row[n - 1] == policy.eos_id and policy.eos_id not in row[: n - 1]
        else:
            assert n == 20


def test_chunked_generation_equals_greedy_whole(policy):
    p = _prompts(policy, 10)
    whole = NativeBackend(policy.model, policy.pad_id, policy.eos_id).generate(p, SamplingParams(max_new_tokens=12, greedy=True))
    chunked = NativeBackend(policy.model, policy.pad_id, policy.eos_id, chunk_size=3).generate(
        p, SamplingParams(max_new_tokens=12, greedy=True))
    w = min(whole.tokens.shape[1], chunked.tokens.shape[1])
    assert torch.equal(whole.tokens[:, :w], chunked.tokens[:, :w])
    assert torch.equal(whole.mask.sum(1), chunked.mask.sum(1))


def test_left_padding_does_not_change_greedy_output(policy):
    be = NativeBackend(policy.model, policy.pad_id, policy.eos_id)
    p = _prompts(policy, 6)
    batch = be.generate(p, SamplingParams(max_new_tokens=10, greedy=True))
    for i in range(len(p)):
        alone = be.generate([p[i]], SamplingParams(max_new_tokens=10, greedy=True))
        n = int(alone.mask.sum())
        assert batch.tokens[i, :n].tolist() == alone.tokens[0, :n].tolist()


def test_bad_sampling_params():
    with pytest.raises(ValueError, match="max_new_tokens"):
        SamplingParams(max_new_tokens=0)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(max_new_tokens=4, top_p=0)
