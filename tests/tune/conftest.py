import pytest
from tune_helpers import write_tiny


@pytest.fixture
def tiny(tmp_path, bench_cache):
    """The tiny suite's file (a private warm-start cache for the session)."""
    return write_tiny(tmp_path / "tiny.toml")
