"""Search spaces: the shipped defaults fit every recipe; suite tables change, add and drop ranges;
bad paths and ranges fail before any run, naming the valid choices."""
import re

import pytest

import algorithms
from algorithms import search_spaces
from algorithms.errors import ConfigError, InputError
from bench import suite as suites
from bench.config import Budget, RunConfig
from bench.tune import settings as tune_settings, space as spaces, study
from tune_helpers import TINY


def test_default_spaces_cover_every_recipe_and_fit_its_config():
    s = suites.load("addition-format")
    assert all(set(search_spaces.BASE) <= set(algorithms.search_space(r)) for r in algorithms.names())
    specs = study.plan(s, list(s.recipes), list(s.cells), tune_settings.from_suite(s))
    assert len(specs) == sum(len(s.cell_recipes(c)) for c in s.cells)  # each cell's own recipes
    cell = "addition/nano/on_policy"
    by = {(p.recipe, p.cell.replace(cell, "addition/nano")): p for p in specs}
    paths = {r: [q.path for q in by[(r, "addition/nano")].space] for r in s.recipes}
    assert paths["cispo"][-1] == "recipe.objective.ratio_max"
    assert "recipe.kl.coef" in paths["grpo"] and "recipe.kl.coef" not in paths["dapo"]  # β only where the paper has KL
    assert {"recipe.advantage.alpha", "recipe.nll_coef"} <= set(paths["vapo"])
    lr = by[("grpo", "addition/nano")].space[0]
    assert (lr.kind, lr.low, lr.high) == ("log_float", 1e-5, 5e-4)
    assert by[("grpo", "addition/nano")].n_evals == len(s.eval.fractions) - 1  # evaluations after the start
    # the trials' seed is outside the suite's seeds, the base config is the suite's (overrides included)
    assert by[("vapo", "addition/nano")].base["seed"] == 1000
    assert by[("vapo", "addition/nano")].base["recipe"]["critic"]["pretrain_steps"] == 5


def test_kinds_from_the_table():
    assert spaces.Param.parse("x", {"low": 1, "high": 4}, "w").kind == "int"
    assert spaces.Param.parse("x", {"low": 0.1, "high": 4}, "w").kind == "float"
    assert spaces.Param.parse("x", {"low": 1e-5, "high": 1e-3, "log": True}, "w").kind == "log_float"
    assert spaces.Param.parse("x", {"choices": [4, 8]}, "w").choices == (4, 8)


@pytest.mark.parametrize("spec, msg", [
    ({"low": 1, "high": 1}, "need low < high"),
    ({"low": 0, "high": 1, "log": True}, "low > 0 for a log range"),
    ({"low": 1}, "missing bound"),
    ({"choices": []}, "non-empty list"),
    (0.5, "expected a table"),
])
def test_bad_ranges(spec, msg):
    with pytest.raises(ValueError, match=msg):
        spaces.Param.parse("train.lr", spec, "w")


def test_suite_table_overrides_adds_and_drops(tiny):
    s = suites.load(tiny)
    settings = tune_settings.from_suite(s)
    grpo, rloo = study.plan(s, ["grpo", "rloo"], list(s.cells), settings)
    assert [str(p) for p in grpo.space] == ["train.lr in [1e-06, 1e-05] (log)"]
    assert [p.path for p in rloo.space] == ["train.lr"]
    assert settings.trials == 3 and settings.startup_trials == 2
    assert settings.objective == "auc" and settings.accuracy == "eval/acc_greedy"  # the declared primary (default auc)


