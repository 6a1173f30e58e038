"""One suite model (issue 46, item 4): a suite field is declared once, on SuiteFile (the file's
schema), and the validated Suite inherits it. Suite declares a file field again only in the form
validation resolves it into (suite.RESOLVED). These tests fail when the two drift: a field Suite
repeats, a file field the loaded Suite does not carry as validated, a field FILE leaves unset."""
import inspect
import tomllib

import pytest

from bench import suite as suites
from bench.suite import RESOLVED, Suite, SuiteFile

# every field of a suite file, each at a value other than its default (a new field: add it here)
FILE = """\
recipes = ["grpo", "dapo", "grpo_ch"]
seeds = 2
tasks = ["addition"]
scales = ["nano"]
budget = 2e9
lr = {"addition/nano" = 1e-4}
description = "every field of a suite file"
device = "cuda"
rollout = {lag = 1}
rewards = {correct = 1.0, format = 0.1}
tune = {trials = 2}

[task_params.addition]
difficulty = "easy"

[train]
group_size = 4

[eval]
n_examples = 20

[warmstart]
seed = 3

[resources]
threads = 1

[overrides.dapo]
"recipe.objective.eps_high" = 0.3

[regimes.stale]
lag = 2

[report]
margin = 0.05

[claims.clip_higher]
paper = "Yu et al. 2025, DAPO"
claim = "clip-higher keeps entropy up"
cell = "addition/nano/stale"
a = "grpo_ch"
b = "grpo"
metric = "steps:policy/entropy"
expect = "greater"

[variants.grpo_ch]
base = "grpo"
"objective.eps_high" = 0.28
"""


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    data = tomllib.loads(FILE)
    return data, SuiteFile.build(data), suites.from_dict(data, tmp_path_factory.mktemp("s") / "model.toml")


def test_suite_inherits_every_file_field():
    assert issubclass(Suite, SuiteFile)
    assert list(Suite.model_fields)[:len(SuiteFile.model_fields)] == list(SuiteFile.model_fields)


def test_only_resolved_fields_are_declared_again():
    again = set(inspect.get_annotations(Suite)) & set(SuiteFile.model_fields)
    assert again == set(RESOLVED), "declare a suite field once, on SuiteFile (or add its resolved form to RESOLVED)"
    for name in RESOLVED:  # declared again in another form, never repeated as written
        assert Suite.model_fields[name].annotation != SuiteFile.model_fields[name].annotation, name


def test_file_sets_every_field(loaded):
    data, f, _ = loaded
    assert set(data) == set(SuiteFile.model_fields), "set a new suite field in FILE"
    for name, info in SuiteFile.model_fields.items():
        assert getattr(f, name) != info.default, f"FILE leaves {name} at its default"


def test_every_file_field_reads_on_the_suite_as_validated(loaded):
    _, f, s = loaded
    for name in SuiteFile.model_fields:
        if name not in RESOLVED:
            assert getattr(s, name) == getattr(f, name), name
    assert s.budget == 2e9 and s.lr == {"addition/nano": 1e-4} and s.train.group_size == 4
    assert [(c.name, c.budget.value, c.lr) for c in s.cells] == [("addition/nano/stale", 2e9, 1e-4)]


def test_resolved_fields_hold_the_file_values_in_their_validated_form(loaded):
    _, f, s = loaded
    assert s.recipes == tuple(f.recipes) == ("grpo", "dapo", "grpo_ch") and s.seeds == (0, 1)
    assert s.overrides == {"dapo": {"recipe": {"objective": {"eps_high": 0.3}}}}
    assert [(r.name, r.lag) for r in s.regimes] == [("stale", 2)]
    assert [(c.name, c.arm("a")) for c in s.claims] == [("clip_higher", ("grpo_ch", "addition/nano/stale"))]
    v = s.variants["grpo_ch"]
    assert list(s.variants) == ["grpo_ch"] and v.base == "grpo" and v.recipe.objective.eps_high == 0.28


def test_replace_validates_the_copy(loaded):
    _, _, s = loaded
    assert s.replace(seeds=(1,)).cell_seeds("addition/nano/stale") == (1,) and s.seeds == (0, 1)
    with pytest.raises(ValueError, match="seeds"):
        s.replace(seeds=(0, 0))
