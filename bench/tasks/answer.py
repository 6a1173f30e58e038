"""The answer format every task shares: the completion ends with a line `#### <answer>`.

This is GSM8K's convention. Verifiers read the text after the LAST `####` (up to the end of
that line), so a scratchpad may say anything before it. Parsing is deliberately strict
beyond whitespace: a reward of 1 must mean "the model wrote the right answer in the taught
format", not "some number in the text matched".
"""

from __future__ import annotations

import re

MARKER = "####"
# An answer longer than this is malformed. It also bounds the work any verifier does on a
# runaway completion (int() of a 10^6-digit string, or sympy on it, is slow).
MAX_ANSWER_CHARS = 100

_INT = re.compile(r"[+-]?(?:\d+|\d{1,3}(?:,\d{3})+)(?:\.0*)?", re.ASCII)
_SIGN_SPACE = re.compile(r"^([+-])\s+")


def extract_answer(text: str) -> str | None:
    """The stripped text after the last `####` in `text`, up to the end of that line.

    None when there is no marker, nothing after it, or the answer exceeds
    MAX_ANSWER_CHARS. Never raises for a str input; non-str input gives None.
    """
    if not isinstance(text, str):
        return None
    start = text.rfind(MARKER)
    if start < 0:
        return None
    start += len(MARKER)
    end = text.find("\n", start)
    answer = (text[start:] if end < 0 else text[start:end]).strip()
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return None
    return answer


def parse_int(answer: str | None) -> int | None:
    """An integer answer, or None when `answer` is not one.

    Accepts surrounding whitespace, a leading `+`/`-` (U+2212 minus too), space between sign
    and digits, leading zeros, thousands commas (`1,234`) and a zero fraction (`12.0`).
    Rejects everything else: `4 32`, `12.5`, `abc`, `0x1f`, `1e3`.
    """
    if answer is None or len(answer) > MAX_ANSWER_CHARS:
        return None
    s = _SIGN_SPACE.sub(r"\1", answer.strip().replace("\u2212", "-"))
    if not _INT.fullmatch(s):
        return None
    return int(s.split(".")[0].replace(",", ""))


def numeric_score(completion: str, gold: str) -> float:
    """1.0 when the completion's final `####` answer equals the integer `gold`, else 0.0."""
    predicted = parse_int(extract_answer(completion))
    return 1.0 if predicted is not None and predicted == int(gold) else 0.0