def test_tuning_reads_what_the_report_compares(tmp_path):
    """The objective defaults to the suite's declared primary and reads its declared accuracy
    column; a [tune] objective still wins; [tune] accuracy is refused (the report sets it)."""
    p = tmp_path / "s.toml"
    base = TINY.format(steps=4, n_examples=16).split("[tune]")[0]
    p.write_text(base + '[report]\nprimary = "final"\naccuracy = "eval/acc_formatted"\n')
    s = tune_settings.from_suite(suites.load(p))
    assert (s.objective, s.accuracy) == ("final", "eval/acc_formatted")
    assert tune_settings.from_suite(suites.load(p), objective="auc").objective == "auc"
    rows = [{"fraction": 0.0, "eval/acc_greedy": 0.1, "eval/acc_formatted": 0.2},
            {"fraction": 1.0, "eval/acc_greedy": 0.3, "eval/acc_formatted": 0.6}]
    assert study.objective_value(rows, "final", "eval/acc_formatted") == 0.6
    assert study.objective_value(rows, "auc", "eval/acc_formatted") == pytest.approx(0.4)
    p.write_text(base + '[tune]\naccuracy = "eval/avg_k"\n')
    with pytest.raises(ValueError, match="tune.accuracy: the column tuning reads is tune.metric"):
        tune_settings.from_suite(suites.load(p))


@pytest.mark.parametrize("metric, msg", [
    ("eval/acc_greedy", None),
    ("eval/pass@2", None),  # TINY's eval.k = 2: pass@1 and pass@2 are logged
    ("eval/pass@4", "eval.k = 2 logs pass@1..pass@2"),
    ("eval/pass@3", "eval.k = 2 logs pass@1..pass@2"),
    ("eval/acc_greedyy", "unknown metric"),
    (4, "unknown metric"),
])
def test_tune_metric_reads_a_column_every_evaluation_logs(tmp_path, metric, msg):
    """tune.metric: the objective may read greedy accuracy or a point of the coverage curve (issue 40,
    item 4) instead of the report's accuracy; a K beyond eval.k (never logged) or an unknown column is
    one line naming the valid choices."""
    p = tmp_path / "s.toml"
    base = TINY.format(steps=4, n_examples=16).split("[tune]")[0]
    p.write_text(base + '[report]\naccuracy = "eval/acc_formatted"\n[tune]\nmetric = ' +
                 (f'"{metric}"' if isinstance(metric, str) else str(metric)) + "\n")
    if msg is None:
        s = tune_settings.from_suite(suites.load(p))
        assert s.accuracy == metric and s.objective == "auc"
        return
    with pytest.raises(ConfigError, match=f"tune.metric: got .*{re.escape(msg)}.*expected one of eval/acc_greedy, "
                                          ".*eval/pass@1, eval/pass@2$"):
        tune_settings.from_suite(suites.load(p))


@pytest.mark.parametrize("extra, msg", [
    ('[tune.space.grpo]\n"recipe.objective.eps_hgh" = {low = 0.1, high = 0.3}\n',
     "recipe.objective.eps_hgh: ppo_clip has no field 'eps_hgh'; fields: .*eps_high"),
    ('[tune.space.rloo]\n"recipe.objective.eps_high" = {low = 0.1, high = 0.3}\n',
     "recipe.objective.eps_high: is_pg has no field 'eps_high'; fields: none"),
    ('[tune.space.grpo]\n"eval.every" = {choices = [0.5]}\n', "only recipe.\\* and train.\\* paths can be tuned"),
    ('[tune.space.grpo]\n"train.lr" = {low = -1.0, high = 1e-3}\n', "train.lr: got -1.0; expected a finite number > 0"),
])
def test_bad_paths_name_the_valid_fields(tmp_path, extra, msg):
    text = (tmp_path / "t.toml")
    base = TINY.format(steps=4, n_examples=16).split("[tune.space.grpo]")[0]
    text.write_text(base + extra)
    s = suites.load(text)
    with pytest.raises(ValueError, match=msg):
        study.plan(s, list(s.recipes), list(s.cells), tune_settings.from_suite(s))


