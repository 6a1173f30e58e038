"""Every published report regenerates byte-identically from the runs committed beside it
(`make test-slow`: building one draws every figure, ~15 s each). A failure after a change to the
report code means a published report is out of date: regenerate it with the command in its manifest."""
from pathlib import Path

import pytest

from bench import report

REPORTS = Path(__file__).resolve().parents[2] / "reports"
PUBLISHED = sorted(p.parent.name for p in REPORTS.glob("*/data"))


def test_published_reports_are_found():
    assert {"math-small", "grad-clip", "reasoning", "addition-format", "claims", "offpolicy-pilot"} <= set(PUBLISHED)


@pytest.mark.slow
@pytest.mark.parametrize("name", PUBLISHED)
def test_published_report_regenerates_byte_identically(name, tmp_path):
    published = REPORTS / name
    out = report.build(name, published / "data", tmp_path / name)
    names = ["report.md"] + sorted(p.name for p in published.glob("*.csv"))
    assert sorted(p.name for p in out.glob("*.csv")) == names[1:]
    for file in names:
        assert (out / file).read_bytes() == (published / file).read_bytes(), file
