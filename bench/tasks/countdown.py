"""A small countdown from reasoning-gym: combine the given numbers to hit a target.

    prompt    8,5,2->30
    solution  8-2=6
              5*6=30
              #### 5*(8-2)

reasoning-gym picks the numbers, the target and one gold expression. The solution computes
that expression's operations in evaluation order, then writes the expression. Scoring is ours:
the final answer must be an expression of integers joined by the configured binary
operators and parentheses (no unary minus, no powers), use each given number at most once
(multiset), and equal the target exactly (fractions, no float rounding). Anything else scores
0; reasoning-gym's scorer would give 0.01 or 0.05 to a wrong answer, which would make a
wrong answer look better than no answer.
"""

from __future__ import annotations

import ast
import operator
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction

from bench import errors
from .answer import extract_answer
from .base import (Example, GeneratedTask, TaskConfig, check_int, check_range, derived_seed,
                   generation_cap)
from .registry import register

_OPS = {ast.Add: ("+", operator.add), ast.Sub: ("-", operator.sub),
        ast.Mult: ("*", operator.mul), ast.Div: ("/", operator.truediv)}
# Rules out floats, 1_000 and names before ast sees the text; ast then rejects ** and //.
_ALLOWED_CHARS = re.compile(r"[0-9+\-*/() ]+")


@dataclass(frozen=True, kw_only=True)
class CountdownConfig(TaskConfig):
    min_numbers: int = 3
    max_numbers: int = 3
    min_value: int = 1  # each given number is uniform in [min_value, max_value]
    max_value: int = 10
    min_target: int = 1
    max_target: int = 30
    operators: tuple[str, ...] = ("+", "-", "*", "/")
    version: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("min_numbers", self.min_numbers, lo=2)
        check_int("max_numbers", self.max_numbers, lo=2, hi=8)
        check_range("min_numbers", self.min_numbers, "max_numbers", self.max_numbers)
        check_int("min_value", self.min_value, lo=1)
        check_int("max_value", self.max_value, lo=1, hi=10**6)
        check_range("min_value", self.min_value, "max_value", self.max_value)
        check_int("min_target", self.min_target, lo=1)
        check_int("max_target", self.max_target, lo=1)
        check_range("min_target", self.min_target, "max_target", self.max_target)
        if (not isinstance(self.operators, tuple) or not self.operators
                or any(op not in ("+", "-", "*", "/") for op in self.operators)
                or len(set(self.operators)) != len(self.operators)):
            raise errors.ConfigError("operators must be a non-empty tuple of distinct '+', '-', '*', '/', "
                                     f"got {self.operators!r}")


class _Invalid(Exception):
    pass