@pytest.mark.parametrize("tune, msg", [
    ('objective = "best"', "unknown objective 'best'"),
    ('pruner = "medain"', "did you mean 'median'"),
    ("seed = 0", "tuning seed\\(s\\) \\[0\\] are among the suite's evaluation seeds \\[0, 1\\]"),
    ("seeds = [1000, 1, 0]", "tuning seed\\(s\\) \\[0, 1\\] are among the suite's evaluation seeds"),
    ("seeds = []", "tune.seeds must be a non-empty list of distinct ints"),
    ("seeds = [1000, 1000]", "tune.seeds must be a non-empty list of distinct ints"),
    ("seeds = [1000]\nseed = 1001", "tune.seed and tune.seeds both given"),
    ('sampler = "grd"', "unknown sampler 'grd'.*did you mean 'grid'"),
    ('cell = "gcd/nano"', "tune.cell: unknown cell 'gcd/nano'.*addition/nano"),
    ("trails = 3", "unknown \\[tune\\] key 'trails'.*did you mean 'trials'"),
    ("eval = {every = 0.5}", "tune.eval: got \\['every'\\]; a trial's evaluation may change only k, sampled_examples, ood_examples"),
    ('eval = {k = 1}\nmetric = "eval/pass@2"', "tune.metric: got 'eval/pass@2' \\(the trials' eval.k = 1 logs pass@1..pass@1\\)"),
])
def test_bad_tune_settings(tmp_path, tune, msg):
    p = tmp_path / "t.toml"
    p.write_text(TINY.format(steps=4, n_examples=16).replace("trials = 3", tune))
    with pytest.raises(ValueError, match=msg):
        tune_settings.from_suite(suites.load(p))


def test_tuning_seeds_and_grid_settings(tmp_path):
    p = tmp_path / "t.toml"
    p.write_text(TINY.format(steps=4, n_examples=16).replace("trials = 3", "trials = 3\nseeds = [1000, 1001]"))
    s = suites.load(p)
    t = tune_settings.from_suite(s)
    assert t.seeds == (1000, 1001) and t.seed == 1000 and t.sampler == "tpe" and t.cell is None
    specs = study.plan(s, ["grpo"], list(s.cells), t)
    assert [b["seed"] for b in specs[0].bases] == [1000, 1001]
    p.write_text(TINY.format(steps=4, n_examples=16).replace("trials = 3", "seed = 7"))
    assert tune_settings.from_suite(suites.load(p)).seeds == (7,)  # the one-seed shorthand


GRID = """
[tune.space.rloo]
"train.lr" = {choices = [1e-4, 3e-4, 1e-3]}
"train.group_size" = false
"recipe.updates.minibatches" = false
"recipe.kl.coef" = false
"""


@pytest.mark.parametrize("trials, extra, msg", [
    (3, "", None),
    (4, "", "the grid has 3 combinations \\(3\\) but tune.trials = 4"),
    (3, '"recipe.kl.coef" = {low = 0.0, high = 0.1}\n', "recipe.kl.coef is a range"),
])
def test_grid_needs_choices_and_its_size_in_trials(tmp_path, trials, extra, msg):
    p = tmp_path / "t.toml"
    text = TINY.format(steps=4, n_examples=16).replace("trials = 3", f'trials = {trials}\nsampler = "grid"')
    p.write_text(text.split("[tune.space.rloo]")[0] + GRID.replace('"recipe.kl.coef" = false\n', extra or
                                                                    '"recipe.kl.coef" = false\n'))
    s = suites.load(p)
    t = tune_settings.from_suite(s)
    if msg is None:
        (spec,) = study.plan(s, ["rloo"], list(s.cells), t)
        assert study.grid_size(spec.space) == 3
        sampler = study.make_sampler(spec)
        assert type(sampler).__name__ == "GridSampler"
    else:
        with pytest.raises(ValueError, match=msg):
            study.plan(s, ["rloo"], list(s.cells), t)


