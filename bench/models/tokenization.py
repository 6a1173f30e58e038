"""Tokenizers built in code (no hub): a char-level one and a small byte-level BPE.

Both are `Qwen2Tokenizer`s — byte-level BPE with Qwen2's own pre-tokenizer — so that
`AutoTokenizer.from_pretrained` on a saved checkpoint (whose config says `qwen2`) rebuilds exactly
the same pipeline. (transformers 5 rebuilds a model type's tokenizer pipeline in Python from the
vocab and merges alone: a custom pre-tokenizer saved in tokenizer.json would be silently replaced,
which is how a char-level WordLevel tokenizer ends up dropping every space and newline once
reloaded.) The char-level tokenizer is the byte alphabet with no merges: one token per ASCII
character. Both carry pad/eos/bos/unk, chat-role markers as single special tokens, left padding
and a chat template, so transformers, lm-eval and vLLM load a saved checkpoint unchanged.
"""
from __future__ import annotations

import json
from collections.abc import Iterable

from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import Qwen2Tokenizer
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]
ROLES = ["<|system|>", "<|user|>", "<|assistant|>"]
# `<|user|>347+85=\n<|assistant|>` — the generation prompt ends at the assistant marker, and the
# completion (worked solution + EOS) follows directly.
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] }}"
    "{% if m['role'] != 'assistant' %}{{ '\n' }}{% else %}{{ eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def _qwen2(vocab: dict[str, int], merges: list) -> Qwen2Tokenizer:
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges, unk_token="<unk>", bos_token="<bos>", eos_token="<eos>",
                         pad_token="<pad>")
    tok.add_tokens([AddedToken(r, special=True, normalized=False) for r in ROLES], special_tokens=True)
    tok.chat_template = CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def _byte_alphabet() -> list[str]:
    return sorted(pre_tokenizers.ByteLevel.alphabet(), key=lambda c: (not (" " < c <= "~"), c))


def char_tokenizer() -> Qwen2Tokenizer:
    """One token per byte (every printable ASCII character is one token): 263 ids with specials."""
    vocab = {t: i for i, t in enumerate(SPECIALS + ROLES)}
    for c in _byte_alphabet():
        vocab.setdefault(c, len(vocab))
    return _qwen2(vocab, [])


def bpe_tokenizer(corpus: Iterable[str], vocab_size: int = 400) -> Qwen2Tokenizer:
    """Byte-level BPE trained on `corpus` (e.g. a task's prompts and worked solutions), with
    Qwen2's normalizer and pre-tokenizer so a reloaded checkpoint tokenizes identically.

    vocab_size must exceed 256 + specials, or no merges are learned.
    """
    floor = 256 + len(SPECIALS) + len(ROLES)
    if vocab_size <= floor:
        raise ValueError(f"bpe vocab_size must be > {floor} (byte alphabet + specials), got {vocab_size}")
    tk = Tokenizer(models.BPE())
    tk.normalizer = normalizers.NFC()
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS + ROLES,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(corpus, trainer)
    model = json.loads(tk.to_str())["model"]  # the trained vocab and merges, handed to Qwen2Tokenizer
    return _qwen2(model["vocab"], [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]])
