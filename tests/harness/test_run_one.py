"""One owner of "run one run" (issue 46, item 4): `bench run`, a suite's workers and `bench tune`'s
trials all train through `worker.run_one`, and a process builds each run's RunConfig once.

Builds are counted at pydantic's validator, the one door every RunConfig goes through (the
constructor, `from_dict`, `compose`, `with_values`, `replace`), by the run id of what it built."""
from collections import Counter

import pytest

from bench import suite as suites
from bench.cli import main
from bench.config import RunConfig, run_id_of
from bench.harness import runner, worker
from bench.tune import settings as tune_settings, study

SMALL = ["--set", "warmstart.steps=5", "--set", "warmstart.batch_size=8", "--set", "warmstart.eval_examples=8",
         "--set", "eval.n_examples=8", "--set", "eval.k=0", "--set", "train.prompts_per_step=2",
         "--set", "train.group_size=2", "--set", "train.max_new_tokens=16"]
SUITE = """\
recipes = ["grpo"]
seeds = [0, 1]
tasks = ["addition"]
scales = ["nano"]
budget = "1steps"

[train]
prompts_per_step = 2
group_size = 2
max_new_tokens = 16

[eval]
n_examples = 8
k = 0

[warmstart]
steps = 5
batch_size = 8
eval_examples = 8

[resources]
threads = 1

[tune]
trials = 2
startup_trials = 1

[tune.space.grpo]
"train.lr" = {low = 1e-6, high = 1e-5, log = true}
"train.group_size" = false
"recipe.updates.minibatches" = false
"recipe.objective.eps_low" = false
"recipe.objective.eps_high" = false
"recipe.kl.coef" = false
"""


class Builds:
    """RunConfigs built, by run id (a nested validation, pydantic re-entering through the custom
    __init__ of bench.typed.Section, is the same build)."""

    def __init__(self, monkeypatch):
        self.by_id: Counter = Counter()
        self.depth = 0
        inner = RunConfig.__pydantic_validator__
        counter = self

        class Counting:
            def validate_python(self, *a, **kw):
                counter.depth += 1
                try:
                    out = inner.validate_python(*a, **kw)
                finally:
                    counter.depth -= 1
                if counter.depth == 0:
                    counter.by_id[(kw.get("self_instance") or out).run_id] += 1
                return out

            def __getattr__(self, name):
                return getattr(inner, name)

        monkeypatch.setattr(RunConfig, "__pydantic_validator__", Counting())

    def take(self) -> Counter:
        out, self.by_id = self.by_id, Counter()
        return out


@pytest.fixture
def calls(monkeypatch):
    """The configs `worker.run_one` was called with, in order (it still runs them)."""
    seen: list[RunConfig] = []
    real = worker.run_one

    def spy(cfg, root, **kw):
        seen.append(cfg)
        return real(cfg, root, **kw)

    monkeypatch.setattr(worker, "run_one", spy)
    return seen


def test_bench_run_trains_through_run_one_and_builds_its_config_once(bench_cache, tmp_path, monkeypatch, calls):
    builds = Builds(monkeypatch)
    args = ["run", "--recipe", "grpo", "--task", "addition", "--scale", "nano", "--budget", "1steps", "--quiet",
            "--threads", "1", *SMALL, "--results", str(tmp_path)]
    assert main(args) == 0
    (cfg,) = calls
    assert builds.take() == {cfg.run_id: 1}
    assert main(args) == 0  # recorded: skipped, through the same function
    assert len(calls) == 2 and calls[1].run_id == cfg.run_id and builds.take() == {cfg.run_id: 1}


def test_a_suite_builds_each_config_once_in_the_parent_and_once_in_its_worker(bench_cache, tmp_path, monkeypatch,
                                                                              calls):
    path = tmp_path / "tiny.toml"
    path.write_text(SUITE)
    builds = Builds(monkeypatch)
    in_worker: list[Counter] = []

    class InProcess:  # the local executor's job, here: what a spawned worker runs (worker.run_job)
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def run(self, jobs, on_done):
            for job in jobs:
                outer = builds.take()
                for row in worker.run_job(*job):
                    on_done(row)
                in_worker.append(builds.take())
                builds.by_id.update(outer)

    monkeypatch.setattr(runner, "_executor", lambda plan: InProcess())
    assert main(["suite", str(path), "--results", str(tmp_path / "results"), "--no-report"]) == 0
    ids = sorted(c.run_id for c in calls)
    assert len(ids) == 2 and len(set(ids)) == 2
    assert builds.take() == dict.fromkeys(ids, 1), "the parent builds each run's config once"
    assert [dict(c) for c in in_worker] == [{c.run_id: 1} for c in calls], "and each worker once, from its tree"


def test_tuning_trials_train_through_run_one_and_build_their_configs_once(bench_cache, tmp_path, monkeypatch, calls):
    path = tmp_path / "tiny.toml"
    path.write_text(SUITE)
    s = suites.load(str(path))
    (spec,) = study.plan(s, ["grpo"], list(s.cells), tune_settings.from_suite(s))
    bases = [run_id_of(b) for b in spec.bases]  # the study's config before sampling, one per tuning seed
    builds = Builds(monkeypatch)
    assert main(["tune", str(path), "--recipe", "grpo", "--workers", "1", "--threads", "1",
                 "--results", str(tmp_path / "results")]) == 0  # one worker: the trials run in this process
    assert sorted(c.tags["trial"] for c in calls) == [0, 1]
    assert all(c.tags["study"] == "tiny/addition/nano/grpo" and "suite" not in c.tags for c in calls)
    counts = builds.take()
    assert [counts[c.run_id] for c in calls] == [1, 1], counts
    assert [counts[b] for b in bases] == [1], "the study's base is built once too (plan)"