def test_a_path_the_regime_sets_cannot_be_tuned(tmp_path):
    """A regime's patch is applied last, so a tuned recipe.updates.* (or a regime's lr) would train
    every trial alike: a default range there is dropped, one the suite names is refused."""
    p = tmp_path / "t.toml"
    text = TINY.format(steps=4, n_examples=16).replace("[tune]", "[regimes.mb2]\nminibatches = 2\n\n[tune]")
    p.write_text(text.replace('"recipe.updates.minibatches" = false\n', '"recipe.updates.minibatches" = '
                              '{choices = [1, 2]}\n', 1))  # grpo names it
    s = suites.load(p)
    with pytest.raises(ValueError, match=r"recipe.updates.minibatches is set by the regime of cell addition/nano/mb2.*"
                                         r"\[tune.space.grpo\] \"recipe.updates.minibatches\" = false"):
        study.plan(s, ["grpo"], list(s.cells), tune_settings.from_suite(s))
    p.write_text(text.replace('"recipe.updates.minibatches" = false\n', ""))  # the defaults' range: dropped
    s = suites.load(p)
    for spec in study.plan(s, ["grpo", "rloo", "topr"], list(s.cells), tune_settings.from_suite(s)):
        assert "recipe.updates.minibatches" not in [q.path for q in spec.space]


def test_objective_values():
    rows = [{"fraction": 0.0, "eval/acc_greedy": 0.2}, {"fraction": 0.5, "eval/acc_greedy": 0.4},
            {"fraction": 1.0, "eval/acc_greedy": 0.6}]
    assert study.objective_value(rows, "final") == 0.6
    assert study.objective_value(rows, "auc") == pytest.approx((0.5 * 0.3 + 0.5 * 0.5) / 1.0)
    assert study.objective_value(rows[:2], "auc") == pytest.approx(0.3)
    assert study.shares(6, 2) == [3, 3] and study.shares(7, 3) == [3, 2, 2] and study.shares(0, 2) == [0, 0]


def test_pruners(tiny):
    import optuna

    s = suites.load(tiny)
    for name, cls in (("median", optuna.pruners.MedianPruner), ("hyperband", optuna.pruners.HyperbandPruner),
                      ("none", optuna.pruners.NopPruner)):
        (spec,) = study.plan(s, ["grpo"], list(s.cells), tune_settings.from_suite(s, pruner=name))
        assert isinstance(study.make_pruner(spec), cls)
    assert spec.n_evals == 2  # eval.every = 0.5: the pruner sees evaluations 1 and 2


def test_trial_identity_is_hashed_other_tags_are_not(tiny):

    s = suites.load(tiny)
    cfg = s.run_config(s.cells[0], "grpo", 0)
    assert cfg.replace(tags={"any": "label"}).run_id == cfg.run_id
    t0 = cfg.replace(tags={"study": "tiny/addition/nano/grpo", "trial": 0})
    t1 = cfg.replace(tags={"study": "tiny/addition/nano/grpo", "trial": 1})
    assert len({cfg.run_id, t0.run_id, t1.run_id}) == 3  # two trials sampling the same values: two runs


def test_tuning_starts_from_warm_starts_no_evaluation_run_uses(tmp_path):
    """Each tuning seed trains from a warm start outside the evaluation's (issue 40): by default
    warmstart.seed + 1000 + i mod W, W the cell's warm starts; a list of one's own is used cyclically
    and refused where it meets an evaluation warm start."""
    p = tmp_path / "t.toml"
    three = TINY.format(steps=4, n_examples=16).replace("[tune]", "[regimes.ws3]\nwarmstarts = 3\n\n[tune]").replace(
        "trials = 3", "trials = 3\nseeds = [1000, 1001, 1002, 1003]")
    p.write_text(three)
    s = suites.load(p)
    assert tune_settings.evaluation_warmstarts(s) == {0, 1}  # seeds 0 and 1: warm starts 0 and 1 (s mod 3)
    (spec,) = study.plan(s, ["grpo"], list(s.cells), tune_settings.from_suite(s))
    assert [b["warmstart"]["seed"] for b in spec.bases] == [1000, 1001, 1002, 1000]
    assert [b["seed"] for b in spec.bases] == [1000, 1001, 1002, 1003]
    p.write_text(three.replace("seeds = [1000", "warmstarts = [7, 9]\nseeds = [1000"))
    s = suites.load(p)
    (spec,) = study.plan(s, ["grpo"], list(s.cells), tune_settings.from_suite(s))
    assert [b["warmstart"]["seed"] for b in spec.bases] == [7, 9, 7, 9]
    p.write_text(three.replace("seeds = [1000", "warmstarts = [1, 5]\nseeds = [1000"))
    with pytest.raises(ValueError, match=r"tune.warmstarts \[1\] is among the warm starts the suite's evaluation runs "
                                         r"use \[0, 1\].*choose others \(e.g. from 1000\)"):
        tune_settings.from_suite(suites.load(p))
    p.write_text(TINY.format(steps=4, n_examples=16).replace("trials = 3", "trials = 3\nseeds = [1000, 1001]"))
    s = suites.load(p)  # one warm start in the cell: every tuning seed from the one tuning warm start
    (spec,) = study.plan(s, ["grpo"], list(s.cells), tune_settings.from_suite(s))
    assert [b["warmstart"]["seed"] for b in spec.bases] == [1000, 1000]


