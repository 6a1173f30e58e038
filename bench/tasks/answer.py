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


# ---------------------------------------------------------------------------------------------
# Extractors: how a data task finds the final answer in a worked solution and in a completion.
# "####" is the strict convention above; "boxed" is MATH's `\boxed{...}` (the last one, read
# with math-verify's own extraction from latex2sympy2_extended); "last_number" is the last
# number in the text, the lenient fallback many GSM8K evaluations use.

_LAST_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?", re.ASCII)


def extract_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`); None when there is none, it is
    unclosed, empty or longer than MAX_ANSWER_CHARS. Adjacent boxes join with commas, as in
    math-verify (`\\boxed{3}, \\boxed{4}` -> "3,4")."""
    if not isinstance(text, str) or ("\\boxed" not in text and "\\fbox" not in text):
        return None
    from latex2sympy2_extended.math_normalization import extract_boxed_content

    answer = extract_boxed_content(text, mode="last").strip()
    # math-verify returns the rest of the text for an unclosed box, and the text itself for none
    if not answer or answer.startswith("{") or answer == text.strip() or len(answer) > MAX_ANSWER_CHARS:
        return None
    return answer


def extract_last_number(text: str) -> str | None:
    """The last number in the text (thousands commas dropped), or None."""
    if not isinstance(text, str):
        return None
    found = _LAST_NUMBER.findall(text[-10_000:])  # bounds the work on a runaway completion
    return found[-1].replace(",", "") if found else None


EXTRACTORS = {"####": extract_answer, "boxed": extract_boxed, "last_number": extract_last_number}
# How each extractor writes a bare final answer as a completion (the SFT target when a dataset
# has no worked solution).
FORMATS = {"####": "#### {}", "boxed": "\\boxed{{{}}}", "last_number": "{}"}
