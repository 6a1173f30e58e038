"""Recipe variants in suites ([variants.NAME] base = ... plus what it changes): they run, hash, tune
and report like recipes; a variant that changes nothing, or names no valid base, is refused."""
import json
from pathlib import Path

import pytest

import algorithms
from bench import suite as suites
from bench.harness import worker
from bench.report.sections.recipes import recipe_diffs
from bench.tune import space as spaces
from bench.tune.settings import TuneSettings
from bench.tune.study import plan

HEAD = """\
recipes = ["grpo", {recipes}]
seeds = [0, 1]
tasks = ["addition"]
scales = ["nano"]
budget = "2steps"
"""

VARIANTS = """\
[variants.grpo_cliphigher]
base = "grpo"
"objective.eps_high" = 0.28

[variants.grpo_batchstd]
base = "grpo"
description = "grpo, its advantages normalised by the batch's std"
advantage = {type = "group_norm", scale = "batch"}

[variants.grpo_ch_nokl]          # a variant of a variant
base = "grpo_cliphigher"
"kl.coef" = 0.0

[variants.grpo_rloo]             # a whole part replaced: another type inherits nothing
base = "grpo"
advantage = {type = "rloo"}
"""
NAMES = ["grpo_cliphigher", "grpo_batchstd", "grpo_ch_nokl", "grpo_rloo"]


def load(tmp_path: Path, text: str) -> suites.Suite:
    p = tmp_path / "variants.toml"
    p.write_text(text)
    return suites.load(p)


def good(tmp_path: Path) -> suites.Suite:
    return load(tmp_path, HEAD.format(recipes=", ".join(f'"{n}"' for n in NAMES)) + VARIANTS)


def error(tmp_path: Path, variants: str, recipes: str = '"x"') -> str:
    p = tmp_path / "bad.toml"
    p.write_text(HEAD.format(recipes=recipes) + variants)
    with pytest.raises(ValueError) as e:
        suites.load(p)
    assert str(e.value).startswith(str(p)), e.value
    return str(e.value)


def test_variants_are_their_base_with_the_changes_only(tmp_path):
    s = good(tmp_path)
    grpo = algorithms.get("grpo")
    ch = s.recipe("grpo_cliphigher")
    assert ch.name == "grpo_cliphigher" and ch.objective.eps_high == 0.28
    assert ch.replace(name="grpo", objective=grpo.objective) == grpo
    assert grpo.diff(ch) == {"objective.eps_high": (0.2, 0.28)} and ch.parts_differing(grpo) == ["objective"]
    assert s.recipe("grpo_batchstd").advantage == grpo.advantage.replace(scale="batch")
    assert s.recipe("grpo_batchstd").description == "grpo, its advantages normalised by the batch's std"
    assert ch.description == "grpo with objective.eps_high = 0.28"  # written for it when not given
    chained = s.recipe("grpo_ch_nokl")
    assert chained.objective.eps_high == 0.28 and chained.kl.coef == 0.0 and s.variants["grpo_ch_nokl"].root == "grpo"
    assert chained.parts_differing(grpo) == ["kl", "objective"]
    assert s.recipe("grpo_rloo").advantage == algorithms.RLOO()
    assert {n: s.registered(n) for n in NAMES} == dict.fromkeys(NAMES, "grpo") and s.registered("grpo") == "grpo"


def test_variant_runs_hash_by_their_parts_and_record_their_name(tmp_path, bench_cache):
    s = good(tmp_path)
    cell = s.cells[0]
    ids = {r: s.run_config(cell, r, 0).run_id for r in ["grpo", *NAMES]}
    assert len(set(ids.values())) == len(ids)  # every variant is a run of its own
    assert s.run_config(cell, "grpo_cliphigher", 0).run_id == load(tmp_path, HEAD.format(
        recipes='"grpo_cliphigher"') + VARIANTS.split("\n\n")[0]).run_config(cell, "grpo_cliphigher", 0).run_id
    assert len(s.expand()) == 2 * (1 + len(NAMES))
    cfg = s.run_config(cell, "grpo_cliphigher", 0)
    cfg = cfg.with_values({"train.prompts_per_step": 2, "train.group_size": 4, "eval.n_examples": 4,
                           "eval.k": 0, "warmstart.steps": 0, "budget": "1steps"})
    res = worker.trainer(cfg, root=tmp_path / "results").run()
    assert res.status == "finished", res.reason
    meta = json.loads((res.path / "run.json").read_text())
    assert meta["recipe_name"] == "grpo_cliphigher" and meta["config"]["recipe"]["objective"]["eps_high"] == 0.28


