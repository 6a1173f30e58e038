"""Model scales (tiny Qwen2 architectures built in code, or local HF directories) and tokenizers."""
from bench.models.scales import Scale, build_model, build_tokenizer, get, n_params, names, register
from bench.models.tokenization import bpe_tokenizer, char_tokenizer

__all__ = ["Scale", "build_model", "build_tokenizer", "bpe_tokenizer", "char_tokenizer", "get", "n_params", "names", "register"]
