"""`bench report` on hand-made results: byte-identical output, the numbers, every section, and
diverged, failed and missing runs listed instead of failing or dropping them."""
import csv
import io

import polars as pl
import pytest

from bench import report
from bench.cli import main
from bench.report import data as report_data
from bench.report.sections.length import grad_weights

SECTIONS = ["Summary", "Leaderboard", "Skill, sharpening or collapse",
            "Power: what this suite can decide", "Accuracy against compute", "Sigmoid fit (ScaleRL)",
            "Length bias",
            "Aggregation: gradient weight by length", "KL to the reference", "Clipping and off-policy", "Ratio telemetry", "Entropy",
            "Group reward spread and gradient weight",
            "Recipes as diffs from grpo", "Failed, diverged and missing runs", "Manifest"]
FIGURES = ["leaderboard.png", "accuracy.png", "length_addition_nano.png", "length_bias.png", "grad_weights.png",
           "kl.png", "clipping.png", "entropy.png", "frontier.png"]
CSVS = ["clipping", "coverage", "grad_weights", "leaderboard", "length_bias", "power", "recipe_diffs", "runs", "sigmoid_fits"]


@pytest.fixture(scope="module")
def built(tiny, tmp_path_factory):
    s, root, ids = tiny
    out = tmp_path_factory.mktemp("out") / "tiny"
    return report.build(s, root, out)


