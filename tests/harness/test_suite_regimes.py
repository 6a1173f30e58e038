"""Regimes as a suite axis (issue 12): `[regimes.NAME]` tables become task/scale/regime cells in which
every recipe runs at one off-policy degree; bad tables fail with the file, the key and the choices;
`bench suite offpolicy-smoke` runs the axis end to end."""
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from bench import suite as suites

BASE = """\
recipes = ["grpo", "ppo", "dapo"]
seeds = [0, 1]
tasks = ["addition"]
scales = ["nano"]

[budget]
"addition/nano" = 2e9

[train]
lr = 1e-4
"""
REGIMES = """
[regimes.on_policy]

[regimes.mb4]
minibatches = 4
lr = 5e-5

[regimes.lag2]
lag = 2
epochs = 2
"""


def load(tmp_path: Path, text: str) -> suites.Suite:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return suites.load(p)


def test_regimes_become_cells_and_hold_for_every_recipe(tmp_path):
    s = load(tmp_path, BASE + REGIMES)
    assert [c.name for c in s.cells] == ["addition/nano/on_policy", "addition/nano/mb4", "addition/nano/lag2"]
    cfgs = s.expand()
    assert len(cfgs) == 3 * 3 * 2 == len({c.run_id for c in cfgs})
    want = {"on_policy": (0, 1, 1, 1e-4), "mb4": (0, 1, 4, 5e-5), "lag2": (2, 2, 1, 1e-4)}
    for c in cfgs:
        regime = c.tags["regime"]
        assert c.tags["cell"] == f"addition/nano/{regime}"
        u = c.recipe.updates
        assert (c.rollout.lag, u.epochs, u.minibatches, c.train.lr) == want[regime], (c.recipe.name, regime)
    # ppo's own default (4 mini-batches) gives way to the on-policy control's single update
    ppo = next(c for c in cfgs if c.recipe.name == "ppo" and c.tags["regime"] == "on_policy")
    assert ppo.recipe.updates.minibatches == 1
    assert [c.tags["regime"] for c in s.expand(s.parse_only(["regime=lag2"]))] == ["lag2"] * 6
    with pytest.raises(ValueError, match="valid: on_policy, mb4, lag2"):
        s.parse_only(["regime=lag3"])


def test_a_regime_may_run_a_subset_of_recipes_and_cells(tmp_path):
    text = BASE.replace('tasks = ["addition"]', 'tasks = ["addition", "chain_sum"]').replace(
        '"addition/nano" = 2e9', '"addition/nano" = 2e9\n"chain_sum/nano" = 2e9')
    s = load(tmp_path, text + '[regimes.on_policy]\n[regimes.mb4]\nminibatches = 4\nrecipes = ["dapo", "grpo"]\n'
                              'cells = ["addition/nano"]\n')
    assert [c.name for c in s.cells] == ["addition/nano/on_policy", "addition/nano/mb4", "chain_sum/nano/on_policy"]
    assert s.cell_recipes("addition/nano/mb4") == ("grpo", "dapo")  # the suite's order
    assert s.cell_recipes("chain_sum/nano/on_policy") == ("grpo", "ppo", "dapo")
    cfgs = s.expand()
    assert len(cfgs) == (3 + 2 + 3) * 2
    assert {c.recipe.name for c in cfgs if c.tags["regime"] == "mb4"} == {"grpo", "dapo"}
    # the regime record of a run is its off-policy degree only
    from bench.config import Regime
    mb4 = next(c for c in cfgs if c.tags["regime"] == "mb4")
    assert Regime.of(mb4).record() == {"name": "mb4", "lag": 0, "epochs": 1, "minibatches": 4, "updates_per_batch": 4}
    # a subset changes no run id: the same runs as the unrestricted suite's
    full = load(tmp_path, text + '[regimes.on_policy]\n[regimes.mb4]\nminibatches = 4\n')
    assert {c.run_id for c in cfgs} <= {c.run_id for c in full.expand()}


