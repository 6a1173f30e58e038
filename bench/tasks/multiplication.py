"""Long multiplication by a one-digit number, with a digit-by-digit scratchpad.

    prompt    347*6=
    solution  7*6=42
              4*6+4=28
              3*6+2=20
              #### 2082

One line per digit of the multiplicand, right to left: the digit times the multiplier, `+c`
when the line below carried c (1..8), and the line's value. The answer's digits are the last
digit of each value read bottom-up, after the whole value of the top line: the same reading as
`addition`'s columns. Every line has one shape and needs only a times-table fact and a small
sum, so a tiny model can learn it; carries (2 characters each) and the multiplicand's length
make the text longer. The multiplier stays one digit at every difficulty (a two-digit one would
need partial products and a sum, a second format); harder means a longer multiplicand.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .answer import numeric_score
from .base import Example, GeneratedTask, TaskConfig, check_int, check_range, generation_cap
from .registry import register

MAX_DIGITS = 18


@dataclass(frozen=True, kw_only=True)
class MultiplicationConfig(TaskConfig):
    min_digits: int = 2  # the multiplicand's digit count is uniform in [min_digits, max_digits]
    max_digits: int = 4
    min_multiplier: int = 2  # the one-digit multiplier is uniform in [min_multiplier, max_multiplier]
    max_multiplier: int = 9
    version: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("min_digits", self.min_digits, lo=1)
        check_int("max_digits", self.max_digits, lo=1, hi=MAX_DIGITS)
        check_range("min_digits", self.min_digits, "max_digits", self.max_digits)
        check_int("min_multiplier", self.min_multiplier, lo=1, hi=9)
        check_int("max_multiplier", self.max_multiplier, lo=1, hi=9)
        check_range("min_multiplier", self.min_multiplier, "max_multiplier", self.max_multiplier)


def worked_solution(a: int, m: int) -> str:
    """The scratchpad and final line for a * m (a >= 0, m a digit)."""
    if not 0 <= m <= 9 or a < 0:
        raise ValueError(f"need a >= 0 and a one-digit multiplier, got {a}*{m}")
    lines, carry = [], 0
    for digit in reversed(str(a)):
        value = int(digit) * m + carry
        lines.append(f"{digit}*{m}{f'+{carry}' if carry else ''}={value}")
        carry = value // 10
    lines.append(f"#### {a * m}")
    return "\n".join(lines)


def example(a: int, m: int) -> Example:
    return Example(prompt=f"{a}*{m}=", answer=str(a * m), solution=worked_solution(a, m))


@register
class Multiplication(GeneratedTask):
    """a*m, a of min_digits..max_digits digits, m one digit; scratchpad with carries."""

    name = "multiplication"
    Config = MultiplicationConfig
    presets = {
        "easy": dict(min_digits=2, max_digits=3),
        "medium": dict(min_digits=2, max_digits=4),
        "hard": dict(min_digits=3, max_digits=6),
    }
    config: MultiplicationConfig
    step_pattern = re.compile(r"\d\*\d(?:\+\d)?=\d+")  # one digit: 7*6=42, 4*6+4=28

    def stream(self, salt: str = "") -> Iterator[Example]:
        c = self.config
        rng = random.Random(f"{self.name}:{c.seed}" + (f":{salt}" if salt else ""))
        while True:
            digits = rng.randint(c.min_digits, c.max_digits)
            a = rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)
            yield example(a, rng.randint(c.min_multiplier, c.max_multiplier))

    def harder(self) -> dict:
        # a multiplicand one digit longer: one more line than the warm start ever wrote
        c = self.config
        return dict(min_digits=min(c.min_digits + 1, MAX_DIGITS), max_digits=min(c.max_digits + 1, MAX_DIGITS))

    def score(self, completion: str, example: Example) -> float:
        return numeric_score(completion, example.answer)

    @property
    def max_new_tokens(self) -> int:
        # The longest solution: the multiplicand all nines, so every line after the first carries
        # and has a two-digit value (for m >= 2; m = 1 never carries), and the product has the
        # most digits.
        c = self.config
        largest = 10**c.max_digits - 1
        return generation_cap(max(len(worked_solution(largest, m))
                                  for m in range(c.min_multiplier, c.max_multiplier + 1)))
