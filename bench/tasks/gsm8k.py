"""GSM8K-style word problems from a local JSONL file, scored with math-verify.

Each line is `{"question": ..., "answer": ...}` with the answer ending in `#### N`, the
format of openai/gsm8k, so the real dataset plugs in when a user has it (nothing is
downloaded). The solution is the answer text with GSM8K's calculator annotations
(`<<48/2=24>>`) removed unless `strip_calculator=False`. The test split is a seeded hash
partition of the questions, or a separate file (`test_path`).

The file's content is part of the result, so the task's config records its SHA-256
(`data_sha256`): leave it None to accept the file as it is, or pass the recorded value to
make the task refuse a file that has changed since.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from .answer import extract_answer, parse_int
from .base import (Example, Split, Task, TaskConfig, check_int, check_split, generation_cap,
                   in_holdout)
from .registry import register

_CALCULATOR = re.compile(r"<<[^<>]*>>")
# sympy evaluates powers, factorials and binomials exactly, so math-verify never returns on
# `#### 10^10^10`, and its own timeout is a signal alarm that cannot run off the main thread.
# Gold answers are plain numbers, so no right answer needs these; an answer with one scores 0.
_UNSAFE = re.compile(r"\^|\*\*|!|binom|choose|gamma|\\exp|\\prod|\\sum|\\int|\\lim", re.I)
_NUMBER = re.compile(r"[+-]?(?:\d+|\d{1,3}(?:,\d{3})+)(?:\.\d+)?", re.ASCII)


@dataclass(frozen=True, kw_only=True)
class GSM8KConfig(TaskConfig):
    path: str  # the JSONL file (the train split, and the test split unless test_path is set)
    test_path: str | None = None
    max_steps: int | None = None  # keep problems whose solution has at most this many lines
    strip_calculator: bool = True
    data_sha256: str | None = None  # of path's bytes then test_path's; see the module docstring
    version: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, value in (("path", self.path), ("test_path", self.test_path)):
            if not (isinstance(value, str) and value) and (name == "path" or value is not None):
                raise ValueError(f"{name} must be a file path string, got {value!r}")
        if self.max_steps is not None:
            check_int("max_steps", self.max_steps, lo=1)
        if not isinstance(self.strip_calculator, bool):
            raise ValueError(f"strip_calculator must be a bool, got {self.strip_calculator!r}")


def load_jsonl(path: str, strip_calculator: bool = True) -> list[Example]:
    """Examples from a GSM8K-format file; errors name the file, the line and the problem."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(
            f"gsm8k: dataset file not found: {path} (expected a local JSONL file, "
            'one {"question": ..., "answer": "... #### N"} per line)')
    out = []
    with file.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                out.append(_parse_line(line, f"{path}:{lineno}", lineno, strip_calculator))
    if not out:
        raise ValueError(f"{path}: no examples (the file has no non-empty lines)")
    return out


def _parse_line(line: str, where: str, lineno: int, strip_calculator: bool) -> Example:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: invalid JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object with 'question' and 'answer', "
                         f"got {type(record).__name__}")
    for key in ("question", "answer"):
        if key not in record:
            raise ValueError(f"{where}: missing key {key!r} (keys present: {sorted(record)})")
        if not isinstance(record[key], str) or not record[key].strip():
            raise ValueError(f"{where}: {key!r} must be a non-empty string, got {record[key]!r}")
    answer_text = record["answer"].strip()
    final = extract_answer(answer_text)
    last_line = answer_text.rsplit("\n", 1)[-1]
    if final is None or not last_line.lstrip().startswith("####") or not _NUMBER.fullmatch(final):
        raise ValueError(f"{where}: 'answer' must end with a line '#### <number>', "
                         f"its last line is {last_line[-60:]!r}")
    solution = _CALCULATOR.sub("", answer_text) if strip_calculator else answer_text
    return Example(prompt=record["question"].strip(), answer=final.replace(",", ""),
                   solution=solution, meta={"line": lineno})


def num_steps(example: Example) -> int:
    """Non-empty solution lines before the final `####` line."""
    return sum(1 for line in example.solution.split("\n")[:-1] if line.strip())


@functools.lru_cache(maxsize=65536)
def _parse_gold(answer: str):
    from math_verify import parse

    return parse(answer, parsing_timeout=None)


