"""Decimal to base 2 (or another base up to 9) by repeated division.

    prompt    37>b2=
    solution  37=2*18+1
              18=2*9+0
              9=2*4+1
              4=2*2+0
              2=2*1+0
              1=2*0+1
              #### 100101

One line per division by the base, `n=b*q+r`; the next line divides the quotient, until it is
0. The answer is the remainders read bottom-up: a string of digits, scored by exact match
(leading zeros are wrong; 0 is `0`). Every line has one shape and is one halving (in base 2)
of a number no longer than the prompt's, so a tiny model can learn it; the number of lines is
the answer's length. Difficulty is the range of the decimal number. The range is also the whole
prompt space, so a difficulty needs a few thousand numbers for a held-out split of a few hundred
(10% of prompts are held out): that, not the text, sets the lower end of the presets, and base-2
solutions at medium (up to 13 binary digits) are long: 143 characters on average, 161 at most.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .answer import extract_answer
from .base import Example, GeneratedTask, TaskConfig, check_int, check_range, generation_cap
from .registry import register

MAX_VALUE = 10**6


@dataclass(frozen=True, kw_only=True)
class BaseConversionConfig(TaskConfig):
    base: int = 2  # the target base, 2..9 (digits 0..base-1)
    min_value: int = 1  # the decimal number is uniform in [min_value, max_value]
    max_value: int = 8191
    version: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("base", self.base, lo=2, hi=9)
        check_int("min_value", self.min_value, lo=0)
        check_int("max_value", self.max_value, lo=0, hi=MAX_VALUE)
        check_range("min_value", self.min_value, "max_value", self.max_value)


def worked_solution(n: int, base: int) -> tuple[str, str]:
    """The divisions converting n >= 0 to `base`; returns (solution, digits)."""
    if n < 0 or not 2 <= base <= 9:
        raise ValueError(f"need n >= 0 and a base in 2..9, got {n}, {base}")
    lines, digits = [], []
    while True:
        q, r = divmod(n, base)
        lines.append(f"{n}={base}*{q}+{r}")
        digits.append(str(r))
        n = q
        if n == 0:
            break
    answer = "".join(reversed(digits))
    lines.append(f"#### {answer}")
    return "\n".join(lines), answer


def example(n: int, base: int) -> Example:
    solution, answer = worked_solution(n, base)
    if int(answer, base) != n:
        raise AssertionError(f"base_conversion: {answer} in base {base} is not {n}")
    return Example(prompt=f"{n}>b{base}=", answer=answer, solution=solution)


@register
class BaseConversion(GeneratedTask):
    """n in [min_value, max_value] written in `base` (default 2) by repeated division."""

    name = "base_conversion"
    Config = BaseConversionConfig
    presets = {
        "easy": dict(min_value=1, max_value=4095),  # up to 12 binary digits
        "medium": dict(min_value=1, max_value=8191),  # up to 13
        "hard": dict(min_value=1, max_value=32767),  # up to 15
    }
    config: BaseConversionConfig
    step_pattern = re.compile(r"\d+=\d\*\d+\+\d")  # one division: 37=2*18+1

    def parses(self, answer: str) -> bool:
        """A non-empty string of digits of the base (leading zeros parse, and score 0)."""
        valid = "0123456789"[: self.config.base]
        return isinstance(answer, str) and len(answer) > 0 and all(ch in valid for ch in answer)

    def stream(self, salt: str = "") -> Iterator[Example]:
        c = self.config
        rng = random.Random(f"{self.name}:{c.seed}" + (f":{salt}" if salt else ""))
        while True:
            yield example(rng.randint(c.min_value, c.max_value), c.base)

    def harder(self) -> dict:
        # numbers up to one more digit in the base: one more division than the warm start ever
        # wrote, while the shorter ones remain
        c = self.config
        return dict(max_value=min((c.max_value + 1) * c.base - 1, MAX_VALUE))

    def score(self, completion: str, example: Example) -> float:
        answer = extract_answer(completion)
        return 1.0 if answer is not None and answer == example.answer else 0.0

    @property
    def max_new_tokens(self) -> int:
        # Every number in the solution of n (n, the quotients, the digit count) is nondecreasing
        # in n, so the largest n has the longest solution.
        return generation_cap(len(worked_solution(self.config.max_value, self.config.base)[0]))
