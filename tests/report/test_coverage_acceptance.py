"""Issue 40, acceptance 3, read from the published runs themselves (each run's run.json and
evals.parquet, not the report's summary): on a task of a published suite, does the baseline's greedy
accuracy and its pass@K (K the suite's eval.k) both rise, last evaluation minus first per run, by at
least 3 standard errors of the mean over seeds? The test states which tasks do, so a republish that
loses one fails here rather than in a reader's hands."""
import json
import math
import statistics
from pathlib import Path

import polars as pl

from bench import suite as suites

REPORTS = Path(__file__).resolve().parents[2] / "reports"


def gains(name: str) -> dict[str, dict[str, list[float]]]:
    """task -> {column: [last - first per baseline run]} over the published suite's expansion."""
    s = suites.load(name)
    k = s.eval.k
    cols = ("eval/acc_greedy", f"eval/pass@{k}", "eval/acc_formatted")
    out: dict[str, dict[str, list[float]]] = {}
    for cfg in s.expand():
        if cfg.recipe.name != s.report.baseline:
            continue
        run = REPORTS / name / "data" / "runs" / cfg.run_id
        meta = json.loads((run / "run.json").read_text())
        assert meta["status"] == "finished", (name, cfg.run_id)
        ev = pl.read_parquet(run / "evals.parquet").sort("step")
        first, last = ev.row(0, named=True), ev.row(-1, named=True)
        assert first["fraction"] == 0 and last["fraction"] >= 1, (name, cfg.run_id)
        task = out.setdefault(cfg.tags["cell"].split("/")[0], {c: [] for c in (*cols, "greedy_wf")})
        for c in cols:
            task[c].append(last[c] - first[c])
        # greedy accuracy among well-formed greedy answers: a rise that is not a switch of format
        task["greedy_wf"].append(last["eval/acc_greedy"] / last["eval/format_greedy"]
                                 - first["eval/acc_greedy"] / first["eval/format_greedy"])
    return out


def z(xs: list[float]) -> float:
    return statistics.mean(xs) / (statistics.stdev(xs) / math.sqrt(len(xs)))


def test_coverage_shows_greedy_and_pass_at_k_rising_on_countdown():
    s = suites.load("coverage")
    assert s.eval.k >= 32 and s.eval.n_examples >= 512
    found = gains("coverage")
    rising = sorted(t for t, g in found.items() if z(g["eval/acc_greedy"]) >= 3 and z(g[f"eval/pass@{s.eval.k}"]) >= 3)
    assert "countdown" in rising, {t: (z(g["eval/acc_greedy"]), z(g[f"eval/pass@{s.eval.k}"])) for t, g in found.items()}
    cd = found["countdown"]
    assert len(cd["eval/acc_greedy"]) >= 8
    # not a switch of format (the warm start writes ~90% of its answers well-formed): accuracy among
    # well-formed answers rises too, greedy and sampled
    assert z(cd["greedy_wf"]) >= 3 and z(cd["eval/acc_formatted"]) >= 3
