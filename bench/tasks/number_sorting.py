"""Sort a list of non-negative integers ascending, by selection: one pick per line.

    prompt    sort 53,12,87,40=
    solution  12|53,87,40
              40|53,87
              53|87
              #### 12,40,53,87

Each line picks the smallest number of the list above it (the prompt's, for the first line),
writes it before `|`, and copies the rest in their order, without the first copy of the pick;
when one number is left it is the last, and the final line lists the picks and it. So every
line is one local step (find the smallest of a short list, copy the others) and the state is
always written out: the model never has to recall which numbers it has used, and repeated
numbers need no special case. The answer is the comma-separated sorted list, scored by exact
match. Difficulty: how many numbers, and how many digits they may have. (reasoning-gym's
`number_sorting` draws signed decimals in both directions; we draw our own integers.)
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from bench import errors
from .answer import MAX_ANSWER_CHARS, extract_answer
from .base import Example, GeneratedTask, TaskConfig, check_int, check_range, generation_cap
from .registry import register

MAX_NUMBERS = 20
_LIST = re.compile(r"\d+(?:,\d+)*", re.ASCII)


@dataclass(frozen=True, kw_only=True)
class NumberSortingConfig(TaskConfig):
    min_numbers: int = 4  # the list's length is uniform in [min_numbers, max_numbers]
    max_numbers: int = 6
    max_digits: int = 2  # each number is uniform in [0, 10**max_digits - 1]
    version: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("min_numbers", self.min_numbers, lo=2)
        check_int("max_numbers", self.max_numbers, lo=2, hi=MAX_NUMBERS)
        check_range("min_numbers", self.min_numbers, "max_numbers", self.max_numbers)
        check_int("max_digits", self.max_digits, lo=1, hi=6)
        if self.max_numbers > most_numbers(self.max_digits):  # the answer must stay readable
            raise errors.ConfigError(
                f"max_numbers must be <= {most_numbers(self.max_digits)} with max_digits "
                f"{self.max_digits} (a longer sorted list exceeds the {MAX_ANSWER_CHARS}-character "
                f"answer limit), got {self.max_numbers}")


def most_numbers(max_digits: int) -> int:
    """The longest list whose answer (numbers of max_digits digits and commas) fits in
    MAX_ANSWER_CHARS, capped at MAX_NUMBERS."""
    return min(MAX_NUMBERS, (MAX_ANSWER_CHARS + 1) // (max_digits + 1))


def worked_solution(numbers: list[int]) -> tuple[str, str]:
    """The selection steps sorting `numbers` (two or more, >= 0); returns (solution, answer)."""
    if len(numbers) < 2 or any(n < 0 for n in numbers):
        raise ValueError(f"need two or more non-negative numbers, got {numbers}")
    rest, picks, lines = list(numbers), [], []
    while len(rest) > 1:
        pick = min(rest)
        rest.remove(pick)  # the first copy
        picks.append(pick)
        lines.append(f"{pick}|{','.join(map(str, rest))}")
    answer = ",".join(map(str, picks + rest))
    lines.append(f"#### {answer}")
    return "\n".join(lines), answer


def example(numbers: list[int]) -> Example:
    solution, answer = worked_solution(numbers)
    if answer != ",".join(map(str, sorted(numbers))):
        raise AssertionError(f"number_sorting: {answer} is not {numbers} sorted")
    return Example(prompt=f"sort {','.join(map(str, numbers))}=", answer=answer, solution=solution)


@register
class NumberSorting(GeneratedTask):
    """Sort min_numbers..max_numbers integers of up to max_digits digits, one pick per line."""

    name = "number_sorting"
    Config = NumberSortingConfig
    presets = {
        "easy": dict(min_numbers=3, max_numbers=4, max_digits=2),
        "medium": dict(min_numbers=4, max_numbers=6, max_digits=2),
        "hard": dict(min_numbers=5, max_numbers=8, max_digits=3),
    }
    config: NumberSortingConfig
    step_pattern = re.compile(r"\d+\|\d+(?:,\d+)*", re.ASCII)  # one pick: 12|53,87,40

    def parses(self, answer: str) -> bool:
        """Comma-separated non-negative integers, no spaces."""
        return isinstance(answer, str) and _LIST.fullmatch(answer) is not None

    def stream(self, salt: str = "") -> Iterator[Example]:
        c = self.config
        rng = random.Random(f"{self.name}:{c.seed}" + (f":{salt}" if salt else ""))
        top = 10**c.max_digits - 1
        while True:
            count = rng.randint(c.min_numbers, c.max_numbers)
            yield example([rng.randint(0, top) for _ in range(count)])

    def harder(self) -> dict:
        # one more number in every list: one more pick than the warm start ever wrote
        c = self.config
        most = most_numbers(c.max_digits)
        return dict(min_numbers=min(c.min_numbers + 1, most), max_numbers=min(c.max_numbers + 1, most))

    def score(self, completion: str, example: Example) -> float:
        answer = extract_answer(completion)
        return 1.0 if answer is not None and answer == example.answer else 0.0

    @property
    def max_new_tokens(self) -> int:
        # The solution's length depends only on how many numbers there are and their lengths:
        # the most numbers, all of the most digits, is the longest.
        c = self.config
        return generation_cap(len(worked_solution([10**c.max_digits - 1] * c.max_numbers)[0]))
