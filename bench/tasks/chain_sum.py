"""Chains of + and - from reasoning-gym's `chain_sum`, with running partial sums.

    prompt    12+7-30=
    solution  12+7=19
              19-30=-11
              #### -11

reasoning-gym generates the numbers and operators (its own prompt, a sentence of 70+
characters, is too long for a char-level model, so we rebuild a compact one from the
expression it returns). Scoring is our integer verifier; the tests check that it agrees with
reasoning-gym's scorer on gold answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from bench import errors
from .answer import numeric_score
from .base import (Example, GeneratedTask, TaskConfig, check_int, check_range, derived_seed,
                   generation_cap)
from .registry import register


@dataclass(frozen=True, kw_only=True)
class ChainSumConfig(TaskConfig):
    min_terms: int = 2
    max_terms: int = 4
    min_digits: int = 1  # all terms of one problem share a digit count, uniform in this range
    max_digits: int = 2
    allow_negation: bool = False  # terms may be negative: 5+-3=
    version: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("min_terms", self.min_terms, lo=2)
        check_int("max_terms", self.max_terms, lo=2, hi=20)
        check_range("min_terms", self.min_terms, "max_terms", self.max_terms)
        check_int("min_digits", self.min_digits, lo=1)
        check_int("max_digits", self.max_digits, lo=1, hi=12)
        check_range("min_digits", self.min_digits, "max_digits", self.max_digits)
        if not isinstance(self.allow_negation, bool):
            raise errors.ConfigError(f"allow_negation must be a bool, got {self.allow_negation!r}")


def worked_solution(terms: list[int], ops: list[str]) -> tuple[str, int]:
    """Running sums for terms[0] ops[0] terms[1] ...; returns (solution, result)."""
    total, lines = terms[0], []
    for op, term in zip(ops, terms[1:]):
        new = total + term if op == "+" else total - term
        lines.append(f"{total}{op}{term}={new}")
        total = new
    lines.append(f"#### {total}")
    return "\n".join(lines), total


def from_expression(expression: str) -> Example:
    """An example from reasoning-gym's expression, tokens separated by spaces: `12 + 7 - 30`."""
    tokens = expression.split()
    terms, ops = [int(t) for t in tokens[0::2]], tokens[1::2]
    if len(terms) != len(ops) + 1 or any(op not in "+-" for op in ops):
        raise ValueError(f"unexpected chain_sum expression from reasoning-gym: {expression!r}")
    solution, total = worked_solution(terms, ops)
    return Example(prompt="".join(tokens) + "=", answer=str(total), solution=solution)


@register
class ChainSum(GeneratedTask):
    """reasoning-gym chain_sum: min_terms..max_terms numbers of min_digits..max_digits digits."""

    name = "chain_sum"
    warm_start_steps = {"nano": 1500, "micro": 800, "*": 800}  # Task.warm_start_steps
    Config = ChainSumConfig
    presets = {
        "easy": dict(min_terms=2, max_terms=3, min_digits=1, max_digits=1),
        "medium": dict(min_terms=2, max_terms=4, min_digits=1, max_digits=2),
        "hard": dict(min_terms=3, max_terms=6, min_digits=1, max_digits=3),
    }
    config: ChainSumConfig
    step_pattern = re.compile(r"-?\d+[+-]-?\d+=-?\d+")  # one running sum: 12+7=19, 19-30=-11

    def harder(self) -> dict:
        # one more term in every chain: one more running sum than the warm start ever wrote
        c = self.config
        return dict(min_terms=min(c.min_terms + 1, 20), max_terms=min(c.max_terms + 1, 20))

    def rg_dataset(self, salt: str = ""):
        """The reasoning-gym dataset behind this task (item i of it is stream item i)."""
        import reasoning_gym  # 1.6 s import: only when examples are needed

        c = self.config
        return reasoning_gym.create_dataset(
            "chain_sum", size=10**9, seed=derived_seed(self.name, c.seed, *([salt] if salt else [])),
            min_terms=c.min_terms, max_terms=c.max_terms, min_digits=c.min_digits,
            max_digits=c.max_digits, allow_negation=c.allow_negation)

    def stream(self, salt: str = "") -> Iterator[Example]:
        ds = self.rg_dataset(salt)
        for i in range(len(ds)):
            item = ds[i]
            ex = from_expression(item["metadata"]["expression"])
            if ex.answer != item["answer"]:
                raise AssertionError(f"chain_sum: our result {ex.answer} != reasoning-gym's "
                                     f"{item['answer']} for {item['metadata']['expression']!r}")
            yield Example(ex.prompt, ex.answer, ex.solution, meta={"rg_index": i})

    def score(self, completion: str, example: Example) -> float:
        return numeric_score(completion, example.answer)

    @property
    def max_new_tokens(self) -> int:
        # Longest: every term the largest magnitude (negative when allowed), all additions,
        # so every partial sum is as long as it can be.
        c = self.config
        big = 10**c.max_digits - 1
        term = -big if c.allow_negation else big
        solution, _ = worked_solution([term] * c.max_terms, ["+"] * (c.max_terms - 1))
        return generation_cap(len(solution))
