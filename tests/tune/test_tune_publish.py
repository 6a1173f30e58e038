"""Publishing a suite at committed tuned settings (issue 23, item 5): the report's data holds the
tuning trials that chose the settings and the runs at default settings beside the tuned ones, so
the whole chain regenerates from reports/NAME/data; either missing is refused before anything is
written, and `--defaults` publishes the suite at its own settings."""
import json
import shutil

import pytest

from bench import publish, suite as suites
from bench.cli import main
from tune_helpers import write_tiny

pytestmark = pytest.mark.e2e  # `make test-e2e`: three publishes of trained runs

GRID = """
[tune.space.grpo]
"train.lr" = {choices = [1e-4, 1e-3]}
"train.group_size" = false
"recipe.updates.minibatches" = false
"recipe.objective.eps_low" = false
"recipe.objective.eps_high" = false
"recipe.kl.coef" = false
"""


def _clean(root) -> None:
    """Mark every record as trained from a clean commit (this checkout may be dirty while tests run)."""
    for f in (root / "runs").glob("*/run.json"):
        m = json.loads(f.read_text())
        m.update(git_dirty=False, git_commit=m["git_commit"] or "0" * 40)
        f.write_text(json.dumps(m))


def test_publish_at_tuned_settings_carries_trials_and_defaults(tmp_path, bench_cache, capsys):
    text = write_tiny(tmp_path / "t.toml").read_text()
    text = text.replace('recipes = ["grpo", "rloo", "topr"]', 'recipes = ["grpo"]').replace("seeds = [0, 1]", "seeds = [0]")
    text = text.replace("trials = 3", 'trials = 2\nsampler = "grid"\npruner = "none"')
    path = tmp_path / "suites" / "tt.toml"
    path.parent.mkdir()
    path.write_text(text.split("[tune.space.grpo]")[0] + GRID)
    root, reports = tmp_path / "results", tmp_path / "reports"
    common = ["--threads", "1", "--results", str(root)]
    assert main(["tune", str(path), "--all", "--workers", "1", *common]) == 0
    (path.parent / "tuned").mkdir()
    shutil.copy(root / "tuned" / "tt.toml", path.parent / "tuned" / "tt.toml")  # committed beside the suite
    s = suites.load(path)
    assert s.tuned_from == path.parent / "tuned" / "tt.toml"
    assert main(["suite", str(path), "--workers", "1", "--no-report", *common]) == 0  # at tuned settings
    _clean(root)
    with pytest.raises(ValueError, match=r"1 of the 1 runs of suite tt at default settings have no finished record"
                                         r".*`bench suite tt --defaults` runs them"):
        publish.publish(s, root, reports)
    assert not (reports / "tt").exists()
    assert main(["suite", str(path), "--defaults", "--workers", "1", "--no-report", *common]) == 0
    _clean(root)
    capsys.readouterr()
    publish.publish(s, root, reports)
    assert "published 1 runs and 3 tuning and default-settings runs" in capsys.readouterr().out
    published = {p.name for p in (reports / "tt" / "data" / "runs").iterdir()}
    assert published == {p.name for p in (root / "runs").iterdir()} and len(published) == 4
    md = (reports / "tt" / "report.md").read_text()
    assert "## Tuning" in md and "other recorded run" not in md  # defaults and trials are not stale runs

    publish.publish(s, reports / "tt" / "data", reports)  # republishing from the report's own data
    assert {p.name for p in (reports / "tt" / "data" / "runs").iterdir()} == published

    for d in (root / "runs").iterdir():  # without the trials: refused, and nothing written
        if json.loads((d / "run.json").read_text())["config"]["tags"].get("study"):
            shutil.rmtree(d)
    with pytest.raises(ValueError, match=r"no `bench tune` trial of it is recorded"):
        publish.publish(s, root, tmp_path / "reports2")
    assert not (tmp_path / "reports2" / "tt").exists()
    assert main(["publish", str(path), "--defaults", "--results", str(root), "--reports", str(tmp_path / "reports3")]) == 0
    assert len(list((tmp_path / "reports3" / "tt" / "data" / "runs").iterdir())) == 1
