"""Spell a word backward, one letter per line, from reasoning-gym's `spell_backward`.

    prompt    rev planet=
    solution  t
              e
              n
              a
              l
              p
              #### tenalp

One line per letter of the word, from its last to its first; the answer is those letters
joined. Every line is the same one-character step (find the letter before the one just
written), and the line count is the word's length, so a tiny model can learn it and length
grows with difficulty. reasoning-gym draws the word (its English word list, 3 to 10 letters);
its prompt is a sentence, so we rebuild a compact one, and we skip its words that are not all
lowercase a-z (names such as `Abe`: 1 in 8 of the list), so prompts, steps and answers use 26 letters.
Scoring is exact match of the lowercase answer (reasoning-gym's scorer ignores case and gives
partial credit for a correct prefix; ours gives none); the tests check that reasoning-gym's
scorer gives our gold answers 1.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .answer import extract_answer
from .base import Example, GeneratedTask, TaskConfig, check_int, check_range, derived_seed, generation_cap
from .registry import register

# reasoning-gym's word list (words3to10.txt) has words of 3 to 10 letters
MIN_LEN, MAX_LEN = 3, 10
_WORD = re.compile(r"[a-z]+", re.ASCII)


@dataclass(frozen=True, kw_only=True)
class SpellBackwardConfig(TaskConfig):
    min_len: int = 5  # the word's length is in [min_len, max_len] (reasoning-gym's word list)
    max_len: int = 8
    version: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("min_len", self.min_len, lo=MIN_LEN, hi=MAX_LEN)
        check_int("max_len", self.max_len, lo=MIN_LEN, hi=MAX_LEN)
        check_range("min_len", self.min_len, "max_len", self.max_len)


def worked_solution(word: str) -> str:
    """The letters of `word` (lowercase a-z), last first, then the reversed word."""
    if not _WORD.fullmatch(word):
        raise ValueError(f"need a word of lowercase letters a-z, got {word!r}")
    return "\n".join([*reversed(word), f"#### {word[::-1]}"])


def example(word: str) -> Example:
    return Example(prompt=f"rev {word}=", answer=word[::-1], solution=worked_solution(word))


@register
class SpellBackward(GeneratedTask):
    """reasoning-gym spell_backward: an English word of min_len..max_len letters, reversed."""

    name = "spell_backward"
    Config = SpellBackwardConfig
    presets = {
        "easy": dict(min_len=3, max_len=5),
        "medium": dict(min_len=5, max_len=8),
        "hard": dict(min_len=7, max_len=10),
    }
    config: SpellBackwardConfig
    step_pattern = re.compile(r"[a-z]", re.ASCII)  # one letter

    def parses(self, answer: str) -> bool:
        """A non-empty string of lowercase letters a-z."""
        return isinstance(answer, str) and _WORD.fullmatch(answer) is not None

    def harder(self) -> dict:
        # words one letter longer: one more line than the warm start ever wrote (the word list
        # stops at 10 letters)
        c = self.config
        return dict(min_len=min(c.min_len + 1, MAX_LEN), max_len=min(c.max_len + 1, MAX_LEN))

    def rg_dataset(self, salt: str = ""):
        """The reasoning-gym dataset behind this task (stream item i comes from its item i,
        minus the items skipped, see `stream`)."""
        import reasoning_gym  # 1.6 s import: only when examples are needed

        c = self.config
        return reasoning_gym.create_dataset(
            "spell_backward", size=10**9, seed=derived_seed(self.name, c.seed, *([salt] if salt else [])),
            min_word_len=c.min_len, max_word_len=c.max_len)

    def stream(self, salt: str = "") -> Iterator[Example]:
        ds = self.rg_dataset(salt)
        for i in range(len(ds)):
            item = ds[i]
            word = item["metadata"]["word"]
            if not _WORD.fullmatch(word):
                continue  # a name or an abbreviation: not all lowercase a-z
            ex = example(word)
            if ex.answer != item["answer"]:
                raise AssertionError(f"spell_backward: our {ex.answer!r} != reasoning-gym's "
                                     f"{item['answer']!r} for {word!r}")
            yield Example(ex.prompt, ex.answer, ex.solution, meta={"rg_index": i})

    def score(self, completion: str, example: Example) -> float:
        answer = extract_answer(completion)
        return 1.0 if answer is not None and answer == example.answer else 0.0

    @property
    def max_new_tokens(self) -> int:
        return generation_cap(len(worked_solution("a" * self.config.max_len)))
