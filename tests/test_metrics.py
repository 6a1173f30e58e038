"""The metric registry (algorithms/metrics.py): declaration rules, every stat a recipe emits declared,
records that store every declared metric and refuse an undeclared one, and a metric declared at
test time reaching the report's clipping table."""
import importlib.util
from pathlib import Path

import polars as pl
import pytest
import torch

import algorithms
from algorithms import metrics
from algorithms.stats import merge_stats, rule
from bench import results, rewards
from bench import suite as suites
from bench.report import data as report_data
from bench.report import render, sections
from bench.report import tables as T

HERE = Path(__file__).resolve().parent


def _load(path: Path, name: str):
    """A helper module of another test folder (pytest puts only the running test's folder on sys.path)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


alg_helpers = _load(HERE / "algorithms" / "alg_helpers.py", "metrics_alg_helpers")
fake = _load(HERE / "report" / "conftest.py", "metrics_fake_runs")  # the report tests' hand-made runs

# steps.parquet and evals.parquet columns of every published record: new metrics go after these
PUBLISHED_STEP_METRICS = [
    "reward/mean", "reward/std", "acc/train", "reward/correct", "reward/format", "reward/length", "reward/overlong",
    "len/mean", "len/correct", "len/incorrect", "len/truncated_frac",
    "adv/mean", "adv/zero_std_group_frac", "filter/kept_frac", "filter/generation_rounds", "kl/k1", "kl/k3",
    "policy/clip_frac_low", "policy/clip_frac_high", "policy/clip_frac_seq", "policy/weight_capped_frac",
    "policy/ratio_mean", "policy/ratio_min", "policy/ratio_max", "policy/entropy",
    "grad/norm", "loss/policy", "loss/kl", "loss/value", "loss/nll", "critic/explained_var",
    "rollout/logp_mismatch", "rollout/lag",
    "policy/ratio_dev_frac", "policy/log_ratio_abs_mean", "policy/seq_ratio_mean", "policy/seq_ratio_max",
    "adv/group_std_q10", "adv/group_std_q50", "adv/group_std_q90", "adv/low_std_weight_frac", "adv/low_std_group_frac",
    "correction/weight_mean", "correction/masked_frac", "policy/entropy_coef", "policy/cov_frac",
    "compute/flops", "compute/gen_tokens", "compute/train_tokens",
    "time/rollout_s", "time/reference_s", "time/train_s", "time/step_s", "lr",
]
PUBLISHED_EVAL_METRICS = [
    "eval/acc_greedy", "eval/avg_k", "eval/pass_k", "eval/len_mean", "eval/len_correct", "eval/len_incorrect",
    "eval/truncated_frac", "eval/gen_tokens", "eval/n",
    "eval/format_greedy", "eval/format_rate", "eval/acc_formatted", "eval/acc_ood",
]
THROWAWAY = dict(kind="step", unit="fraction", merge="token", group="clipping",
                 doc="a test's throwaway: share of valid tokens it pretends to clip")


# ---------------------------------------------------------------- declarations

def test_column_order_of_published_records_is_kept():
    assert list(results.step_schema()) == ["step"] + PUBLISHED_STEP_METRICS + [
        m.name for m in metrics.step_metrics()[len(PUBLISHED_STEP_METRICS):]]
    assert results.STEP_METRICS[:len(PUBLISHED_STEP_METRICS)] == PUBLISHED_STEP_METRICS
    assert list(results.eval_schema())[:3 + len(PUBLISHED_EVAL_METRICS)] == \
        ["step", "fraction", "compute/flops"] + PUBLISHED_EVAL_METRICS
    assert results.STEP_SCHEMA == {"step": pl.Int64, **{m: pl.Float64 for m in results.STEP_METRICS}}


def test_every_metric_is_documented_and_the_report_groups_keep_their_columns():
    for m in metrics.step_metrics() + metrics.eval_metrics():
        assert m.doc.strip() and m.unit.strip(), m.name
    assert T.group_metrics("clipping") == {"clip_low": "policy/clip_frac_low", "clip_high": "policy/clip_frac_high",
                                           "clip_seq": "policy/clip_frac_seq", "weight_capped": "policy/weight_capped_frac"}
    assert list(T.group_metrics("off_policy").items()) == [
        ("ratio_dev_frac", "policy/ratio_dev_frac"), ("log_ratio_abs", "policy/log_ratio_abs_mean"),
        ("ratio_max", "policy/ratio_max"), ("seq_ratio_max", "policy/seq_ratio_max"), ("lag", "rollout/lag")]
    assert list(T.group_metrics("group_weights")) == ["group_std_q10", "group_std_q50", "group_std_q90",
                                                      "low_std_weight", "low_std_groups"]
    assert [metrics.get(m).over_steps for m in ("policy/ratio_max", "policy/seq_ratio_max", "policy/ratio_min",
                                                "rollout/lag", "kl/k1")] == ["max", "max", "min", "mean", "mean"]


def test_declaring_again_identically_is_a_no_op_and_otherwise_refused():
    m = metrics.get("policy/clip_frac_low")
    fields = {f: getattr(m, f) for f in ("kind", "unit", "doc", "merge", "over_steps", "group", "label", "order")}
    assert metrics.declare(m.name, **fields) is m
    with pytest.raises(metrics.MetricError, match=r"policy/clip_frac_low: already declared otherwise \(merge 'token' -> 'seq'\)"):
        metrics.declare(m.name, **{**fields, "merge": "seq"})
    assert metrics.get(m.name) is m


@pytest.mark.parametrize("fields, message", [
    (dict(kind="steps"), "kind 'steps': unknown kind; valid: step, eval, stat"),
    (dict(merge="avg"), "merge 'avg': unknown merge rule; valid: sum, max, min, seq, token, mean"),
    (dict(over_steps="median"), "over_steps 'median': unknown reduction; valid: mean, max, min"),
    (dict(kind="eval"), "kind 'eval': eval metrics, and only they, are named eval/"),
    (dict(kind="stat", merge=None), "merge None: a stat exists to be merged; valid: sum"),
    (dict(doc=" "), "doc ' ': say it in words"),
    (dict(label="x"), "label 'x': only a metric in a group has a report column"),
    (dict(group="Clip Ping"), "group 'Clip Ping': not a group name"),
    (dict(group="clipping", label="clip_low"), "label 'clip_low': group clipping already has a column of that name "
                                               "(policy/clip_frac_low)"),
])
def test_malformed_declarations_are_refused_naming_the_valid_choices(fields, message):
    with pytest.raises(metrics.MetricError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        metrics.declare("policy/not_declared_frac", **{**dict(kind="step", unit="fraction", doc="d", merge="token"), **fields})
    assert str(e.value).startswith("policy/not_declared_frac: ")
    assert not metrics.is_declared("policy/not_declared_frac")


@pytest.mark.parametrize("name", ["Policy/x", "policy//x", "policy/x y", "/x", "step", "fraction", 3])
def test_malformed_and_reserved_names_are_refused(name):
    with pytest.raises(metrics.MetricError, match="not a metric name|a column every record has already"):
        metrics.declare(name, kind="step", unit="u", doc="d")


def test_unknown_names_list_close_matches():
    with pytest.raises(metrics.UnknownMetricError, match=r"'policy/clip_frac_lo': not a declared metric; close: "
                                                         r"policy/clip_frac_low.*algorithms.metrics.declare"):
        metrics.get("policy/clip_frac_lo")


def test_over_steps_follows_an_extreme_merge_and_defaults_to_the_mean():
    with metrics.declared_for_test("policy/throwaway_max", kind="step", unit="ratio", merge="max", doc="d") as m:
        assert m.over_steps == "max" and m.label == "" and metrics.get(m.name) is m
    assert not metrics.is_declared("policy/throwaway_max")
    with metrics.declared_for_test("policy/throwaway_frac", **THROWAWAY) as m:
        assert (m.over_steps, m.label) == ("mean", "throwaway_frac")
        assert [x.name for x in metrics.in_group("clipping")][-1] == "policy/throwaway_frac"
        with pytest.raises(metrics.MetricError, match="already declared"):
            with metrics.declared_for_test("policy/throwaway_frac", **THROWAWAY):
                pass
    with pytest.raises(metrics.MetricError, match="already declared"):
        with metrics.declared_for_test("kl/k1", kind="step", unit="nats", doc="d"):
            pass
    assert metrics.is_declared("kl/k1")


# ---------------------------------------------------------------- stats: every key a recipe emits

@pytest.mark.parametrize("name", algorithms.names())
def test_every_stat_a_recipe_emits_is_declared_with_its_merge_rule(name):
    recipe = algorithms.get(name)
    batch = recipe.shape(alg_helpers.random_batch(seed=5))
    adv = recipe.advantages(batch)
    logp = alg_helpers.perturbed(batch.logp_old, 0.3)
    ent = torch.rand(logp.shape, generator=torch.Generator().manual_seed(1), dtype=logp.dtype)
    critic = {}
    if recipe.critic is not None:
        critic = {"values": batch.values + 0.1, "returns": recipe.returns(batch)}
    _, stats = recipe.loss(logp, batch, adv, entropy=ent, **critic)
    keys = set(stats)
    if critic:
        keys |= set(recipe.value_loss(critic["values"], batch, critic["returns"])[1])
        assert "loss/value" in keys
    assert {"tokens", "sequences", "policy/entropy", "kl/k1", "loss/policy"} <= keys
    for k in sorted(keys):
        assert rule(k) == metrics.get(k).merge in metrics.MERGES, k
        assert metrics.get(k).kind in ("step", "stat"), k
    stored = {k for k in keys if metrics.get(k).kind == "step"}
    assert stored == keys - {"tokens", "sequences"} and stored <= set(results.step_schema())
    assert set(merge_stats([stats, stats])) == set(stats)


def test_the_engine_s_per_update_stats_are_declared_and_undeclared_stats_refused():
    assert rule("grad/norm") == "mean" and rule("policy/entropy_coef") == "mean"
    merged = merge_stats([{"grad/norm": torch.tensor(1.0)}, {"grad/norm": torch.tensor(3.0)}])
    assert merged["grad/norm"].item() == 2.0
    with pytest.raises(metrics.UnknownMetricError, match=r"policy/made_up: a stat that is not a declared metric.*merge"):
        merge_stats([{"policy/made_up": torch.tensor(1.0), "tokens": torch.tensor(3)}])
    with pytest.raises(metrics.MetricError, match="reward/mean: merge None"):
        rule("reward/mean")


# ---------------------------------------------------------------- records

def test_steps_frame_refuses_an_undeclared_key_naming_it(tmp_path):
    with pytest.raises(results.UndeclaredMetric, match=r"steps.parquet: policy/made_up_frac: not a declared step "
                                                       r"metric.*algorithms.metrics.declare\(name, kind='step'"):
        results.steps_frame([{"step": 1, "kl/k1": 0.1}, {"step": 2, "policy/made_up_frac": 0.5}])
    with pytest.raises(results.UndeclaredMetric, match=r"tokens \(declared as a stat metric\)"):
        results.steps_frame([{"step": 1, "tokens": 12.0}])
    with pytest.raises(results.UndeclaredMetric, match=r"evals.parquet: kl/k1 \(declared as a step metric\)"):
        results.evals_frame([{"step": 1, "fraction": 0.5, "kl/k1": 0.1}])
    with pytest.raises(results.UndeclaredMetric):  # nothing is written
        results.write_run(tmp_path, "run0", {"run_id": "run0"}, [{"step": 1, "policy/made_up_frac": 0.5}], [])
    assert not results.run_dir(tmp_path, "run0").exists()
    frame = results.steps_frame([{"step": 1, "kl/k1": 0.1}])
    assert frame.columns == list(results.step_schema()) and frame["kl/k3"].is_nan().all()
    # the trainer's check of each row as it is made (a run fails at step 1, not at its record)
    results.check_rows([{"step": 1, "kl/k1": 0.1}], "step")
    results.check_rows([{"step": 0, "fraction": 0.0, "compute/flops": 0.0, "eval/acc_greedy": 0.5}], "eval")
    with pytest.raises(results.UndeclaredMetric, match="evals.parquet: eval/made_up"):
        results.check_rows([{"step": 0, "eval/made_up": 0.5}], "eval")


def _run_meta(rid: str) -> dict:
    return {"run_id": rid, "config_id": "c", "status": "finished", "recipe_name": "grpo",
            "config": {"task": "addition", "scale": "nano", "seed": 0, "budget": {"value": 1.0, "kind": "steps"}}}


def test_a_metric_declared_later_is_stored_and_older_records_read_it_as_null(tmp_path):
    results.write_run(tmp_path, "old", _run_meta("old"), [{"step": 1, "kl/k1": 0.1}], [])
    with metrics.declared_for_test("policy/throwaway_frac", **THROWAWAY):
        assert "policy/throwaway_frac" in results.step_schema() and "policy/throwaway_frac" not in results.STEP_SCHEMA
        results.write_run(tmp_path, "new", _run_meta("new"), [{"step": 1, "policy/throwaway_frac": 0.25}], [])
        steps = results.scan(tmp_path)["steps"].sort("run_id").collect()
    assert steps["run_id"].to_list() == ["new", "old"]
    assert steps["policy/throwaway_frac"].to_list() == [0.25, None] and steps["kl/k1"][1] == pytest.approx(0.1)
    assert "policy/throwaway_frac" not in results.step_schema()


# ---------------------------------------------------------------- rewards

def test_a_registered_reward_declares_its_column(monkeypatch):
    monkeypatch.setattr(rewards, "_REWARDS", dict(rewards._REWARDS))
    monkeypatch.setattr(metrics, "_METRICS", dict(metrics._METRICS))
    rewards.register("brevity")(lambda s: -s.lengths.float())
    assert metrics.get("reward/brevity").kind == "step" and "reward/brevity" in results.step_schema()
    assert results.steps_frame([{"step": 1, "reward/brevity": -3.0}])["reward/brevity"].to_list() == [-3.0]
    for taken in ("mean", "std"):  # the combined reward's columns are not a reward function's
        with pytest.raises(ValueError, match=f"reward function '{taken}': its column reward/{taken} cannot be declared"):
            rewards.register(taken)(lambda s: s.correct.float())
        assert taken not in rewards.names()
    with pytest.raises(ValueError, match="not a metric name"):
        rewards.register("Brevity 2")(lambda s: s.correct.float())


# ---------------------------------------------------------------- the report

def test_a_metric_declared_in_the_clipping_group_reaches_the_clipping_table(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(fake.SUITE_TOML)
    suite = suites.load(path)
    root = tmp_path / "results"
    with metrics.declared_for_test("policy/throwaway_frac", **THROWAWAY):
        for cfg in suite.expand():
            steps, evals = fake.curves(cfg.recipe.name, cfg.seed, fake.STEPS)
            steps = [{**s, "policy/throwaway_frac": 0.25} for s in steps]
            results.write_run(root, cfg.run_id, fake.meta(cfg, "finished", fake.STEPS), steps, evals)
        assert "policy/throwaway_frac" in pl.read_parquet(results.run_dir(root, cfg.run_id) / "steps.parquet").columns
        ctx = sections.Context(suite, root, report_data.load(suite, root))
        sections.build_tables(ctx)
        clip = ctx.tables["clipping"]
        assert clip.columns[4:9] == ["clip_low", "clip_high", "clip_seq", "weight_capped", "throwaway_frac"]
        assert clip["throwaway_frac"].to_list() == pytest.approx([0.25] * clip.height)
        lines = [line for line in render.markdown("t", sections.blocks("clipping", ctx)).splitlines() if line.startswith("|")]
        cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
        at = cells[0].index("throwaway frac")  # the report's Markdown table shows it beside the others
        assert cells[0][at - 1] == "weight capped (cispo)" and {row[at] for row in cells[2:]} == {"0.2500"}
    # undeclared again: the same records give today's table (its column is left in the parquet files, unread)
    clip = T.clipping(suite, report_data.load(suite, root))
    assert clip.columns == ["cell", "recipe", "objective", "updates_per_batch", "clip_low", "clip_high", "clip_seq",
                            "weight_capped", "grad_clip", "grad_norm", "clip_binds", "note"]
