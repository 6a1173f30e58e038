"""Multi-digit addition with a digit-by-digit scratchpad.

    prompt    347+85=
    solution  7+5=12
              4+8+1=13
              3+0+1=4
              #### 432

One line per column, right to left: the two digits (0 where a number has run out), `+1`
when the column below carried, and the column sum. The answer's digits are the last digit
of each sum read bottom-up, after the whole sum of the top line. Every line has the same
shape, so a tiny model can learn it; carries lengthen the text (2 characters each) and so
does the length of the longer operand, which gives response length room to drift under RL.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .answer import numeric_score
from .base import Example, GeneratedTask, TaskConfig, check_int, check_range, generation_cap
from .registry import register


@dataclass(frozen=True, kw_only=True)
class AdditionConfig(TaskConfig):
    min_digits: int = 2  # each operand's digit count is uniform in [min_digits, max_digits]
    max_digits: int = 4
    version: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("min_digits", self.min_digits, lo=1)
        check_int("max_digits", self.max_digits, lo=1, hi=18)
        check_range("min_digits", self.min_digits, "max_digits", self.max_digits)


def worked_solution(a: int, b: int) -> str:
    """The scratchpad and final line for a + b (a, b >= 0)."""
    da, db = str(a)[::-1], str(b)[::-1]
    lines, carry = [], 0
    for i in range(max(len(da), len(db))):
        x = int(da[i]) if i < len(da) else 0
        y = int(db[i]) if i < len(db) else 0
        total = x + y + carry
        lines.append(f"{x}+{y}{'+1' if carry else ''}={total}")
        carry = total // 10
    lines.append(f"#### {a + b}")
    return "\n".join(lines)


def example(a: int, b: int) -> Example:
    return Example(prompt=f"{a}+{b}=", answer=str(a + b), solution=worked_solution(a, b))


@register
class Addition(GeneratedTask):
    """a+b with operands of min_digits..max_digits digits; scratchpad with carries."""

    name = "addition"
    warm_start_steps = {"nano": 800, "micro": 450, "*": 450}  # Task.warm_start_steps
    Config = AdditionConfig
    presets = {
        "easy": dict(min_digits=1, max_digits=2),
        "medium": dict(min_digits=2, max_digits=4),
        "hard": dict(min_digits=3, max_digits=6),
    }
    config: AdditionConfig
    step_pattern = re.compile(r"\d\+\d(?:\+1)?=\d+")  # one column: 7+5=12, 4+8+1=13

    def stream(self, salt: str = "") -> Iterator[Example]:
        rng = random.Random(f"{self.name}:{self.config.seed}" + (f":{salt}" if salt else ""))
        while True:
            yield example(self._operand(rng), self._operand(rng))

    def _operand(self, rng: random.Random) -> int:
        digits = rng.randint(self.config.min_digits, self.config.max_digits)
        return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)

    def harder(self) -> dict:
        # every operand one digit longer: sums of a length the warm start never saw, and the shorter
        # ones it did
        return dict(min_digits=min(self.config.min_digits + 1, 18), max_digits=min(self.config.max_digits + 1, 18))

    def score(self, completion: str, example: Example) -> float:
        return numeric_score(completion, example.answer)

    @property
    def max_new_tokens(self) -> int:
        # The longest solution: both operands all nines, so every column after the first carries.
        largest = 10**self.config.max_digits - 1
        return generation_cap(len(worked_solution(largest, largest)))
