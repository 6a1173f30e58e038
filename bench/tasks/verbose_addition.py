"""Addition whose worked solutions come in several lengths: room for response length to move.

    prompt    347+85=
    terse     7+5=12                      spelled   7+5=12, write 2 carry 1
              4+8+1=13                              4+8+1=13, write 3 carry 1
              3+0+1=4                               3+0+1=4, write 4
              check 432-85=347                      #### 432
              #### 432

Every solution is `addition`'s column scratchpad, varied along two axes chosen per example from
the seeded stream (so the SFT corpus holds every length for the same kind of problem and a
warm-started policy samples all of them):

- **spelling**: with probability `spelled_frac` each column line also says which digit is written
  and whether one is carried (about 18 more characters a line);
- **re-checks**: 0..`max_checks` lines after the working, each verifying the sum by the inverse
  operation: `check S-b=a`, then `check S-a=b`.

Why length can matter for reward here, and how much. The two axes are built to differ:
- re-check lines are *reward-neutral padding*. They come after the sum is fixed, their right-hand
  side is an operand copied from the prompt, and the verifier reads only the final `#### N` line,
  so they can neither repair nor spoil the answer (beyond copying slips). Any drift in their
  number under RL is length bias of the loss aggregation, not reward seeking — the contrast of
  Dr. GRPO's claim that seq-mean-token-mean lets incorrect answers grow.
- spelling is *possibly reward-relevant*: "write d carry c" states the digit and carry that the
  terse line leaves implicit, which may help a tiny model; whether it does is measured, not
  assumed (`verbosity` classifies a completion so accuracy can be split by style).
Skipping the working altogether (a bare `#### N`, clearly worse for a tiny model) is the warm
start's `direct_frac`, kept there so that one knob means "bare answers" for every task.

The longest solution (all columns spelled, carries everywhere, every check) is about 4.5x the
shortest worked one, and `max_new_tokens` is sized from the longest, at least 3x the mean gold
length, so RL can lengthen answers without hitting the cap.

Measured (medium, nano warm start of 800 SFT steps, December 2026): held-out greedy accuracy
0.385; 4 samples per held-out prompt keep the corpus' mix (spelled 0.50, 0/1/2 checks 0.34/0.31/
0.31), sampled accuracy 0.166 at a mean 75 tokens (cap 248, none truncated). Spelled working is
not better than terse (0.15 vs 0.19, n = 400 each) and re-checks do not help (0.19/0.16/0.15 for
0/1/2): at this scale length is reward-neutral or slightly costly, so a drift upward is bias.
In a 50-step pilot (16 prompts x 8, lr 1e-4, one seed) length moved, downwards, under every
aggregation: sampled len/incorrect -0.41 tok/step (grpo, seq_mean_token_mean), -0.50 (grpo with
seq_mean_token_sum_norm), -0.49 (dr_grpo), -0.54 (dapo, token_mean), ±0.06-0.09, none truncated.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from bench import errors
from .answer import numeric_score
from .base import Example, GeneratedTask, TaskConfig, check_int, check_range, generation_cap
from .registry import register

MAX_CHECKS = 2  # distinct inverse operations of a two-operand sum: S-b=a and S-a=b


@dataclass(frozen=True, kw_only=True)
class VerboseAdditionConfig(TaskConfig):
    min_digits: int = 2  # each operand's digit count is uniform in [min_digits, max_digits]
    max_digits: int = 4
    spelled_frac: float = 0.5  # share of solutions whose column lines say "write d carry c"
    max_checks: int = 2  # re-check lines per solution, uniform in 0..max_checks
    version: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("min_digits", self.min_digits, lo=1)
        check_int("max_digits", self.max_digits, lo=1, hi=18)
        check_range("min_digits", self.min_digits, "max_digits", self.max_digits)
        if (not isinstance(self.spelled_frac, (int, float)) or isinstance(self.spelled_frac, bool)
                or not 0 <= self.spelled_frac <= 1):
            raise errors.ConfigError(f"spelled_frac must be a number in [0, 1], got {self.spelled_frac!r}")
        check_int("max_checks", self.max_checks, lo=0, hi=MAX_CHECKS)


def worked_solution(a: int, b: int, spelled: bool, checks: int) -> str:
    """The scratchpad for a + b (a, b >= 0) in one style, ending with `#### {a + b}`."""
    if not 0 <= checks <= MAX_CHECKS:
        raise ValueError(f"checks must be in 0..{MAX_CHECKS}, got {checks}")
    da, db = str(a)[::-1], str(b)[::-1]
    lines, carry = [], 0
    for i in range(max(len(da), len(db))):
        x = int(da[i]) if i < len(da) else 0
        y = int(db[i]) if i < len(db) else 0
        total = x + y + carry
        line = f"{x}+{y}{'+1' if carry else ''}={total}"
        carry = total // 10
        if spelled:
            line += f", write {total % 10}" + (" carry 1" if carry else "")
        lines.append(line)
    total = a + b
    lines += [f"check {total}-{b}={a}", f"check {total}-{a}={b}"][:checks]
    lines.append(f"#### {total}")
    return "\n".join(lines)


_CHECK = re.compile(r"^check -?\d+-\d+=\d+$")
_COLUMN = re.compile(r"^\d\+\d(?:\+1)?=\d+(, write \d( carry 1)?)?$")


def verbosity(completion: str) -> dict[str, int]:
    """How long-winded a completion is, by line kind: column lines (terse and spelled), re-check
    lines and other lines (anything else before the final `####` line: malformed working).
    For splitting accuracy and length by style; the verifier never looks at it."""
    body = completion.rsplit("####", 1)[0] if "####" in completion else completion
    counts = {"terse": 0, "spelled": 0, "checks": 0, "other": 0}
    for line in body.splitlines():
        if not line.strip():
            continue
        column = _COLUMN.match(line)
        if column:
            counts["spelled" if column.group(1) else "terse"] += 1
        elif _CHECK.match(line):
            counts["checks"] += 1
        else:
            counts["other"] += 1
    return counts


@register
class VerboseAddition(GeneratedTask):
    """a+b with column working of seeded varied length: terse or spelled lines, 0..2 re-checks."""

    name = "verbose_addition"
    warm_start_steps = {"nano": 800, "micro": 450, "*": 450}  # Task.warm_start_steps
    Config = VerboseAdditionConfig
    presets = {
        "easy": dict(min_digits=1, max_digits=3),
        "medium": dict(min_digits=2, max_digits=4),
        "hard": dict(min_digits=3, max_digits=6),
    }
    config: VerboseAdditionConfig
    step_pattern = re.compile(f"{_COLUMN.pattern[1:-1]}|{_CHECK.pattern[1:-1]}")  # column or re-check lines

    def harder(self) -> dict:
        c = self.config
        return dict(min_digits=min(c.min_digits + 1, 18), max_digits=min(c.max_digits + 1, 18))

    def stream(self, salt: str = "") -> Iterator[Example]:
        c = self.config
        rng = random.Random(f"{self.name}:{c.seed}" + (f":{salt}" if salt else ""))
        while True:
            a, b = self._operand(rng), self._operand(rng)
            spelled = rng.random() < c.spelled_frac
            checks = rng.randint(0, c.max_checks)
            yield Example(prompt=f"{a}+{b}=", answer=str(a + b),
                          solution=worked_solution(a, b, spelled, checks),
                          meta={"spelled": spelled, "checks": checks})

    def _operand(self, rng: random.Random) -> int:
        digits = rng.randint(self.config.min_digits, self.config.max_digits)
        return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)

    def score(self, completion: str, example: Example) -> float:
        return numeric_score(completion, example.answer)

    @property
    def max_new_tokens(self) -> int:
        # The longest: both operands all nines (every column after the first carries), every line
        # spelled and every check, whatever the configured mix, so a policy that moves all its mass
        # to the longest style still fits.
        largest = 10**self.config.max_digits - 1
        return generation_cap(len(worked_solution(largest, largest, True, MAX_CHECKS)))
