"""Tasks backed by a dataset: a file, a `save_to_disk` directory or a hub name, plus a few
fields saying which columns hold the problem and its answer and how answers are extracted.

A dataset task is data, not code: `gsm8k` and `math` below are two sets of defaults for the same
class, and any field can be changed from a suite or the command line:

    bench run --task gsm8k --data train.jsonl ...                       # GSM8K's format
    bench run --task math --data math.parquet --set task_params.extractor=boxed ...
    [task_params.math]
    path = "data/MATH"              # a save_to_disk directory (DatasetDict: split picks one)
    question = "problem"            # the column holding the problem
    answer = "solution"             # the column holding the worked solution (or a bare answer)
    extractor = "boxed"             # "####" | "boxed" | "last_number"

Answers. The answer column holds either a worked solution whose final answer the extractor
finds (GSM8K's `... #### 72`, MATH's `... \\boxed{\\frac12}`) or a bare final answer (`72`);
`solution` names a separate worked-solution column when there is one (MATH-500). The SFT target
is the worked solution, else the bare answer written in the extractor's format. A completion
scores 1 when the extractor finds an answer in it that equals the gold one: as integers, else
by math-verify (with sympy bombs refused, see `math_verify_equal`).

Splits, as for every task: a seeded hash partition of the questions, or a separate test set
(`test_path`, or `test_split` of a directory or hub dataset). The data's SHA-256 is recorded in
the config (`data_sha256`); pass a recorded value to refuse data that has changed since.
"""
from __future__ import annotations

import functools
import hashlib
import random
import re
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from bench import errors
from . import files
from .answer import EXTRACTORS, FORMATS, MAX_ANSWER_CHARS, parse_int
from .base import Example, Split, Task, TaskConfig, check_int, check_split, generation_cap, in_holdout
from .registry import register

_CALCULATOR = re.compile(r"<<[^<>]*>>")
_NUMBER = re.compile(r"[+-]?(?:\d+|\d{1,3}(?:,\d{3})+)(?:\.\d+)?", re.ASCII)
# sympy evaluates powers, factorials and binomials exactly, so math-verify never returns on
# `10^10^10`, and its own timeout is a signal alarm that cannot run off the main thread. A
# predicted answer may use each of these at most as often as the gold answer does (`x^2` may be
# answered with `x^2`, not with `9^9^9`), and never with an exponent of 4+ digits.
_UNSAFE = re.compile(r"\^|\*\*|!|binom|choose|gamma|\\exp|\\prod|\\sum|\\int|\\lim", re.I)
_BIG_EXPONENT = re.compile(r"(\^|\*\*)\s*\{?\s*[+-]?\d{4,}")


@dataclass(frozen=True, kw_only=True)
class DataTaskConfig(TaskConfig):
    path: str  # a .jsonl/.json/.parquet/.csv file, a save_to_disk directory, or a hub name
    split: str | None = None  # of a directory or hub dataset (default "train")
    test_path: str | None = None  # a separate test set (file, directory or hub name)
    test_split: str | None = None  # the test split of `path` (directory / hub), or of test_path
    question: str = "question"  # column holding the problem
    answer: str = "answer"  # column holding the worked solution or the bare final answer
    solution: str | None = None  # column holding a worked solution, when separate from `answer`
    extractor: str = "####"  # how final answers are found: "####", "boxed" or "last_number"
    numeric: bool = False  # gold answers must be numbers (GSM8K)
    strip_calculator: bool = False  # drop GSM8K's `<<48/2=24>>` calculator annotations
    max_steps: int | None = None  # keep problems whose solution has at most this many lines of work
    prompt_template: str = "{question}"  # the user turn; `{question}` is replaced by the problem
    system_prompt: str | None = None  # a system turn before it (models whose chat template has one)
    chat_template: str | None = None  # a Jinja chat template replacing the tokenizer's own
    data_sha256: str | None = None  # of the data read; see the module docstring
    version: int = field(default=2, init=False)  # 2: datasets-backed loader, extractors

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("path", "question", "answer"):
            if not (isinstance(getattr(self, name), str) and getattr(self, name)):
                raise errors.ConfigError(f"{name} must be a non-empty string, got {getattr(self, name)!r}")
        for name in ("split", "test_path", "test_split", "solution", "system_prompt", "chat_template"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and value):
                raise errors.ConfigError(f"{name} must be a non-empty string or null, got {value!r}")
        if self.extractor not in EXTRACTORS:
            raise errors.ConfigError(f"unknown extractor {self.extractor!r}; choose one of: {', '.join(EXTRACTORS)}")
        if self.max_steps is not None:
            check_int("max_steps", self.max_steps, lo=1)
        for name in ("numeric", "strip_calculator"):
            if not isinstance(getattr(self, name), bool):
                raise errors.ConfigError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if not isinstance(self.prompt_template, str) or "{question}" not in self.prompt_template:
            raise errors.ConfigError(f"prompt_template must contain {{question}}, got {self.prompt_template!r}")


