"""The published math-small report regenerates byte-identically from the runs committed beside it
(`make test-slow`: building it draws every figure, ~15 s). A failure after a change to the report
code means the published report is out of date: regenerate it with the command in its manifest."""
from pathlib import Path

import pytest

from bench import report

PUBLISHED = Path(__file__).resolve().parents[2] / "reports" / "math-small"


@pytest.mark.slow
def test_published_math_small_report_regenerates_byte_identically(tmp_path):
    out = report.build("math-small", PUBLISHED / "data", tmp_path / "math-small")
    names = ["report.md"] + sorted(p.name for p in PUBLISHED.glob("*.csv"))
    assert sorted(p.name for p in out.glob("*.csv")) == names[1:]
    for name in names:
        assert (out / name).read_bytes() == (PUBLISHED / name).read_bytes(), name
