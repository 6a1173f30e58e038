"""Tokenizers built in code (no hub): a char-level one and a small byte-level BPE.

Both are `PreTrainedTokenizerFast` with pad/eos/bos/unk, chat-role markers as single special
tokens, left padding, and a chat template, so `save_pretrained` output loads unchanged in
transformers, lm-eval and vLLM.
"""
from __future__ import annotations

import string
from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]
ROLES = ["<|system|>", "<|user|>", "<|assistant|>"]
# `<|user|>347+85=\n<|assistant|>` — the generation prompt ends at the assistant marker, and the
# completion (worked solution + EOS) follows directly.
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] }}"
    "{% if m['role'] != 'assistant' %}{{ '\n' }}{% else %}{{ eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def _wrap(tk: Tokenizer) -> PreTrainedTokenizerFast:
    tk.add_special_tokens(SPECIALS + ROLES)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>", unk_token="<unk>"
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def char_tokenizer() -> PreTrainedTokenizerFast:
    """One token per printable ASCII character (107 tokens with the specials)."""
    vocab = {t: i for i, t in enumerate(SPECIALS + ROLES)}
    for c in string.printable:
        vocab.setdefault(c, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tk.decoder = decoders.Fuse()
    return _wrap(tk)


def bpe_tokenizer(corpus: Iterable[str], vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """Byte-level BPE trained on `corpus` (e.g. a task's prompts and worked solutions).

    vocab_size must exceed 256 + specials, or no merges are learned.
    """
    floor = 256 + len(SPECIALS) + len(ROLES)
    if vocab_size <= floor:
        raise ValueError(f"bpe vocab_size must be > {floor} (byte alphabet + specials), got {vocab_size}")
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS + ROLES,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(corpus, trainer)
    return _wrap(tk)
