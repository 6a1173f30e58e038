"""R replicas as one stack (bench/engine/stacked.py) against R separate models (issue 27).

Each replica must compute what its own model computes through the fused forward and sample what
NativeBackend samples for it, whichever replicas share its stack. The stack runs batched matmuls
(bmm over replicas) where a model runs its own linear layers, and its batch shapes follow its
companions: which GEMM kernel and blocking a shape gets is the BLAS library's choice per CPU, so the
two sum in other orders and values are compared within the float32 reordering bounds of tests/fp32.py
(worst cases from the reductions' lengths, at the values' size); only what runs the same kernels on
the same shapes in one process is compared bitwise."""
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from bench import models
from bench.engine.policy import Policy, sequence_logprobs
from bench.engine.padding import left_pad
from bench.engine.rollout import NativeBackend, SamplingParams
from bench.engine import stacked
from bench.engine.stacked import StackedLM
from tests import fp32

TOK = models.char_tokenizer()


def _models(scale: str, seeds) -> list[torch.nn.Module]:
    return [models.build_model(models.get(scale), TOK, seed=s) for s in seeds]


def _prompts(r: int, digits: int, n: int = 4, group: int = 3) -> list[list[int]]:
    """n addition prompts whose first operand has `digits` digits and second 2 (so the prompt width
    is set by `digits`), each `group` times in a row, as the trainer samples them."""
    ps = Policy(None, TOK).encode_prompts([f"{10 ** (digits - 1) + (i * 37 + r * 11) % 10 ** (digits - 1)}+"
                                           f"{10 + (i * 7 + r) % 90}=" for i in range(n)])
    return [p for p in ps for _ in range(group)]


def _batch(prompts: list[list[list[int]]], T: int, seed: int = 0):
    """Stacked (R, B, P) prompt ids and mask, and (R, B, T) completions ending in EOS at random
    columns (some never), pad after it: the layout sequence_logprobs scores."""
    R, B = len(prompts), len(prompts[0])
    ids, att = left_pad([p for ps in prompts for p in ps], TOK.pad_token_id)
    gen = torch.Generator().manual_seed(seed)
    comp = torch.randint(4, 60, (R, B, T), generator=gen)
    ends = torch.randint(0, T + 3, (R, B), generator=gen)  # >= T: no EOS (a truncated row)
    for r in range(R):
        for b in range(B):
            if ends[r, b] < T:
                comp[r, b, ends[r, b]] = TOK.eos_token_id
                comp[r, b, ends[r, b] + 1:] = TOK.pad_token_id
    return ids.view(R, B, -1), att.view(R, B, -1), comp


def _stop_token(model, prompts, L) -> int:
    """A random model rarely emits its EOS: stop on the token it samples most (a mix of finished and
    truncated rows, so dropping finished rows is exercised)."""
    free = NativeBackend(model, TOK.pad_token_id, -1).generate(prompts, SamplingParams(L, seed=1))
    return int(free.tokens.flatten().mode().values)


@pytest.mark.parametrize("scale", ["nano", "micro"])  # micro: 4 query heads over 2 KV heads (GQA)
def test_logprobs_match_each_models_forward(scale):
    ms = _models(scale, [0, 1, 2])
    prompts = [_prompts(0, 3), _prompts(1, 2), _prompts(2, 5)]  # widths differ: left padding to the widest
    ids, att, comp = _batch(prompts, T=9)
    stack = StackedLM.from_models(ms)
    logp, ent = stack.logprobs(ids, att, comp, temperature=0.7, with_entropy=True)
    for r, m in enumerate(ms):
        want, went = sequence_logprobs(m, ids[r], att[r], comp[r], 0.7, with_entropy=True)
        seq_len = ids.shape[-1] + comp.shape[-1]
        tol = fp32.logprob_atol(m.config, seq_len, want)
        assert torch.allclose(logp[r], want, atol=tol, rtol=0), ((logp[r] - want).abs().max(), tol)
        assert torch.allclose(ent[r], went, atol=fp32.logprob_atol(m.config, seq_len, went), rtol=0)
        # and the transformers forward itself, on every real token
        seq, full = torch.cat([ids[r], comp[r]], 1), torch.cat([att[r], torch.ones_like(comp[r])], 1)
        logits = m(input_ids=seq, attention_mask=full, position_ids=(full.cumsum(-1) - 1).clamp(min=0)).logits
        hf = (logits[:, ids.shape[-1] - 1:-1] / 0.7).log_softmax(-1).gather(-1, comp[r][..., None]).squeeze(-1)
        is_eos = (comp[r] == TOK.eos_token_id).long()
        real = (is_eos.cumsum(1) - is_eos) == 0
        assert torch.allclose(logp[r][real], hf[real], atol=tol, rtol=0), (logp[r][real] - hf[real]).abs().max()
        assert (logp[r][~real] == 0).all()


