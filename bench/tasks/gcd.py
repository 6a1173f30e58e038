"""Greatest common divisor of two numbers by Euclid's algorithm, from reasoning-gym's `gcd`.

    prompt    gcd(84,36)=
    solution  84=2*36+12
              36=3*12+0
              #### 12

One line per division with remainder, `a=q*b+r`; the next line divides b by r, until the
remainder is 0; the answer is the last divisor. reasoning-gym draws the two numbers
(uniform in [min_value, max_value], redrawn up to three times to favour a gcd above 1); its
own prompt is a sentence of 100+ characters, so we rebuild a compact one with the larger number
first (Euclid's first line then always makes progress, and every line has one shape). Each line
is one division of numbers no larger than the prompt's, and the number of lines grows with the
numbers (Lamé: at most ~4.8 per decimal digit), which gives response length room to vary.
Scoring is our integer verifier; the stream checks every answer against math.gcd and
reasoning-gym's, and the tests check that reasoning-gym's scorer agrees on gold answers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from bench import errors
from .answer import numeric_score
from .base import Example, GeneratedTask, TaskConfig, check_int, derived_seed, generation_cap
from .registry import register

MAX_VALUE = 10**6


@dataclass(frozen=True, kw_only=True)
class GcdConfig(TaskConfig):
    min_value: int = 1  # each number is uniform in [min_value, max_value]
    max_value: int = 199
    version: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("min_value", self.min_value, lo=1)
        check_int("max_value", self.max_value, lo=2, hi=MAX_VALUE)
        if self.max_value <= self.min_value:  # reasoning-gym needs a range of two values or more
            raise errors.ConfigError(f"max_value ({self.max_value}) must be > min_value ({self.min_value})")


def worked_solution(a: int, b: int) -> tuple[str, int]:
    """Euclid's divisions for a >= b >= 1; returns (solution, gcd)."""
    if not a >= b >= 1:
        raise ValueError(f"need a >= b >= 1, got {a}, {b}")
    lines = []
    while b:
        q, r = divmod(a, b)
        lines.append(f"{a}={q}*{b}+{r}")
        a, b = b, r
    lines.append(f"#### {a}")
    return "\n".join(lines), a


def example(x: int, y: int) -> Example:
    """The example for gcd(x, y), x and y >= 1 in either order: the prompt puts the larger first."""
    a, b = max(x, y), min(x, y)
    solution, g = worked_solution(a, b)
    if g != math.gcd(a, b):
        raise AssertionError(f"gcd: Euclid gave {g} != math.gcd {math.gcd(a, b)} for {a}, {b}")
    return Example(prompt=f"gcd({a},{b})=", answer=str(g), solution=solution)


def longest_solution_bound(max_value: int) -> int:
    """An upper bound on len(worked_solution(a, b)) over max_value >= a >= b >= 1.

    With x1 = a, x2 = b and x(i+2) = x(i) mod x(i+1), line i is `x(i)=q(i)*x(i+1)+x(i+2)`.
    Lamé: n lines need a >= F(n+2) (Fibonacci; n = 1 when a = b). Remainders at least halve
    every two lines, so x(i) <= max_value >> (i-1)//2, and the quotients' product is at most
    a / gcd <= max_value, so their digits add up to at most n + len(str(max_value)) - 1. At most
    21% above the true maximum, and never below it, for every max_value up to 1000 (exhaustive)."""
    m = max_value
    fib = [1, 1]  # fib[k] = F(k+1)
    while fib[-1] <= m:
        fib.append(fib[-1] + fib[-2])
    n = max([1] + [k - 1 for k in range(len(fib)) if fib[k] <= m])  # max n with F(n+2) <= m

    def digits(i: int) -> int:  # of the largest x(i) can be
        return len(str(max(1, m >> ((i - 1) // 2))))

    # x(i), x(i+1), x(i+2) (the last remainder is 0), plus "=*+" and a newline per line
    numbers = sum(digits(i) + digits(i + 1) + (digits(i + 2) if i < n else 1) for i in range(1, n + 1))
    quotients = n + len(str(m)) - 1
    return numbers + quotients + 4 * n + len("#### ") + digits(n + 1)


@register
class Gcd(GeneratedTask):
    """reasoning-gym gcd: two numbers in [min_value, max_value]; Euclid's divisions."""

    name = "gcd"
    Config = GcdConfig
    presets = {
        "easy": dict(min_value=1, max_value=99),
        "medium": dict(min_value=1, max_value=199),
        "hard": dict(min_value=1, max_value=999),
    }
    config: GcdConfig
    step_pattern = re.compile(r"\d+=\d+\*\d+\+\d+")  # one division: 84=2*36+12

    def harder(self) -> dict:
        # numbers up to twice as large (one more binary digit): about one more division on
        # average and leading digits the warm start never saw, while the smaller ones remain
        return dict(max_value=min(2 * self.config.max_value + 1, MAX_VALUE))

    def rg_dataset(self, salt: str = ""):
        """The reasoning-gym dataset behind this task (item i of it is stream item i)."""
        import reasoning_gym  # 1.6 s import: only when examples are needed

        c = self.config
        return reasoning_gym.create_dataset(
            "gcd", size=10**9, seed=derived_seed(self.name, c.seed, *([salt] if salt else [])),
            min_numbers=2, max_numbers=2, min_value=c.min_value, max_value=c.max_value)

    def stream(self, salt: str = "") -> Iterator[Example]:
        ds = self.rg_dataset(salt)
        for i in range(len(ds)):
            item = ds[i]
            x, y = item["metadata"]["numbers"]
            ex = example(x, y)
            if ex.answer != item["answer"]:
                raise AssertionError(f"gcd: our result {ex.answer} != reasoning-gym's "
                                     f"{item['answer']} for {x}, {y}")
            yield Example(ex.prompt, ex.answer, ex.solution, meta={"rg_index": i})

    def score(self, completion: str, example: Example) -> float:
        return numeric_score(completion, example.answer)

    @property
    def max_new_tokens(self) -> int:
        return generation_cap(longest_solution_bound(self.config.max_value))