def evaluate(expression: str, operators: tuple[str, ...] = ("+", "-", "*", "/")
             ) -> tuple[Fraction, list[int], list[str]]:
    """(value, integers used, step lines) of a countdown expression; _Invalid when it is not one.

    Steps are the binary operations in evaluation order (left operand first), each
    `a op b=c` with a, b, c as integers or fractions like 7/2."""
    if len(expression) > 100 or not _ALLOWED_CHARS.fullmatch(expression):
        raise _Invalid(expression)
    try:
        tree = ast.parse(expression.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise _Invalid(expression) from None
    used: list[int] = []
    steps: list[str] = []

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            used.append(node.value)
            return Fraction(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            symbol, fn = _OPS[type(node.op)]
            if symbol not in operators:
                raise _Invalid(expression)
            left, right = walk(node.left), walk(node.right)
            if symbol == "/" and right == 0:
                raise _Invalid(expression)
            value = fn(left, right)
            steps.append(f"{left}{symbol}{right}={value}")
            return value
        raise _Invalid(expression)

    return walk(tree), used, steps


def compact(expression: str) -> str:
    """Minimal parentheses, no spaces: `5*(8 - 2)` -> `5*(8-2)`."""
    return ast.unparse(ast.parse(expression, mode="eval")).replace(" ", "")


def is_solution(answer: str | None, numbers: list[int], target: int,
                operators: tuple[str, ...] = ("+", "-", "*", "/")) -> bool:
    if answer is None:
        return False
    try:
        value, used, _ = evaluate(answer, operators)
    except (_Invalid, ZeroDivisionError, OverflowError, MemoryError):
        return False
    return not Counter(used) - Counter(numbers) and value == target


@register
class Countdown(GeneratedTask):
    """reasoning-gym countdown: reach a target from min..max_numbers numbers, each used once."""

    name = "countdown"
    warm_start_steps = {"nano": 1000, "micro": 600, "*": 600}  # Task.warm_start_steps
    Config = CountdownConfig
    presets = {
        "easy": dict(min_numbers=2, max_numbers=3, min_value=1, max_value=9, max_target=20),
        "medium": dict(min_numbers=3, max_numbers=3, min_value=1, max_value=10, max_target=30),
        "hard": dict(min_numbers=3, max_numbers=4, min_value=1, max_value=20, max_target=100),
    }
    config: CountdownConfig
    step_pattern = re.compile(r"-?\d+[-+*/]-?\d+=-?\d+")  # one operation: 8-2=6

    def parses(self, answer: str) -> bool:
        try:
            evaluate(answer, self.config.operators)
        except (_Invalid, ZeroDivisionError, OverflowError, MemoryError):
            return False
        return True

    def harder(self) -> dict:
        # one more number to combine (and so one more step) than the warm start saw
        c = self.config
        return dict(min_numbers=min(c.min_numbers + 1, 8), max_numbers=min(c.max_numbers + 1, 8))

    def rg_dataset(self, salt: str = ""):
        """The reasoning-gym dataset behind this task (stream item i comes from its item i,
        minus the items skipped, see `stream`)."""
        import reasoning_gym  # 1.6 s import: only when examples are needed

        c = self.config
        return reasoning_gym.create_dataset(
            "countdown", size=10**9, seed=derived_seed(self.name, c.seed, *([salt] if salt else [])),
            min_numbers=c.min_numbers, max_numbers=c.max_numbers, min_value=c.min_value,
            max_value=c.max_value, min_target=c.min_target, max_target=c.max_target,
            operators=c.operators)

    def stream(self, salt: str = "") -> Iterator[Example]:
        ds = self.rg_dataset(salt)
        for i in range(len(ds)):
            ex = self.from_rg(ds[i], i)
            if ex is not None:
                yield ex

    def from_rg(self, item: dict, index: int) -> Example | None:
        """Our example for a reasoning-gym item; None (skipped) when its gold expression has
        a unary minus (sympy writes `-2 + 9`) or a non-integer intermediate, which would
        teach a format our verifier rejects or fractions in the scratchpad."""
        numbers, target = list(item["metadata"]["numbers"]), int(item["metadata"]["target"])
        try:
            expression = compact(item["answer"])
            value, _, steps = evaluate(expression, self.config.operators)
        except (SyntaxError, _Invalid):
            return None
        if value != target or any("/" in s.split("=")[1] for s in steps):
            return None
        return Example(
            prompt=f"{','.join(map(str, numbers))}->{target}",
            answer=expression,
            solution="\n".join([*steps, f"#### {expression}"]),
            meta={"numbers": numbers, "target": target, "rg_index": index})

    def score(self, completion: str, example: Example) -> float:
        meta = example.meta or {}
        ok = is_solution(extract_answer(completion), meta.get("numbers", []),
                         meta.get("target"), self.config.operators)
        return 1.0 if ok else 0.0

    @property
    def max_new_tokens(self) -> int:
        # A bound on gold solutions. Their intermediates are integers, and with numbers >= 1
        # a subexpression over k numbers has magnitude <= M**k, M = max(max_value, 2). The
        # longest chain is left-deep: step j combines a j-number value with one number into a
        # (j+1)-number value. Each line is `a op b=c\n`, with room for two signs and for the
        # operands splitting the numbers another way (one more digit); the final line writes
        # every number, operator and up to one parenthesis pair per operator.
        c = self.config
        m, n = max(c.max_value, 2), c.max_numbers

        def digits(k: int) -> int:
            return len(str(m**k))

        steps = sum(digits(j) + digits(1) + digits(j + 1) + 6 for j in range(1, n))
        final = len("#### ") + n * digits(1) + (n - 1) * 3
        return generation_cap(steps + final)