class DataTask(Task):
    """A task read from a dataset; subclasses made by `data_task` only set defaults."""

    Config = DataTaskConfig
    defaults: ClassVar[dict[str, Any]] = {}
    config: DataTaskConfig

    def __init__(self, config: DataTaskConfig):
        super().__init__(config)
        c = config
        table = files.load(c.path, c.split, self._columns())
        examples = self._examples(table)
        sha = table.sha256
        if c.test_path is not None or c.test_split is not None:
            test_table = files.load(c.test_path or c.path, c.test_split, self._columns())
            test = self._examples(test_table)
            sha = f"{sha}+{test_table.sha256}"
            held_out = {ex.prompt for ex in test}
            train = [ex for ex in examples if ex.prompt not in held_out]
        else:
            held = [in_holdout(c.seed, ex.prompt, c.holdout_frac) for ex in examples]
            train = [ex for ex, h in zip(examples, held) if not h]
            test = [ex for ex, h in zip(examples, held) if h]
            sha = hashlib.sha256(sha.encode()).hexdigest()
        if c.data_sha256 is not None and c.data_sha256 != sha:
            raise errors.InputError(f"{self.name}: {c.path} changed: data_sha256 is {sha}, the config expects {c.data_sha256}")
        self.config = replace(c, data_sha256=sha)
        self._test_prompts = {ex.prompt for ex in test}  # before the max_steps filter
        if c.max_steps is not None:
            train = [ex for ex in train if num_steps(ex) <= c.max_steps]
            test = [ex for ex in test if num_steps(ex) <= c.max_steps]
        for which, exs in (("train", train), ("test", test)):
            if not exs:
                raise errors.InputError(f"{self.name}: the {which} split of {c.path} is empty "
                                        f"({len(examples)} problems, holdout_frac={c.holdout_frac}, "
                                        f"test_path={c.test_path}, max_steps={c.max_steps})")
        rng = random.Random(f"{self.name}:{c.seed}")
        rng.shuffle(train)
        rng.shuffle(test)
        self._train, self._test = train, test

    # ------------------------------------------------------------------ reading rows
    def _columns(self) -> list[str]:
        c = self.config
        return [col for col in (c.question, c.answer, c.solution) if col is not None]

    def _examples(self, table: files.Table) -> list[Example]:
        return [self._example(row, table.where(i), i) for i, row in enumerate(table.rows)]

    def _example(self, row: dict, where: str, index: int) -> Example:
        c = self.config
        answer_text = row[c.answer].strip()
        final = self.extract(answer_text)
        last_line = answer_text.rsplit("\n", 1)[-1]
        worked = final is not None
        if c.extractor == "####" and worked and not last_line.lstrip().startswith("####"):
            final = None  # GSM8K's format: the marker line is the last one
        if final is None and not worked and "\n" not in answer_text and len(answer_text) <= MAX_ANSWER_CHARS:
            final = answer_text  # a bare final answer
        if final is not None and c.numeric and not _NUMBER.fullmatch(final):
            final = None
        if final is None:
            need = "#### <number>" if c.extractor == "####" and c.numeric else FORMATS[c.extractor].format("<answer>")
            raise errors.InputError(f"{where}: {c.answer!r} must end with a line '{need}' (extractor {c.extractor!r}) "
                                    f"or be a bare {'number' if c.numeric else 'answer'}, its last line is {last_line[-60:]!r}")
        if c.solution is not None:
            solution = row[c.solution].strip()
        elif worked:
            solution = answer_text
        else:
            solution = FORMATS[c.extractor].format(final)
        if c.strip_calculator:
            solution = _CALCULATOR.sub("", solution)
        prompt = c.prompt_template.replace("{question}", row[c.question].strip())
        line = int(where.rsplit(":", 1)[1]) if re.search(r":\d+$", where) else index + 1
        return Example(prompt=prompt, answer=final.replace(",", "") if c.numeric else final,
                       solution=solution, meta={"line": line})

    # ------------------------------------------------------------------ the Task interface
    def extract(self, completion: str) -> str | None:
        return EXTRACTORS[self.config.extractor](completion)

    def well_formed(self, completion: str) -> bool:
        # free-form working: well-formed means the extractor finds a final answer
        return self.extract(completion) is not None

    def in_test(self, prompt: str) -> bool:
        return prompt in self._test_prompts  # the hash partition, or membership of the test set

    def split(self, which: Split, n: int | None = None) -> list[Example]:
        check_split(which)
        if n is not None:
            check_int("n", n, lo=0)
        if which == "test":
            if n is not None and n > len(self._test):
                raise errors.InputError(f"{self.name}: asked for {n} test problems, {self.config.path} "
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
        predicted = self.extract(completion)
        if predicted is None:
            return 0.0
        gold = parse_int(example.answer)
        if gold is not None and parse_int(predicted) == gold:
            return 1.0  # the common case, without sympy
        try:
            boxed = self.config.extractor == "boxed"
            return 1.0 if math_verify_equal(example.answer, predicted, boxed=boxed) else 0.0
        except Exception:  # noqa: BLE001 (math-verify on arbitrary model output: any failure is a wrong answer)
            return 0.0

    @property
    def max_new_tokens(self) -> int:
        return generation_cap(max(len(ex.solution) for ex in self._train + self._test))


def num_steps(example: Example) -> int:
    """Non-empty solution lines before the last one (which states the final answer)."""
    lines = [line for line in example.solution.split("\n") if line.strip()]
    return max(0, len(lines) - 1)


@functools.lru_cache(maxsize=65536)
def _parse(text: str):
    from math_verify import parse

    return parse(text, parsing_timeout=None)


def math_verify_equal(gold: str, predicted: str, boxed: bool = False) -> bool:
    """math-verify's verdict, with its signal-based timeouts off so it works in any thread.

    What bounds the time instead: answers are short (extractors cap them at 100 characters) and
    use no more of the operators that let sympy run unbounded than the gold answer does."""
    from math_verify import verify

    if _BIG_EXPONENT.search(predicted):
        return False
    for op in set(_UNSAFE.findall(predicted)):
        if predicted.count(op) > gold.count(op):
            return False
    wrap = (lambda s: f"\\boxed{{{s}}}") if boxed else (lambda s: s)
    return bool(verify(_parse(wrap(gold)), _parse(wrap(predicted)), timeout_seconds=None))


def data_task(name: str, presets: dict[str, dict[str, Any]], default_difficulty: str, doc: str,
              **defaults: Any) -> type[DataTask]:
    """Register `name` as a dataset task whose parameters default to `defaults` (any of them
    may still be overridden by task_params); `presets` are its difficulties."""
    cls = type(name, (DataTask,), {
        "name": name, "__doc__": doc, "defaults": defaults, "default_difficulty": default_difficulty,
        "presets": {d: {**defaults, **p} for d, p in presets.items()},
    })
    return register(cls)


# Difficulty filters by solution length in lines; the default keeps every problem.
_BY_LENGTH = {"easy": dict(max_steps=2), "medium": dict(max_steps=4), "hard": dict(max_steps=None)}

data_task("gsm8k", _BY_LENGTH, "hard",
          "GSM8K-format word problems (question, answer ending in `#### N`), scored with math-verify.",
          question="question", answer="answer", extractor="####", numeric=True, strip_calculator=True)
data_task("math", _BY_LENGTH, "hard",
          "MATH-format problems (problem, solution with a final `\\boxed{...}`), scored with math-verify.",
          question="problem", answer="solution", extractor="boxed")