def test_replicas_in_several_passes_match_one_pass(monkeypatch):
    """Past PASS_BYTES the replicas run k at a time over slices of the stacked leaves, and a caller
    may run a forward and backward per group of replicas (`replicas=`): the same values and
    gradients. A pass over k replicas is a bmm of batch k, whose kernel (and so summation order) the
    BLAS library may pick by batch size: equal within the reordering bounds, not bitwise."""
    ms = _models("nano", [0, 1, 2])
    ids, att, comp = _batch([_prompts(r, 2 + r) for r in range(3)], T=9)
    stack = StackedLM.from_models(ms)
    out = {}
    for budget in (stacked.PASS_BYTES, 1, 500_000):  # all at once; one per pass; two, then one (~240 kB each)
        monkeypatch.setattr(stacked, "PASS_BYTES", budget)
        for p in stack.parameters():
            p.grad = None
        logp, ent = stack.logprobs(ids, att, comp, with_entropy=True)
        (logp * torch.tensor([1.0, -2.0, 0.5])[:, None, None]).sum().backward()
        out[budget] = (logp, ent, [p.grad.clone() for p in stack.parameters()])
    for p in stack.parameters():
        p.grad = None
    logp, ent = [], []
    for sl in (slice(0, 2), slice(2, 3)):
        lp, en = stack.logprobs(ids[sl], att[sl], comp[sl], with_entropy=True, replicas=sl)
        (lp * torch.tensor([1.0, -2.0, 0.5])[sl, None, None]).sum().backward()
        logp.append(lp)
        ent.append(en)
    out["groups"] = (torch.cat(logp), torch.cat(ent), [p.grad.clone() for p in stack.parameters()])
    first, *rest = out.values()
    cfg, seq_len = ms[0].config, ids.shape[-1] + comp.shape[-1]
    tokens = ids.shape[1] * seq_len  # one replica's positions: its weights' gradients sum over them
    for other in rest:
        assert torch.allclose(first[0], other[0], atol=fp32.logprob_atol(cfg, seq_len, first[0]), rtol=0)
        assert torch.allclose(first[1], other[1], atol=fp32.logprob_atol(cfg, seq_len, first[1]), rtol=0)
        for a, b in zip(first[2], other[2]):
            for r in range(len(ms)):  # each replica's slice at its own scale
                assert torch.allclose(a[r], b[r], atol=fp32.grad_atol(cfg, seq_len, tokens, a[r]), rtol=0)


def test_gradients_reach_each_replica_alone():
    """d(Σ_r c_r · Σ logp_r)/dθ_r is c_r times model r's own gradient, and a loss on one replica
    leaves the others' gradients at exactly zero."""
    ms = _models("nano", [0, 1, 2])
    ids, att, comp = _batch([_prompts(r, 3) for r in range(3)], T=9)
    stack = StackedLM.from_models(ms)
    logp, _ = stack.logprobs(ids, att, comp)
    (logp * torch.tensor([1.0, -2.0, 0.5])[:, None, None]).sum().backward()
    seq_len = ids.shape[-1] + comp.shape[-1]
    for r, (m, c) in enumerate(zip(ms, [1.0, -2.0, 0.5])):
        (sequence_logprobs(m, ids[r], att[r], comp[r])[0].sum() * c).backward()
        got = stack.replica_grads(r)
        for name, p in m.named_parameters():
            tol = fp32.grad_atol(m.config, seq_len, ids.shape[1] * seq_len, p.grad)
            assert torch.allclose(got[name], p.grad, atol=tol, rtol=0), (r, name, (got[name] - p.grad).abs().max(), tol)
    for p in stack.parameters():
        p.grad = None
    stack.logprobs(ids, att, comp)[0][1].sum().backward()
    assert all(bool((p.grad[[0, 2]] == 0).all()) and bool(p.grad[1].abs().sum() > 0) for p in stack.parameters())