def test_overrides_and_tuning_treat_variants_as_recipes(tmp_path):
    s = load(tmp_path, HEAD.format(recipes='"grpo_cliphigher"') + VARIANTS.split("\n\n")[0] + """
[overrides.grpo_cliphigher]
"train.lr" = 3e-4
""")
    assert s.run_config(s.cells[0], "grpo_cliphigher", 0).train.lr == 3e-4
    studies = plan(s, ["grpo_cliphigher"], list(s.cells), TuneSettings())
    assert [p.path for p in studies[0].space] == [p.path for p in spaces.space_for("grpo")]  # the base's space
    rows = recipe_diffs(s).filter(recipe="grpo_cliphigher").select("field", "value").rows()
    assert ("objective.eps_high", "0.28") in rows and ("train.lr", "0.0003") in rows


@pytest.mark.parametrize("table, expected", [
    ('[variants.x]\nbase = "grpo"\n', "changes nothing from grpo: give the parts or fields"),
    ('[variants.x]\nbase = "grpo"\n"kl.coef" = 0.04\n', "changes nothing from grpo: every value it gives equals"),
    ('[variants.x]\n"kl.coef" = 0.1\n', "variants.x.base: missing"),
    ('[variants.x]\nbase = "grpoo"\n"kl.coef" = 0.1\n', "did you mean 'grpo'"),
    ('[variants.x]\nbase = "grpo"\n"recipe.kl.coef" = 0.1\n', "not recipe.objective.eps_high"),
    ('[variants.x]\nbase = "grpo"\n"kl.coeff" = 0.1\n', "kl has no field 'coeff'"),
    ('[variants.x]\nbase = "grpo"\n"objective.eps_high" = -1\n', "variants.x.objective.eps_high: must be >= 0"),
    ('[variants.x]\nbase = "y"\n"kl.coef" = 0.1\n[variants.y]\nbase = "x"\n"kl.coef" = 0.2\n',
     "a cycle of bases: x -> y -> x"),
    ('[variants.x]\nbase = "grpo"\nname = "z"\n', "the table's key is the variant's name"),
    ('[variants.x]\nbase = "grpo"\nadvantage = {type = "nope"}\n', "nope"),
    ('[variants.x]\nbase = "grpo"\n"kl.coef" = 0.1\n[variants.unused]\nbase = "grpo"\n"kl.coef" = 0.2\n',
     "variants.unused: not among the suite's recipes"),
    ("variants = 3\n", "variants"),
])
def test_bad_variants_are_refused_with_the_key_and_the_choices(tmp_path, table, expected):
    assert expected in error(tmp_path, table)


def test_a_variant_may_not_take_a_registered_name_or_an_odd_one(tmp_path):
    assert "'dapo' is a registered recipe" in error(tmp_path, '[variants.dapo]\nbase = "grpo"\n"kl.coef" = 0.1\n',
                                                    '"dapo"')
    assert "lower-case letters" in error(tmp_path, '[variants.Bad-X]\nbase = "grpo"\n"kl.coef" = 0.1\n', '"Bad-X"')


def test_list_recipes_verbose_shows_the_paths_variants_change(capsys):
    from bench.cli import main

    assert main(["list", "recipes", "--verbose"]) == 0
    out = capsys.readouterr().out
    block = out.split("\n\n")[[b.split()[0] for b in out.split("\n\n") if b.strip()].index("grpo")]
    assert block.startswith("grpo (id ") and "objective       ppo_clip(" in block and "eps_high=0.2" in block
    assert "DeepSeekMath" in block  # the paper line
    assert main(["list", "recipes"]) == 0
    assert capsys.readouterr().out.split() == algorithms.names()