@pytest.mark.parametrize("value", ["[]", "[3, 3]", "[-1]", '"a"'])
def test_bad_tuning_warm_starts_name_what_is_expected(tmp_path, value):
    p = tmp_path / "t.toml"
    p.write_text(TINY.format(steps=4, n_examples=16).replace("trials = 3", f"trials = 3\nwarmstarts = {value}"))
    with pytest.raises(ValueError, match="tune.warmstarts must be a non-empty list of distinct ints >= 0"):
        tune_settings.from_suite(suites.load(p))


def test_a_chosen_setting_at_the_edge_of_the_search_is_named():
    """issue 40, item 4: a chosen value at a grid's end (or a range's outer 5%) may hide a better one
    beyond it; `bench tune` names it on stderr and in the tuned file's note."""
    grid = spaces.Param("train.lr", "categorical", choices=(4e-4, 1e-4, 2e-4))  # edges by value, not by order
    beta = spaces.Param("recipe.kl.coef", "categorical", choices=(0.0, 0.04, 0.16))
    agg = spaces.Param("recipe.aggregation.mode", "categorical", choices=("token_mean", "seq_mean_token_mean"))
    rng = spaces.Param("recipe.objective.eps_high", "float", 0.2, 0.4)
    log = spaces.Param("train.critic_lr", "log_float", 1e-4, 1e-2)
    space = (grid, beta, agg, rng, log)
    mid = {"train.lr": 2e-4, "recipe.kl.coef": 0.04, "recipe.aggregation.mode": "token_mean",
           "recipe.objective.eps_high": 0.3, "train.critic_lr": 1e-3}
    assert study.edges(space, mid) == []  # a categorical of names has no edge
    at = study.edges(space, {**mid, "train.lr": 4e-4, "recipe.kl.coef": 0.0, "recipe.objective.eps_high": 0.395,
                             "train.critic_lr": 1.2e-4})
    assert at == ["train.lr = 0.0004 is the grid's largest choice (of 0.0001, 0.0002, 0.0004)",
                  "recipe.kl.coef = 0 is the grid's smallest choice (of 0, 0.04, 0.16)",
                  "recipe.objective.eps_high = 0.395 lies in the high 5% of its range [0.2, 0.4]",
                  "train.critic_lr = 0.00012 lies in the low 5% of its range [0.0001, 0.01]"]
    # log10(1.2e-4) is 4% of the way across two decades from 1e-4; 0.39 is 95%: the boundary is inclusive
    assert study.edges((rng,), {"recipe.objective.eps_high": 0.39}) == \
        ["recipe.objective.eps_high = 0.39 lies in the high 5% of its range [0.2, 0.4]"]
    assert study.edges((rng,), {"recipe.objective.eps_high": 0.385}) == []


