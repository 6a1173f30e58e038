import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from bench import models


@pytest.mark.parametrize("text", ["12+30=42", "347+85=\n7+5=12 c1\n#### 432", "  spaces\tand\ttabs ", "(3*4)-5/2"])
def test_char_tokenizer_round_trip(text):
    tok = models.char_tokenizer()
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)  # one token per character
    assert tok.decode(ids) == text


def test_bpe_tokenizer_round_trip_and_merges(tmp_path):
    corpus = [f"{a}+{b}=\n#### {a + b}" for a in range(60) for b in range(0, 300, 7)]
    tok = models.bpe_tokenizer(corpus, vocab_size=320)
    text = "347+85=\n7+5=12 c1\n#### 432"
    tok.save_pretrained(tmp_path)
    models.build_model(models.get("micro-bpe"), tok).save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path)(text, add_special_tokens=False)["input_ids"] == \
        tok(text, add_special_tokens=False)["input_ids"]
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert len(ids) < len(text)  # merges were learned
    with pytest.raises(ValueError, match="vocab_size"):
        models.bpe_tokenizer(corpus, vocab_size=100)


def test_chat_template_and_specials():
    tok = models.char_tokenizer()
    rendered = tok.apply_chat_template([{"role": "user", "content": "2+3="}], add_generation_prompt=True, tokenize=False)
    assert rendered == "<|user|>2+3=\n<|assistant|>"
    ids = tok(rendered, add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|user|>") and ids[-1] == tok.convert_tokens_to_ids("<|assistant|>")
    assert tok.pad_token_id != tok.eos_token_id and tok.padding_side == "left"


def test_scale_sizes_increase_and_span_range():
    tok = models.char_tokenizer()
    counts = [models.n_params(models.build_model(models.get(n), tok)) for n in ["nano", "micro", "small", "medium"]]
    assert counts == sorted(counts)
    assert 0.08e6 < counts[0] < 0.2e6 and 20e6 < counts[-1] < 40e6


def test_unknown_scale_suggests():
    with pytest.raises(ValueError, match="Did you mean 'micro'") as e:
        models.get("mikro")
    assert "nano" in str(e.value)
    with pytest.raises(FileNotFoundError, match="config.json"):
        models.get("./no/such/model")


def test_checkpoint_round_trip_identical_logits(tmp_path):
    tok = models.char_tokenizer()
    model = models.build_model(models.get("nano"), tok, seed=3)
    x = torch.tensor([tok("<|user|>12+30=\n<|assistant|>#### 42", add_special_tokens=False)["input_ids"]])
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)
    tok2 = AutoTokenizer.from_pretrained(tmp_path)
    assert torch.equal(model(input_ids=x).logits, loaded(input_ids=x).logits)
    assert tok2.decode(x[0].tolist()) == tok.decode(x[0].tolist())
    # AutoTokenizer beside a qwen2 config rebuilds the same pipeline: spaces and newlines survive
    text = "<|user|>347+85=\n<|assistant|>7+5=12 c1\n#### 432<eos>"
    assert tok2(text, add_special_tokens=False)["input_ids"] == tok(text, add_special_tokens=False)["input_ids"]
    assert tok2.decode(tok2(text, add_special_tokens=False)["input_ids"]) == text
    assert tok2.apply_chat_template([{"role": "user", "content": "2+3="}], add_generation_prompt=True,
                                    tokenize=False) == "<|user|>2+3=\n<|assistant|>"
    # a local directory works as a scale through the same code path
    scale = models.get(str(tmp_path))
    assert scale.is_local
    again = models.build_model(scale, models.build_tokenizer(scale))
    assert torch.equal(again(input_ids=x).logits, loaded(input_ids=x).logits)


def test_model_init_is_seeded():
    tok = models.char_tokenizer()
    a = models.build_model(models.get("nano"), tok, seed=1)
    b = models.build_model(models.get("nano"), tok, seed=1)
    c = models.build_model(models.get("nano"), tok, seed=2)
    pa, pb, pc = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)
