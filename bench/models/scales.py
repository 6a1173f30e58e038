"""Model scales: tiny Qwen2-style architectures built from a config, or a local HF directory.

One dial for size: the registry below. Tiny scales are fp32, tied embeddings, sdpa attention,
intermediate = 4·hidden, head_dim 32. Parameter counts are with the char tokenizer (vocab 263).
"""
from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase, Qwen2Config, Qwen2ForCausalLM

from algorithms.errors import ConfigError, MissingInput
from bench.models.tokenization import CHAT_TEMPLATE, bpe_tokenizer, char_tokenizer


@dataclass(frozen=True)
class Scale:
    """A model scale. `path` set means a local Hugging Face model directory (other fields unused)."""

    name: str
    hidden: int = 0
    layers: int = 0
    heads: int = 0
    kv_heads: int = 0
    tokenizer: Literal["char", "bpe"] = "char"
    bpe_vocab: int = 400
    max_positions: int = 512
    path: str | None = None

    def __post_init__(self) -> None:
        if self.path is None:
            for f in ("hidden", "layers", "heads", "kv_heads"):
                if getattr(self, f) <= 0:
                    raise ValueError(f"scale {self.name!r}: {f} must be > 0, got {getattr(self, f)}")
            if self.hidden % self.heads or self.heads % self.kv_heads:
                raise ValueError(f"scale {self.name!r}: hidden % heads and heads % kv_heads must be 0")
        if self.tokenizer not in ("char", "bpe"):
            raise ValueError(f"scale {self.name!r}: tokenizer must be 'char' or 'bpe', got {self.tokenizer!r}")

    @property
    def is_local(self) -> bool:
        return self.path is not None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


_SCALES: dict[str, Scale] = {}


def register(scale: Scale) -> Scale:
    if scale.name in _SCALES:
        raise ValueError(f"scale {scale.name!r} is already registered")
    _SCALES[scale.name] = scale
    return scale


register(Scale("pico", hidden=32, layers=2, heads=1, kv_heads=1))  # 0.042 M: the bottom of math-scales' 28x span
register(Scale("nano", hidden=64, layers=2, heads=2, kv_heads=1))  # 0.14 M
register(Scale("micro", hidden=128, layers=2, heads=4, kv_heads=2))  # 0.53 M
register(Scale("mini", hidden=192, layers=2, heads=6, kv_heads=3))  # 1.16 M: 28x pico at a quarter of small's cost
register(Scale("small", hidden=256, layers=4, heads=8, kv_heads=4))  # 4.0 M
register(Scale("medium", hidden=512, layers=8, heads=16, kv_heads=8))  # 31.6 M
register(Scale("large", hidden=768, layers=12, heads=24, kv_heads=8))  # 104 M, for GPUs
register(Scale("micro-bpe", hidden=128, layers=2, heads=4, kv_heads=2, tokenizer="bpe"))  # 0.53 M, BPE vocab ≤ 400 (learned on the task)


def names() -> list[str]:
    return list(_SCALES)


def get(name: str) -> Scale:
    """A registered scale by name, or a local HF model directory given by path."""
    if name in _SCALES:
        return _SCALES[name]
    if os.sep in name or name.startswith(".") or Path(name).is_dir():
        p = Path(name).expanduser()
        if not (p / "config.json").is_file():
            raise MissingInput(
                f"scale {name!r}: not a registered scale and {p} is not a Hugging Face model directory "
                f"(no config.json). Registered scales: {', '.join(_SCALES)}"
            )
        return Scale(name=p.name, path=str(p.resolve()))
    close = difflib.get_close_matches(name, list(_SCALES), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown scale {name!r}. Valid scales: {', '.join(_SCALES)}, or a local model directory.{hint}")


def build_tokenizer(scale: Scale, corpus: list[str] | None = None) -> PreTrainedTokenizerBase:
    if scale.is_local:
        tok = AutoTokenizer.from_pretrained(scale.path)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        if not tok.chat_template:
            tok.chat_template = CHAT_TEMPLATE
        tok.padding_side = "left"
        return tok
    if scale.tokenizer == "bpe":
        if not corpus:
            raise ValueError(f"scale {scale.name!r} uses a BPE tokenizer, which needs a training corpus")
        return bpe_tokenizer(corpus, scale.bpe_vocab)
    return char_tokenizer()


def build_model(scale: Scale, tokenizer: PreTrainedTokenizerBase, seed: int = 0) -> torch.nn.Module:
    """A freshly initialised model (seeded), or the local checkpoint for a path scale."""
    if scale.is_local:
        return AutoModelForCausalLM.from_pretrained(scale.path, dtype=torch.float32)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=scale.hidden,
        intermediate_size=4 * scale.hidden,
        num_hidden_layers=scale.layers,
        num_attention_heads=scale.heads,
        num_key_value_heads=scale.kv_heads,
        max_position_embeddings=scale.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        attn_implementation="sdpa",
        dtype="float32",
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    return model


def n_params(model: torch.nn.Module, non_embedding: bool = False) -> int:
    """Parameter count; non_embedding drops the (tied) embedding matrix, as in FLOP formulas."""
    total = sum(p.numel() for p in model.parameters())
    if non_embedding:
        total -= model.get_input_embeddings().weight.numel()
    return total