def test_a_coefficient_chosen_at_zero_sits_at_its_bound_not_at_an_edge():
    """A grid's smallest choice 0 is an edge only where the config takes a negative value: grpo's KL
    coefficient refuses one (KL.coef >= 0), so beta = 0 is the knob's bound, nothing lies beyond it;
    the largest choice, and a smallest choice above 0, stay edges."""
    cfg = RunConfig.compose(recipe=algorithms.get("grpo"), task="addition", scale="nano", budget=Budget.parse("2steps"))
    beta = spaces.Param("recipe.kl.coef", "categorical", choices=(0.0, 0.01, 0.04))
    assert study.edges((beta,), {"recipe.kl.coef": 0.0}, cfg) == []
    assert study.edges((beta,), {"recipe.kl.coef": 0.0}) == \
        ["recipe.kl.coef = 0 is the grid's smallest choice (of 0, 0.01, 0.04)"]  # without the config: unknown
    assert study.edges((beta,), {"recipe.kl.coef": 0.04}, cfg) == \
        ["recipe.kl.coef = 0.04 is the grid's largest choice (of 0, 0.01, 0.04)"]
    low = spaces.Param("recipe.kl.coef", "categorical", choices=(0.0025, 0.01, 0.04))
    assert study.edges((low,), {"recipe.kl.coef": 0.0025}, cfg) == \
        ["recipe.kl.coef = 0.0025 is the grid's smallest choice (of 0.0025, 0.01, 0.04)"]


def test_an_evaluation_without_a_well_formed_answer_scores_zero():
    """A setting that collapses the format leaves evaluations with no well-formed sampled answer
    (accuracy among them NaN): they score 0, the worst, so the trial is ranked last instead of
    failing (a NaN objective fails an Optuna trial and hides what collapsed)."""
    nan = float("nan")
    rows = [{"fraction": 0.0, "eval/acc_formatted": 0.4}, {"fraction": 0.5, "eval/acc_formatted": nan},
            {"fraction": 1.0, "eval/acc_formatted": nan}]
    assert study.objective_value(rows, "auc", "eval/acc_formatted") == pytest.approx(0.5 * 0.2)
    assert study.objective_value(rows, "final", "eval/acc_formatted") == 0.0
    assert study.objective_value(rows[:2], "final", "eval/acc_formatted") == 0.0


def test_a_changed_space_on_a_study_with_trials_is_refused_in_one_line(tmp_path):
    """Optuna fails every new trial of a study whose categorical choices changed; a grid extended past its
    edge is refused before any run, naming both spaces and the way out."""
    import optuna

    from bench.tune.storage import open_storage

    p = tmp_path / "t.toml"
    text = TINY.format(steps=4, n_examples=16).replace("trials = 3", 'trials = 3\nsampler = "grid"')
    p.write_text(text.split("[tune.space.rloo]")[0] + GRID)
    s = suites.load(p)
    spec = study.plan(s, ["rloo"], list(s.cells), tune_settings.from_suite(s))[0]
    url = str(tmp_path / "t.journal")
    st = study.create(open_storage(url), spec)
    study.create(open_storage(url), spec)  # the same space again: fine, before and after trials
    dist = {"train.lr": optuna.distributions.CategoricalDistribution([1e-4, 3e-4, 1e-3])}
    st.add_trial(optuna.trial.create_trial(params={"train.lr": 1e-4}, distributions=dist, value=0.5))
    study.create(open_storage(url), spec)
    p.write_text(text.replace("trials = 3", "trials = 4").split("[tune.space.rloo]")[0] +
                 GRID.replace("1e-3]", "1e-3, 3e-3]"))
    s = suites.load(p)
    wider = study.plan(s, ["rloo"], list(s.cells), tune_settings.from_suite(s))[0]
    with pytest.raises(InputError, match=r"already searched train.lr in \[0.0001, 0.0003, 0.001\] in this storage, "
                                         r"not train.lr in \[0.0001, 0.0003, 0.001, 0.003\]; tune a changed space "
                                         r"into another --storage"):
        study.create(open_storage(url), wider)


CELLS = """
[regimes.mb2]
minibatches = 2
cells = ["addition/nano"]

[regimes.plain]
cells = ["addition/nano"]
"""