def rows(path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_regenerating_gives_identical_markdown_and_csv(tiny, built, tmp_path):
    s, root, _ = tiny
    before = {p.name: p.read_bytes() for p in [built / "report.md", *built.glob("*.csv")]}
    assert sorted(before) == sorted(["report.md", *(f"{n}.csv" for n in CSVS)])
    again = report.build(s, root, tmp_path / "again")
    for name, content in before.items():
        assert (again / name).read_bytes() == content, name
    # and in place, where a table of an earlier build that this one lacks goes (a CSV that is not a
    # report table stays: the directory may hold a user's files)
    (built / "across_tasks.csv").write_text("cell\nstale\n")
    (built / "notes.csv").write_text("mine\n")
    assert report.build(s, root, built) == built
    assert not (built / "across_tasks.csv").exists() and (built / "notes.csv").read_text() == "mine\n"
    (built / "notes.csv").unlink()
    assert {p.name: p.read_bytes() for p in [built / "report.md", *built.glob("*.csv")]} == before
    pngs = sorted(p.name for p in (again / "figures").glob("*.png"))
    assert pngs == sorted(FIGURES)
    for name in pngs:  # Agg without the Software tag: stable too (not required, but cheap)
        assert (again / "figures" / name).read_bytes() == (built / "figures" / name).read_bytes(), name


def test_every_section_and_figure_is_there(built):
    md = (built / "report.md").read_text()
    page = (built / "index.html").read_text()
    for h in SECTIONS:
        assert f"## {h}" in md or f"### {h}" in md, h
        assert f">{h}</h" in page.replace("&#x27;", "'"), h
    for f in FIGURES:
        assert f"](figures/{f})" in md and (built / "figures" / f).stat().st_size > 5000
    assert page.count('src="data:image/png;base64,') == len(FIGURES)
    assert "report written" in page and "report written" not in md  # time only in the HTML
    assert "stale0000000" not in md and "stale0000000" not in (built / "runs.csv").read_text()
    assert "bench report " in md and "sha256" in md and "abc123 (8 runs)" in md
    assert "2.13.0+cpu" in md and "x86_64, 2 CPUs" in md


def test_leaderboard_numbers(built):
    board = {(r["cell"], r["recipe"]): r for r in rows(built / "leaderboard.csv")}
    g, d, p = (board[("addition/nano", r)] for r in ("grpo", "dapo", "ppo"))
    assert [r["recipe"] for r in rows(built / "leaderboard.csv")] == ["dapo", "grpo", "ppo"]  # best first
    assert g["primary"] == "auc" and g["n"] == "3" and g["mark"] == g["verdict"] == "baseline"
    assert float(g["primary_mean"]) == float(g["auc_mean"]) == pytest.approx(0.45)  # 0.4 + 0.1 f over f in [0, 1]
    assert float(g["final_mean"]) == pytest.approx(0.5) and (g["final_lo"], g["final_hi"]) == ("0.49", "0.51")
    assert float(d["final_mean"]) == pytest.approx(0.695) and (d["n"], d["diverged"]) == ("2", "1")
    # paired by seed over the 2 seeds dapo finished: its AUC is grpo's + 0.1 in both, so the
    # difference has no spread: p = 0, decided, marked
    assert d["pairs"] == "2" and float(d["diff"]) == pytest.approx(0.1)
    assert (d["p"], d["p_holm"], d["mark"], d["verdict"]) == ("0", "0", "*", "better")
    assert d["p_improve"] == "1"
    # ppo: one finished seed, one pair: nothing can be tested
    assert (p["n"], p["failed"], p["missing"], p["pairs"]) == ("1", "1", "1", "1")
    assert (p["p"], p["mark"], p["verdict"]) == ("", "", "undecided")
    power = rows(built / "power.csv")
    assert [(r["metric"], r["primary"]) for r in power] == [("auc", "true"), ("final", "false"), ("plateau", "false")]
    md = (built / "report.md").read_text()
    assert "The suite file declares none, so this is the default" in md


def test_leaderboard_reads_the_declared_primary_metric(tiny, tmp_path):
    s, root, _ = tiny
    path = tmp_path / "tiny.toml"
    path.write_text(s.path.read_text() + '\n[report]\nprimary = "compute_to:0.5"\nmargin = 0.05\n')
    from bench import suite as suites

    declared = suites.load(path)
    assert [c.run_id for c in declared.expand()] == [c.run_id for c in s.expand()]  # [report] is not hashed
    out = report.build(declared, root, tmp_path / "out")
    board = {r["recipe"]: r for r in rows(out / "leaderboard.csv")}
    # compute to 0.5 accuracy: grpo seed 1 reaches 0.4 + 0.1 f = 0.5 at f = 1; dapo (0.4 + 0.3 f) at
    # f = 1/3 (seed 1); lower is better, so dapo sorts first
    assert [r["recipe"] for r in rows(out / "leaderboard.csv")] == ["dapo", "grpo", "ppo"]
    assert float(board["dapo"]["primary_mean"]) < float(board["grpo"]["primary_mean"])
    assert board["dapo"]["verdict"] == "better"
    md = (out / "report.md").read_text()
    assert "declared in the suite file's [report] table): compute to 0.5 accuracy" in md


def test_length_bias_clipping_and_weights(tiny, built):
    s, root, _ = tiny
    bias = {r["recipe"]: r for r in rows(built / "length_bias.csv")}
    assert float(bias["dapo"]["slope_correct"]) == pytest.approx(-3.0)
    assert float(bias["grpo"]["slope_correct"]) == pytest.approx(-1.0)
    assert float(bias["grpo"]["slope_incorrect"]) == pytest.approx(2.0)
    assert float(bias["grpo"]["gap"]) == pytest.approx(5.4)  # 4 + 3 · mean(f) − 0.1 · mean(seed)
    clip = {r["recipe"]: r for r in rows(built / "clipping.csv")}
    assert clip["grpo"]["note"] == clip["dapo"]["note"] == "zero by construction: one update per batch"
    assert clip["ppo"]["updates_per_batch"] == "4" and float(clip["ppo"]["clip_high"]) > 0
    md = (built / "report.md").read_text()
    assert "Zero by construction: grpo, dapo make one optimizer update per rollout batch" in md
    # analytic aggregation weights: 16 × 8 rows, others of length 10 (relative to token_mean there)
    w = grad_weights(s, 24, 10, [5, 10, 20])
    get = {(r["recipe"], r["length"]): r["weight"] for r in w.iter_rows(named=True)}
    assert get[("grpo", 10)] == pytest.approx(1.0) and get[("grpo", 20)] == pytest.approx(0.5)
    assert get[("grpo", 5)] == pytest.approx(2.0)
    assert get[("dapo", 20)] == pytest.approx(128 * 10 / (127 * 10 + 20))  # 1/N, N grows with L
    diffs = rows(built / "recipe_diffs.csv")
    assert {"recipe": "dapo", "field": "objective.eps_high", "baseline": "0.2", "value": "0.28"} in diffs


def test_diverged_failed_and_missing_runs_are_listed(tiny, built):
    _, _, ids = tiny
    bad = {r["run_id"]: r for r in rows(built / "runs.csv") if r["status"] != "finished"}
    assert {k: v["status"] for k, v in bad.items()} == {ids["dapo2"]: "diverged", ids["ppo1"]: "failed",
                                                       ids["ppo2"]: "missing"}
    assert bad[ids["dapo2"]]["reason"] == "non-finite loss at step 11" and bad[ids["dapo2"]]["steps_done"] == "11"
    md = (built / "report.md").read_text()
    section = md.split("## Failed, diverged and missing runs")[1].split("## Manifest")[0]
    assert "3 of 9 expected runs did not finish" in section
    for label, status in (("dapo2", "diverged"), ("ppo1", "failed"), ("ppo2", "missing")):
        assert f"`{ids[label]}` | {status}" in section
    assert "RuntimeError: out of memory" in section
    assert "9 runs expected, 6 finished, 1 diverged, 1 failed, 1 without a record" in md
    assert "1 other recorded run is tagged suite=tiny but not part of its current expansion" in section


def test_a_suite_with_no_results_still_reports(tiny, tmp_path):
    s, _, _ = tiny
    out = report.build(s, tmp_path / "empty-results", tmp_path / "r")
    md = (out / "report.md").read_text()
    assert "addition/nano: no finished run yet." in md and "9 of 9 expected runs did not finish" in md


def test_runs_are_selected_by_the_current_expansion(tiny):
    s, root, ids = tiny
    d = report_data.load(s, root)
    assert sorted(d.runs["run_id"]) == sorted(ids.values()) and d.stale == ("stale0000000",)
    assert d.evals.filter(pl.col("run_id") == ids["ppo1"]).height == 0
    assert d.steps["frac"].max() == 1.0 and d.steps.filter(pl.col("run_id") == ids["dapo2"])["frac"].max() == 0.55


def test_cli(tiny, tmp_path, capsys):
    s, root, _ = tiny
    assert main(["report", "no-such-suite"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown suite 'no-such-suite'; valid:" in err[0] and "math-small" in err[0]
    assert main(["report", str(s.path), "--results", str(root), "--out", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "index.html").is_file() and "report:" in capsys.readouterr().out


def test_off_policy_and_group_sections_read_the_new_columns_when_logged(tiny, tmp_path):
    """Runs recorded before the engine logged ratio telemetry and per-group weights say so; runs
    that log them get a table (max for *_max columns, means otherwise) and a figure."""
    import shutil

    s, root, ids = tiny
    md = (report.build(s, root, tmp_path / "old") / "report.md").read_text()
    assert "is not logged in these runs" in md and "are not logged in these runs" in md
    logged = tmp_path / "results"
    shutil.copytree(root, logged)
    for label, rid in ids.items():
        path = logged / "runs" / rid / "steps.parquet"
        if not path.is_file():
            continue
        st = pl.read_parquet(path)
        lag = 2.0 if label.startswith("dapo") else 0.0
        st = st.with_columns(pl.lit(0.1 if lag else 0.0).alias("policy/ratio_dev_frac"),
                             pl.lit(0.05).alias("policy/log_ratio_abs_mean"),
                             (1.0 + pl.col("step") / 10).alias("policy/ratio_max"),
                             pl.lit(1.5).alias("policy/seq_ratio_max"), pl.lit(lag).alias("rollout/lag"),
                             pl.lit(0.2).alias("adv/group_std_q10"), pl.lit(0.4).alias("adv/group_std_q50"),
                             pl.lit(0.5).alias("adv/group_std_q90"), pl.lit(0.3).alias("adv/low_std_weight_frac"),
                             pl.lit(0.45).alias("adv/low_std_group_frac"))
        st.write_parquet(path)
    out = report.build(s, logged, tmp_path / "new")
    off = {r["recipe"]: r for r in rows(out / "off_policy.csv")}
    assert off["dapo"]["lag"] == "2" and off["grpo"]["lag"] == "0" and off["dapo"]["ratio_dev_frac"] == "0.1"
    assert off["grpo"]["ratio_max"] == "3"  # step 20 of 20: 1 + 20/10, the largest over the run
    group = {r["recipe"]: r for r in rows(out / "group_weights.csv")}
    assert (group["grpo"]["low_std_weight"], group["grpo"]["low_std_groups"]) == ("0.3", "0.45")
    md = (out / "report.md").read_text()
    assert "not logged in these runs" not in md and "](figures/off_policy.png)" in md


def test_the_report_describes_runs_by_their_run_json(tiny, tmp_path):
    """What a run ran with comes from its record (data.run_config), not from the suite file as it is
    now; a pair with no recorded run falls back to the suite's config."""
    import json
    import shutil

    from bench import results

    D = report_data
    s, root, ids = tiny
    mine = tmp_path / "results"
    shutil.copytree(root, mine)
    cfg = next(c for c in s.expand() if c.run_id == ids["grpo0"])
    meta = json.loads((results.run_dir(mine, cfg.run_id) / "run.json").read_text())
    meta["config"]["threads"] = 7  # an execution setting: not hashed, so the run is still this suite's
    (results.run_dir(mine, cfg.run_id) / "run.json").write_text(json.dumps(meta))
    d = D.load(s, mine)
    assert D.run_config(s, d, "addition/nano", "grpo").threads == 7
    assert D.run_config(s, None, "addition/nano", "grpo").threads == s.resources.threads
    for rid in [ids["ppo0"], ids["ppo1"]]:  # no recorded ppo run left: the suite's config
        shutil.rmtree(results.run_dir(mine, rid))
    assert D.run_config(s, D.load(s, mine), "addition/nano", "ppo") == s.run_config(s.cells[0], "ppo", 0)


def test_a_results_report_goes_beside_its_runs_and_never_over_a_published_one(tiny, tmp_path, monkeypatch):
    """`bench suite NAME` writes its report to RESULTS/reports/NAME: the committed reports/NAME (with
    the tuning and default-settings runs a user's results directory lacks) stays as it is; a published
    report's own data regenerates it in place; $BENCH_REPORTS, when set, wins."""
    from pathlib import Path

    s, root, _ = tiny
    monkeypatch.delenv("BENCH_REPORTS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert report.default_dir("tiny", "results") == Path("results/reports/tiny")
    assert report.default_dir("tiny", "reports/tiny/data") == Path("reports/tiny")
    assert report.default_dir("tiny", "reports/other/data") == Path("reports/other/data/reports/tiny")
    assert report.default_dir("tiny") == Path("reports/tiny")  # where `bench publish` writes
    published = tmp_path / "reports" / "tiny" / "report.md"
    published.parent.mkdir(parents=True)
    published.write_text("the committed report\n")
    assert report.build_if_results(s, root) == root / "reports" / "tiny"
    assert published.read_text() == "the committed report\n"
    assert (root / "reports" / "tiny" / "report.md").read_text().startswith("# grpo-bench report: tiny")
    monkeypatch.setenv("BENCH_REPORTS", str(tmp_path / "elsewhere"))
    assert report.default_dir("tiny", "results") == tmp_path / "elsewhere" / "tiny"