def _differing_rows(got, want, config, prompt_width: int) -> tuple[int, float]:
    """Rows whose samples differ between two Generations of the same prompts and seed, and the
    largest log-prob gap on the rows that agree. Rounding of the logits can move a CDF edge past a
    draw and flip a token (and the rest of its row). Every other row must agree exactly, and its
    log-probs within the reordering bound (the stack's batched kernels, its prompts' padding and its
    live rows' count all reorder the sums)."""
    w = max(got.tokens.shape[1], want.tokens.shape[1])

    def pad(t, v):
        return torch.nn.functional.pad(t, (0, w - t.shape[1]), value=v)

    same = (pad(got.tokens, TOK.pad_token_id) == pad(want.tokens, TOK.pad_token_id)).all(1)
    assert torch.equal(pad(got.mask, 0.0)[same], pad(want.mask, 0.0)[same])
    assert torch.equal(got.truncated[same], want.truncated[same])
    a, b = pad(got.logp, 0.0)[same], pad(want.logp, 0.0)[same]
    tol = fp32.logprob_atol(config, prompt_width + w, b) if b.numel() else 0.0
    assert torch.allclose(a, b, atol=tol, rtol=0), ((a - b).abs().max(), tol)
    return int((~same).sum()), float((a - b).abs().max()) if b.numel() else 0.0


def _flips_allowed(tokens: int, gap: float) -> int:
    """How many rows may differ by a flipped token. A flip needs the uniform draw to fall between a
    CDF edge and its rounded position; every edge moves by at most Σ_v p_v·|Δlog p_v| ≲ the largest
    log-prob gap (measured in this process on the rows that agree), so the expected number of flips
    is at most tokens·gap, and flips are rare independent events (Poisson): allow 3 + 4× that."""
    return 3 + int(4 * tokens * gap)


@pytest.mark.parametrize("scale", ["nano", "micro"])
def test_sampler_reproduces_native_backend_per_replica(scale):
    ms = _models(scale, [0, 1, 2])
    # replica 2: 3 distinct prompts to the others' 8 (its prefill rows padded to 8)
    prompts = [_prompts(0, 3, n=8), _prompts(1, 4, n=8), _prompts(2, 2, n=3, group=8)]
    L = 48
    stop = _stop_token(ms[0], prompts[0], L)
    stack = StackedLM.from_models(ms)
    seeds = [11, 12, 13]
    rows = differ = tokens = 0
    gap = 0.0
    for params in (SamplingParams(L, temperature=1.0), SamplingParams(L, temperature=0.8, top_p=0.9),
                   SamplingParams(L, greedy=True)):
        gens = stack.generate(prompts, params, seeds, TOK.pad_token_id, stop)
        kept = stack.generate(prompts, params, seeds, TOK.pad_token_id, stop, drop_finished=False)
        again = stack.generate(prompts, params, seeds, TOK.pad_token_id, stop)  # over the kept cache buffers
        assert all(torch.equal(a.tokens, b.tokens) and torch.equal(a.logp, b.logp) for a, b in zip(gens, again))
        for r, m in enumerate(ms):
            want = NativeBackend(m, TOK.pad_token_id, stop).generate(
                prompts[r], SamplingParams(L, params.temperature, params.top_p, params.greedy, seed=seeds[r]))
            width = max(len(p) for p in prompts[r])
            for got in (gens[r], kept[r]):
                d, g = _differing_rows(got, want, m.config, width)
                differ, gap = differ + d, max(gap, g)
                rows += len(want.tokens)
                tokens += int(want.mask.sum())
        if not params.greedy:  # both kinds of row, or dropping was not exercised
            assert all(g.truncated.any() and not g.truncated.all() for g in gens)
    assert differ <= _flips_allowed(tokens, gap), f"{differ} of {rows} rows differ (largest gap {gap:.2g})"