def test_a_cell_can_centre_its_own_grid(tmp_path):
    """[tune.cells.CELL.space.RECIPE] applies after [tune.space.RECIPE], path by path, in that cell only:
    each cell's grid can sit where its own optimum is (tasks want learning rates a factor 4 apart)."""
    p = tmp_path / "t.toml"
    text = TINY.format(steps=4, n_examples=16).replace("[tune]", CELLS + "\n[tune]")
    text = text.replace("trials = 3", 'trials = 3\nsampler = "grid"').split("[tune.space.rloo]")[0] + GRID
    text += ('\n[tune.cells."addition/nano/plain".space.rloo]\n"train.lr" = {choices = [1e-5, 2e-5, 4e-5]}\n')
    p.write_text(text)
    s = suites.load(p)
    t = tune_settings.from_suite(s)
    specs = {spec.cell: spec for spec in study.plan(s, ["rloo"], list(s.cells), t)}
    lr = {c: next(q.choices for q in spec.space if q.path == "train.lr") for c, spec in specs.items()}
    assert lr == {"addition/nano/mb2": (1e-4, 3e-4, 1e-3), "addition/nano/plain": (1e-5, 2e-5, 4e-5)}
    assert t.space_table("rloo", "addition/nano/plain")["recipe.kl.coef"] is False  # the recipe table still applies
    # a cell's table that adds a dimension makes that cell's grid larger than tune.trials: refused, named
    p.write_text(text + '"recipe.kl.coef" = {choices = [0.0, 0.04]}\n')
    s = suites.load(p)
    with pytest.raises(ValueError, match=r"search space of rloo in cell addition/nano/plain: the grid has 6 "
                                         r"combinations \(3 × 2\) but tune.trials = 3"):
        study.plan(s, ["rloo"], list(s.cells), tune_settings.from_suite(s))


@pytest.mark.parametrize("table, msg", [
    ('[tune.cells."gcd/nano/plain".space.rloo]\n"train.lr" = {choices = [1e-5]}',
     r"tune.cells.'gcd/nano/plain': unknown cell 'gcd/nano/plain'.*addition/nano/plain"),
    ('[tune.cells."addition/nano/plain".space.rlo]\n"train.lr" = {choices = [1e-5]}',
     r"tune.cells.'addition/nano/plain'.space.rlo: unknown recipe 'rlo'.*did you mean 'rloo'"),
    ('[tune.cells."addition/nano/plain"]\ntrials = 4',
     r"tune.cells.'addition/nano/plain': only a space table per cell .*got \['trials'\]"),
    ('[tune.cells."addition/nano/plain"]\nspace = 3',
     r"tune.cells.'addition/nano/plain'.space: expected tables"),
])
def test_bad_cell_spaces_name_the_valid_choices(tmp_path, table, msg):
    p = tmp_path / "t.toml"
    p.write_text(TINY.format(steps=4, n_examples=16).replace("[tune]", CELLS + "\n[tune]") + "\n" + table + "\n")
    with pytest.raises(ValueError, match=msg):
        tune_settings.from_suite(suites.load(p))


def test_trials_may_sample_fewer_answers_than_the_evaluation(tmp_path):
    """tune.eval changes only how many answers a trial samples: its objective's points and problems stay
    the suite's, and the suite's own runs keep the suite's evaluation."""
    p = tmp_path / "t.toml"
    p.write_text(TINY.format(steps=4, n_examples=16).replace("trials = 3", "trials = 3\neval = {k = 1, sampled_examples = 8}"))
    s = suites.load(p)
    (spec,) = study.plan(s, ["grpo"], [s.cells[0]], tune_settings.from_suite(s))
    ev = spec.bases[0]["eval"]
    assert (ev["k"], ev["sampled_examples"], ev["n_examples"], ev["every"]) == (1, 8, 16, 0.5)
    assert s.run_config(s.cells[0], "grpo", 0).eval.k == 2  # the evaluation's runs: the suite's [eval]
    p.write_text(TINY.format(steps=4, n_examples=16).replace("trials = 3", "trials = 3\neval = {sampled_examples = 17}"))
    s = suites.load(p)
    with pytest.raises(ValueError, match="eval.sampled_examples: got 17, more than eval.n_examples \\(16\\)"):
        study.plan(s, ["grpo"], [s.cells[0]], tune_settings.from_suite(s))