def test_a_regime_may_run_more_seeds_and_shares_the_suites_run_ids(tmp_path):
    s = load(tmp_path, BASE + '[regimes.on_policy]\n[regimes.mb4]\nminibatches = 4\nrecipes = ["grpo", "dapo"]\nseeds = 5\n')
    assert s.cell_seeds("addition/nano/on_policy") == (0, 1) and s.cell_seeds("addition/nano/mb4") == (0, 1, 2, 3, 4)
    assert s.all_seeds == (0, 1, 2, 3, 4)
    cfgs = s.expand()
    assert len(cfgs) == 3 * 2 + 2 * 5 == len({c.run_id for c in cfgs})
    assert sorted(c.seed for c in cfgs if c.tags["regime"] == "mb4" and c.recipe.name == "dapo") == [0, 1, 2, 3, 4]
    # the extra seeds add runs; the shared ones are the same experiments as without them
    fewer = load(tmp_path, BASE + '[regimes.on_policy]\n[regimes.mb4]\nminibatches = 4\nrecipes = ["grpo", "dapo"]\n')
    assert {c.run_id for c in fewer.expand()} < {c.run_id for c in cfgs}
    # --only seed= accepts a regime's extra seeds, and selects only the cells that run them
    assert {c.tags["regime"] for c in s.expand(s.parse_only(["seed=4"]))} == {"mb4"}
    with pytest.raises(ValueError, match="valid: 0, 1, 2, 3, 4"):
        s.parse_only(["seed=5"])
    # a regime's own budget sizes its cells; the others keep the suite's
    sized = load(tmp_path, BASE + '[regimes.on_policy]\n[regimes.mb4]\nminibatches = 4\nbudget = 1e9\n')
    assert {c.name: (c.budget.value, c.budget.kind) for c in sized.cells} == {
        "addition/nano/on_policy": (2e9, "flops"), "addition/nano/mb4": (1e9, "flops")}
    assert {c.budget.value for c in sized.expand() if c.tags["regime"] == "mb4"} == {1e9}
    steps = load(tmp_path, BASE + '[regimes.mb4]\nminibatches = 4\nbudget = "12steps"\n')
    assert str(steps.cells[0].budget) == "12steps"
    # a list works as in the suite's own `seeds`
    listed = load(tmp_path, BASE + '[regimes.mb4]\nminibatches = 4\nseeds = [0, 7]\n')
    assert listed.cell_seeds("addition/nano/mb4") == (0, 7)


def test_regimes_that_differ_only_in_seeds_share_runs_and_both_cells_read_them(tmp_path):
    s = load(tmp_path, BASE + '[regimes.on_policy]\n[regimes.on_policy4]\nrecipes = ["grpo", "dapo"]\nseeds = 4\n')
    cfgs = s.expand()
    ids = [c.run_id for c in cfgs]
    assert len(ids) == 3 * 2 + 2 * 4 and len(set(ids)) == 3 * 2 + 2 * 2  # seeds 0, 1 of grpo and dapo are shared
    from bench.harness.runner import unique_runs
    assert [c.run_id for c in unique_runs(cfgs)] == list(dict.fromkeys(ids))
    from bench.report import data
    runs = data.load(s, tmp_path / "results").runs  # every cell lists its runs, shared or not
    assert runs.height == 14
    grpo0 = next(c.run_id for c in cfgs if c.recipe.name == "grpo" and c.seed == 0)
    assert sorted(runs.filter(runs["run_id"] == grpo0)["cell"].to_list()) == [
        "addition/nano/on_policy", "addition/nano/on_policy4"]


def test_without_regimes_cells_and_run_ids_are_unchanged(tmp_path):
    plain = load(tmp_path, BASE)
    assert [c.name for c in plain.cells] == ["addition/nano"]
    assert all("regime" not in c.tags for c in plain.expand())
    ppo = next(c for c in plain.expand() if c.recipe.name == "ppo")
    assert ppo.recipe.updates.minibatches == 4 and ppo.to_dict()["rollout"] == "native"
    # the on-policy regime's grpo is the same experiment as the plain suite's grpo: the same run id
    with_regimes = load(tmp_path, BASE + REGIMES)
    pick = lambda s, cell: {(c.recipe.name, c.seed): c.run_id for c in s.expand() if c.tags["cell"] == cell}  # noqa: E731
    assert pick(with_regimes, "addition/nano/on_policy")[("grpo", 0)] == pick(plain, "addition/nano")[("grpo", 0)]
    assert pick(with_regimes, "addition/nano/on_policy")[("ppo", 0)] != pick(plain, "addition/nano")[("ppo", 0)]


