"""The shared answer format: the text after the last `####`, parsed strictly as an integer."""

import pytest

from bench.tasks import extract_answer, parse_int
from bench.tasks.answer import MAX_ANSWER_CHARS, numeric_score


@pytest.mark.parametrize("text, answer", [
    ("7+5=12\n#### 432", "432"),
    ("####432", "432"),
    ("  ####   -17  \n", "-17"),
    ("#### 1\n#### 2", "2"),                  # the last marker wins
    ("#### 5\nthen some trailing text", "5"),  # the rest of the line, not of the text
    ("x=3 #### 9", "9"),
    ("#####7", "7"),
    ("#### 2+4+7", "2+4+7"),
])
def test_extract_answer(text, answer):
    assert extract_answer(text) == answer


@pytest.mark.parametrize("text", [
    "", "no marker", "432", "####", "####   ", "#### \n5", "### 5",
    "#### " + "9" * (MAX_ANSWER_CHARS + 1), None, 42, b"#### 5",
])
def test_extract_answer_none(text):
    assert extract_answer(text) is None


@pytest.mark.parametrize("s, value", [
    ("432", 432), ("+432", 432), ("-432", -432), (" - 432 ", -432), ("\u2212" + "7", -7),
    ("0432", 432), ("1,234", 1234), ("12.0", 12), ("12.", 12), ("-0", 0),
])
def test_parse_int(s, value):
    assert parse_int(s) == value


@pytest.mark.parametrize("s", [
    None, "", "abc", "4 32", "12.5", "1e3", "0x1f", "1,23", "12,", "--3", "+-3", "3-", "½", "٣",
    "9" * (MAX_ANSWER_CHARS + 1),
])
def test_parse_int_rejects(s):
    assert parse_int(s) is None


def test_numeric_score():
    assert numeric_score("3+4=7\n#### 7", "7") == 1.0
    assert numeric_score("#### +7 ", "7") == 1.0
    assert numeric_score("#### 8", "7") == 0.0
    assert numeric_score("#### 7\n#### 8", "7") == 0.0  # a later answer overrides
    assert numeric_score("7", "7") == 0.0               # no marker, no reward
    assert numeric_score("#### -7", "-7") == 1.0