def math_verify_equal(gold: str, predicted: str) -> bool:
    """math-verify's verdict, with its signal-based timeouts off so it works in any thread.

    What bounds the time instead: answers are short (extract_answer caps them at 100
    characters) and free of the operators that let sympy run unbounded (`_UNSAFE`)."""
    from math_verify import parse, verify

    if _UNSAFE.search(predicted):
        return False

    return bool(verify(_parse_gold(gold), parse(predicted, parsing_timeout=None),
                       timeout_seconds=None))


@register
class GSM8K(Task):
    """GSM8K-format JSONL file(s) given by path (and test_path), scored with math-verify."""

    name = "gsm8k"
    Config = GSM8KConfig
    # Difficulty filters by solution length in lines; the default keeps every problem.
    presets = {"easy": dict(max_steps=2), "medium": dict(max_steps=4), "hard": dict(max_steps=None)}
    default_difficulty = "hard"
    config: GSM8KConfig

    def __init__(self, config: GSM8KConfig):
        super().__init__(config)
        c = config
        examples = load_jsonl(c.path, c.strip_calculator)
        sha = hashlib.sha256(Path(c.path).read_bytes())
        if c.test_path is None:
            held = [in_holdout(c.seed, ex.prompt, c.holdout_frac) for ex in examples]
            train = [ex for ex, h in zip(examples, held) if not h]
            test = [ex for ex, h in zip(examples, held) if h]
        else:
            test = load_jsonl(c.test_path, c.strip_calculator)
            sha.update(Path(c.test_path).read_bytes())
            held_out = {ex.prompt for ex in test}
            train = [ex for ex in examples if ex.prompt not in held_out]
        if c.data_sha256 is not None and c.data_sha256 != sha.hexdigest():
            files = c.path if c.test_path is None else f"{c.path} and {c.test_path}"
            raise ValueError(f"gsm8k: {files} changed: data_sha256 is {sha.hexdigest()}, "
                             f"the config expects {c.data_sha256}")
        self.config = replace(c, data_sha256=sha.hexdigest())
        self._test_prompts = {ex.prompt for ex in test}  # before the max_steps filter
        if c.max_steps is not None:
            train = [ex for ex in train if num_steps(ex) <= c.max_steps]
            test = [ex for ex in test if num_steps(ex) <= c.max_steps]
        for which, exs in (("train", train), ("test", test)):
            if not exs:
                raise ValueError(f"gsm8k: the {which} split of {c.path} is empty "
                                 f"({len(examples)} problems, holdout_frac={c.holdout_frac}, "
                                 f"test_path={c.test_path}, max_steps={c.max_steps})")
        rng = random.Random(f"{self.name}:{c.seed}")
        rng.shuffle(train)
        rng.shuffle(test)
        self._train, self._test = train, test

    def in_test(self, prompt: str) -> bool:
        # The hash partition, or membership of test_path's file.
        return prompt in self._test_prompts

    def split(self, which: Split, n: int | None = None) -> list[Example]:
        check_split(which)
        if n is not None:
            check_int("n", n, lo=0)
        if which == "test":
            if n is not None and n > len(self._test):
                raise ValueError(f"gsm8k: asked for {n} test problems, {self.config.path} "
                                 f"holds out {len(self._test)}")
            return self._test[: min(self.config.test_size, len(self._test)) if n is None else n]
        if n is None or n <= len(self._train):
            return self._train[:n]
        # More than one epoch: repeat, each further epoch in a fresh seeded order.
        out = list(self._train)
        epoch = 1
        while len(out) < n:
            order = list(self._train)
            random.Random(f"{self.name}:{self.config.seed}:epoch{epoch}").shuffle(order)
            out.extend(order[: n - len(out)])
            epoch += 1
        return out

    def score(self, completion: str, example: Example) -> float:
        predicted = extract_answer(completion)
        if predicted is None:
            return 0.0
        gold = parse_int(example.answer)
        if gold is not None and parse_int(predicted) == gold:
            return 1.0  # the common case, without sympy
        try:
            return 1.0 if math_verify_equal(example.answer, predicted) else 0.0
        except Exception:  # math-verify on arbitrary model output: any failure is a wrong answer
            return 0.0

    @property
    def max_new_tokens(self) -> int:
        return generation_cap(max(len(ex.solution) for ex in self._train + self._test))