@pytest.mark.parametrize("extra, key, needle", [
    ("[regimes.lag2]\nlagg = 2\n", "regimes.lag2.lagg",
     "valid: name, lag, epochs, minibatches, lr, grad_clip, precision, recipes, cells, seeds, budget, warmstarts (did you "
     "mean 'lag'?)"),
    ("[regimes.lag2]\nlag = -1\n", "regimes.lag2.lag", "got -1; expected an integer >= 0"),
    ("[regimes.mb]\nminibatches = 0\n", "regimes.mb.minibatches", "got 0; expected an integer >= 1"),
    ("[regimes.x]\nlag = 1.5\n", "regimes.x.lag", "got 1.5; expected an integer >= 0"),
    ('[regimes."a/b"]\n', "regimes.a/b.name", "expected a string (letters, digits"),
    ("regimes = 3\n", "regimes", "expected a table"),
    ("[regimes.mb4]\nminibatches = 4\nrecipes = [\"grpo\", \"cispo\"]\n", "regimes.mb4.recipes",
     "unknown recipe 'cispo'"),
    ("[regimes.mb4]\nminibatches = 4\nrecipes = [\"dapo\"]\n", "regimes.mb4.recipes", "must include the report's baseline 'grpo'"),
    ("[regimes.mb4]\nminibatches = 4\nrecipes = []\n", "regimes.mb4.recipes", "a non-empty list of names"),
    ("[regimes.mb4]\nminibatches = 4\ncells = [\"chain_sum/nano\"]\n", "regimes.mb4.cells", "unknown cell 'chain_sum/nano'"),
    ("[regimes.mb4]\nseeds = 0\n", "regimes.mb4.seeds", "got 0; expected a count >= 1"),
    ("[regimes.mb4]\nseeds = [1, -2]\n", "regimes.mb4.seeds.1", "got -2; input should be greater than or equal to 0"),
    ("[regimes.mb4]\nbudget = -1\n", "regimes.mb4.budget.value", "got -1.0; expected a finite number > 0"),
    ("[regimes.mb4]\nbudget = \"40stepz\"\n", "regimes.mb4.budget", "40stepz"),
    ("[regimes.lag2]\nlag = 2\n[overrides.dapo]\n\"recipe.updates.minibatches\" = 4\n",
     "overrides.dapo.recipe.updates", "set by the suite's [regimes] for every recipe alike"),
    ("[regimes.fast]\nlr = 1e-3\n[overrides.dapo]\n\"train.lr\" = 4e-4\n", "overrides.dapo.train.lr",
     "set by the suite's [regimes] (a regime gives lr)"),
    ("[regimes.noclip]\ngrad_clip = 0\n[overrides.dapo]\n\"train.grad_clip\" = 2.0\n", "overrides.dapo.train.grad_clip",
     "set by the suite's [regimes] (a regime gives grad_clip)"),
    ("[regimes.noclip]\ngrad_clip = -1\n", "regimes.noclip.grad_clip", "got -1"),
])
def test_bad_regimes_fail_with_file_key_and_choices(tmp_path, extra, key, needle):
    with pytest.raises(ValueError) as e:
        load(tmp_path, extra + BASE if extra.startswith("regimes =") else BASE + extra)
    msg = str(e.value)
    assert msg.startswith(str(tmp_path / "s.toml")) and f": {key}:" in msg and needle in msg, msg