def test_replica_outputs_do_not_depend_on_companions():
    """Replica (model 0, seed 100) stacked alone, with companions of the same prompt width, first or
    last: the same samples and log-probs, also once its live rows fall under MIN_ROWS (6 rows, long
    enough for most to finish). Which matmul kernel a batch shape takes is the BLAS library's choice
    per CPU, and companions with wider prompts pad its prompts further left (the prefill's attention
    sums more keys), so log-probs agree within the reordering bound and samples up to the rare flips
    that rounding allows (`_flips_allowed`)."""
    ms = _models("nano", range(6))
    target, L = _prompts(0, 3, n=2), 200
    stop = _stop_token(ms[0], _prompts(0, 3, n=8), 64)
    params = SamplingParams(L)

    def run(idx, prompts):
        gens = StackedLM.from_models([ms[i] for i in idx]).generate(prompts, params, [100 + i for i in idx],
                                                                    TOK.pad_token_id, stop)
        return gens[idx.index(0)]

    alone = run([0], [target])
    assert int((~alone.truncated).sum()) >= 4  # its live rows fell to 2 or fewer before the end
    tokens = int(alone.mask.sum())
    for idx, prompts in [([0, 1, 2], [target, _prompts(1, 1, n=2), _prompts(2, 3, n=2)]),
                         ([3, 4, 0], [_prompts(3, 2, n=2), _prompts(4, 3, n=2), target]),
                         ([5, 0], [_prompts(5, 9, n=2), target])]:
        differ, gap = _differing_rows(run(idx, prompts), alone, ms[0].config, max(len(p) for ps in prompts for p in ps))
        assert differ <= min(_flips_allowed(tokens, gap), len(target) - 1), (idx, differ, gap)

    target = _prompts(0, 3, n=8)
    # the training forward: companions with other prompts of the same width and more real tokens, or
    # longer completions (padding it to T = 14: more attention keys), give its log-probs within the bound
    ids, att, comp = _batch([target], T=10)
    (ref,), _ = StackedLM.from_models(ms[:1]).logprobs(ids, att, comp)
    stack = StackedLM.from_models(ms[1:2] + ms[:1] + ms[2:3])
    for T in (10, 14):
        ids2, att2, comp2 = _batch([_prompts(1, 2, n=8), target, _prompts(2, 3, n=8)], T=T, seed=5)
        comp2[0] = torch.randint(4, 60, (len(target), T))  # no EOS (or anywhere): more real tokens than replica 1
        ids2[1], att2[1] = ids[0], att[0]
        comp2[1] = torch.nn.functional.pad(comp[0], (0, T - 10), value=TOK.pad_token_id)
        got, _ = stack.logprobs(ids2, att2, comp2)
        assert torch.allclose(got[1, :, :10], ref, atol=fp32.logprob_atol(ms[0].config, ids2.shape[-1] + T, ref), rtol=0)


