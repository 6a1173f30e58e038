import os

import pytest

import bench  # noqa: F401  first: pins CPU numerics before a test module's torch loads numpy's OpenBLAS (bench/numerics.py)


@pytest.fixture(scope="session")
def bench_cache(tmp_path_factory):
    """A private warm-start cache for the whole test session (never the user's cache)."""
    path = tmp_path_factory.mktemp("bench-cache")
    old = os.environ.get("BENCH_CACHE")
    os.environ["BENCH_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("BENCH_CACHE", None)
    else:
        os.environ["BENCH_CACHE"] = old