@pytest.mark.e2e  # `make test-e2e`: six runs in a subprocess
def test_offpolicy_smoke_suite_end_to_end(bench_cache, tmp_path):
    """Six runs (grpo, ppo × three regimes): each records its regime; ρ is exactly 1 on-policy and
    moves under 4 mini-batches and at lag 2 (from step 3, when the sampler is two versions behind)."""
    s = suites.load("offpolicy-smoke")
    root = tmp_path / "results"
    p = subprocess.run([sys.executable, "-m", "bench.cli", "suite", "offpolicy-smoke", "--workers", "1", "--threads", "1",
                        "--results", str(root)], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for c in s.expand():
        d = root / "runs" / c.run_id
        meta = json.loads((d / "run.json").read_text())
        regime = c.tags["regime"]
        assert meta["status"] == "finished" and meta["config"]["tags"]["regime"] == regime
        assert meta["regime"]["name"] == regime
        assert meta["regime"]["updates_per_batch"] == (4 if regime == "mb4" else 1)
        steps = pl.read_parquet(d / "steps.parquet")
        assert steps["rollout/lag"].to_list() == ([0.0, 1.0, 2.0] if regime == "lag2" else [0.0, 0.0, 0.0])
        updated = steps.filter(pl.col("filter/kept_frac") > 0)
        if regime == "on_policy":
            assert (updated["policy/ratio_max"] == 1).all() and (updated["policy/ratio_dev_frac"] == 0).all()
        elif regime == "mb4":
            assert (updated["policy/log_ratio_abs_mean"] > 0).all(), c.recipe.name
        else:
            assert (steps["policy/log_ratio_abs_mean"][2] > 0), c.recipe.name


def test_suite_rollout_is_a_backend_name_or_a_table(tmp_path):
    assert load(tmp_path, 'rollout = "vllm"\n' + BASE).expand()[0].rollout.backend == "vllm"
    lagged = load(tmp_path, BASE + "[rollout]\nlag = 1\n").expand()[0]
    assert (lagged.rollout.backend, lagged.rollout.lag) == ("native", 1)
    with pytest.raises(ValueError, match=r": rollout.backend: got 'sglang'; expected one of 'native', 'vllm'"):
        load(tmp_path, 'rollout = "sglang"\n' + BASE)
    with pytest.raises(ValueError, match=r": rollout.lagg: unknown field 'lagg'; valid: backend, lag"):
        load(tmp_path, BASE + "[rollout]\nlagg = 1\n")


def test_each_run_config_is_built_once_in_the_parent_and_once_in_the_worker(tmp_path, monkeypatch):
    """Overrides, a regime with its own lr and several warm starts all merge into one tree that is
    validated once; the parent hands the worker that tree (plus threads and device), which builds the
    run's config once. Counted at RunConfig's constructor, which every construction passes through:
    Section defines __init__, so pydantic validates a tree (`build`: from_dict, replace) through it too."""
    from types import SimpleNamespace

    from bench.config import RunConfig
    from bench.engine import trainer as trainer_mod
    from bench.harness import runner, worker

    s = load(tmp_path, BASE + REGIMES.replace("epochs = 2", "epochs = 2\nwarmstarts = 2")
             + '\n[overrides.dapo]\n"train.weight_decay" = 0.01\n"recipe.objective.eps_high" = 0.3\n')
    built = []
    init = RunConfig.__init__

    def counted_init(self, **kw):
        built.append("init")
        init(self, **kw)

    first = s.expand()[0].to_dict()
    monkeypatch.setattr(RunConfig, "__init__", counted_init)
    RunConfig.from_dict(first)
    assert built == ["init"]  # a tree's validation is counted
    built.clear()
    cfgs = s.expand()
    assert len(built) == len(cfgs) == 18  # one each, patched or not
    dapo = [c for c in cfgs if c.recipe.name == "dapo" and c.tags["regime"] == "lag2"]
    assert dapo[0].train.weight_decay == 0.01 and dapo[0].recipe.objective.eps_high == 0.3 and dapo[0].rollout.lag == 2
    assert [c.warmstart.seed for c in dapo] == [0, 1]
    plan = runner.make_plan(s, len(cfgs), workers=1, threads=1)
    built.clear()
    jobs = runner.job_configs(cfgs, plan)
    assert built == [] and all(RunConfig.from_dict(d).run_id == rid for rid, d in jobs.items())

    class FakeTrainer:  # what run_one builds and runs; no training here
        def __init__(self, cfg, **kw):
            self.cfg = cfg

        def run(self):
            return SimpleNamespace(status="finished", reason="", final={"eval/acc_greedy": 0.5})

    monkeypatch.setattr(trainer_mod, "Trainer", FakeTrainer)
    built.clear()
    rid, d = next(iter(jobs.items()))
    (out,) = worker.run_job([d], str(tmp_path / "results"))
    assert out["run_id"] == rid and out["status"] == "finished" and built == ["init"]
