"""What a run records about the code that trained it, and the warning a suite gives when the
checkout is modified (its runs would be recorded git_dirty, and `bench publish` refuses those)."""
import contextlib
import io
import re

from bench import results, suite as suites
from bench.harness import runner


def test_the_checkout_state_is_a_commit_and_porcelain_lines():
    commit, changes = results.git_state()
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    assert all(isinstance(c, str) and c.strip() for c in changes)


def test_a_dirty_run_records_what_made_it_dirty(monkeypatch):
    monkeypatch.setattr(results, "git_state", lambda: ("a" * 40, ["?? suite.log", " M bench/x.py"]))
    env = results.environment()
    assert env["git_dirty"] is True and env["git_changes"] == ["?? suite.log", " M bench/x.py"]
    monkeypatch.setattr(results, "git_state", lambda: ("a" * 40, []))
    env = results.environment()
    assert env["git_dirty"] is False and "git_changes" not in env  # clean records are as before


def test_a_suite_on_a_modified_checkout_warns_before_running(monkeypatch, tmp_path):
    class NoExecutor:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def run(self, jobs, update):
            pass

    monkeypatch.setattr(runner, "_executor", lambda plan: NoExecutor())
    monkeypatch.setattr(results, "git_state", lambda: ("b" * 40, ["?? suite.log"]))
    smoke = suites.load("smoke")
    cfgs = smoke.expand()
    out = io.StringIO()
    plan = runner.Plan("local", 1, 1, "cpu")
    with contextlib.redirect_stderr(io.StringIO()):
        runner.run_suite(smoke, cfgs, tmp_path / "results", plan, out=out)
    text = out.getvalue()
    assert "warning: the checkout at bbbbbbbbbbbb has uncommitted changes (?? suite.log)" in text
    assert "bench publish` will refuse them" in text
    monkeypatch.setattr(results, "git_state", lambda: ("b" * 40, []))
    out = io.StringIO()
    runner.run_suite(smoke, cfgs, tmp_path / "results", plan, out=out)
    assert "uncommitted" not in out.getvalue()