def test_state_dict_round_trip_and_optimizer_step():
    """replica_state_dict loads into a transformers model (strict) bitwise; after a clipped AdamW
    step on the stack, each replica equals its model stepped alone with the same gradient. The same
    gradient, not the model's own: the first Adam step moves a weight by lr·g/(|g| + ε), about
    lr·sign(g), so a rounding-level difference in a near-zero gradient moves it by up to 2·lr
    (test_gradients_reach_each_replica_alone compares the gradients themselves)."""
    ms = _models("nano", [0, 1, 2])
    stack = StackedLM.from_models(ms)
    for r, m in enumerate(ms):
        fresh = models.build_model(models.get("nano"), TOK, seed=9)
        fresh.load_state_dict(stack.replica_state_dict(r))
        assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), m.state_dict().values()))
    ids, att, comp = _batch([_prompts(r, 3) for r in range(3)], T=9)
    opt = torch.optim.AdamW(stack.parameters(), lr=1e-2, weight_decay=0.1)
    logp, _ = stack.logprobs(ids, att, comp)
    (-logp.sum(dim=(1, 2)) * torch.tensor([1.0, 10.0, 1e-4])).sum().backward()  # one clipped, one not
    grads = [{k: g.clone() for k, g in stack.replica_grads(r).items()} for r in range(len(ms))]
    norms = stack.clip_grad_norm_(1.0)
    opt.step()
    # the norm sums squares per tensor, then over tensors, in the stack's order: ≤ γ(n) relative on
    # the sum of squares (positive terms), half that on its root
    params = list(ms[0].parameters())
    norm_rtol = fp32.gamma(max(p.numel() for p in params) + len(params))
    for r, m in enumerate(ms):
        mopt = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1)
        for name, p in m.named_parameters():
            p.grad = grads[r][name]
        norm = torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        assert torch.allclose(norms[r], norm, rtol=norm_rtol, atol=0), (norms[r], norm)
        before = {name: p.detach().clone() for name, p in m.named_parameters()}
        mopt.step()
        got = stack.replica_state_dict(r)
        assert sum(int((p != before[name]).sum()) for name, p in m.named_parameters()) > sum(p.numel() for p in params) // 2
        for name, p in m.named_parameters():
            tol = fp32.adamw_step_atol(before[name], lr=1e-2, clip_rtol=2 * norm_rtol)
            assert ((got[name] - p).abs() <= tol).all(), (r, name, (got[name] - p).abs().max())
    # and back: a model loaded into a slot is what that slot computes
    stack.load_replica(1, ms[2])
    want = sequence_logprobs(ms[2], ids[1], att[1], comp[1])[0]
    atol = fp32.logprob_atol(ms[2].config, ids.shape[-1] + comp.shape[-1], want)
    assert torch.allclose(stack.logprobs(ids, att, comp)[0][1], want, atol=atol, rtol=0)


def test_untied_llama_with_biases_round_trips():
    """An untied lm_head and q/k/v/o biases (Llama's attention_bias) take their own leaves."""
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, attention_bias=True, tie_word_embeddings=False, eos_token_id=1)
    ms = []
    for s in (0, 1):
        torch.manual_seed(s)
        ms.append(LlamaForCausalLM(cfg))
    stack = StackedLM.from_models(ms)
    assert not stack.tied and "0.bo" in stack.params and "lm_head" in stack.params
    ids = torch.randint(2, 50, (2, 3, 5))
    comp = torch.randint(2, 50, (2, 3, 6))
    logp, _ = stack.logprobs(ids, torch.ones_like(ids), comp)
    for r, m in enumerate(ms):
        want = sequence_logprobs(m, ids[r], torch.ones_like(ids[r]), comp[r])[0]
        assert torch.allclose(logp[r], want, atol=fp32.logprob_atol(cfg, 11, want), rtol=0)
        sd = stack.replica_state_dict(r)
        assert sd.keys() == m.state_dict().keys()
        assert all(torch.equal(sd[k], v) for k, v in m.state_dict().items())


def test_bad_inputs_raise_clear_errors():
    nano, micro = _models("nano", [0])[0], _models("micro", [0])[0]
    with pytest.raises(ValueError, match="replica 1 does not match the stack: embed"):
        StackedLM.from_models([nano, micro])
    gelu = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=1, hidden_act="gelu"))
    with pytest.raises(ValueError, match="activation 'gelu'"):
        StackedLM.from_models([gelu])
    with pytest.raises(ValueError, match="at least one model"):
        StackedLM.from_models([])
    stack = StackedLM.from_models([nano, nano])
    with pytest.raises(ValueError, match="same number"):
        stack.generate([_prompts(0, 2), _prompts(0, 2)[:-1]], SamplingParams(4), [0, 1], 0, 1)
    with pytest.raises(ValueError, match="2 prompt lists and 2 seeds"):
        stack.generate([_prompts(0, 2)], SamplingParams(4), [0], 0, 1)
    ids, att, comp = _batch([_prompts(0, 2)] * 3, T=4)
    with pytest.raises(ValueError, match=r"must be \(R=2, B, ...\)"):
        stack.logprobs(ids, att, comp)
