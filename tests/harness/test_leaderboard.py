"""`bench results`: aggregation over seeds from hand-made tables, failures listed, not averaged."""
import io
import math

from bench import results
from bench.harness.leaderboard import per_run, print_leaderboard, table


def fake_run(root, rid, recipe, seed, status, accs, kl, clip_high=float("nan"), cell="addition/nano"):
    task, scale = cell.split("/")
    meta = {"run_id": rid, "config_id": f"c-{recipe}", "status": status, "recipe_name": recipe,
            "reason": "non-finite loss" if status != "finished" else "", "steps_done": len(kl),
            "flops_spent": 9e9 if status == "finished" else 4e9, "gen_tokens": 100, "wall_s": 2.0,
            "config": {"task": task, "scale": scale, "seed": seed, "budget": {"value": 9e9, "kind": "flops"},
                       "tags": {"suite": "t", "cell": cell}}}
    steps = [{"step": i + 1, "kl/k3": k, "policy/clip_frac_low": 0.0, "policy/clip_frac_high": clip_high}
             for i, k in enumerate(kl)]
    evals = [{"step": i, "fraction": f, "eval/acc_greedy": a, "eval/len_mean": 10.0 + i}
             for i, (f, a) in enumerate(zip([0.0, 0.5, 1.0], accs))]
    results.write_run(root, rid, meta, steps, evals)


def test_means_over_finished_seeds_and_failures_listed(tmp_path):
    fake_run(tmp_path, "g0", "grpo", 0, "finished", [0.1, 0.3, 0.5], [0.0, 0.02], clip_high=0.1)
    fake_run(tmp_path, "g1", "grpo", 1, "finished", [0.1, 0.2, 0.7], [0.0, 0.04], clip_high=0.3)
    fake_run(tmp_path, "d0", "dapo", 0, "finished", [0.1, 0.8, 0.9], [float("nan"), 0.01])
    fake_run(tmp_path, "d1", "dapo", 1, "diverged", [0.1, 0.95], [0.5])
    fake_run(tmp_path, "x0", "grpo", 0, "finished", [0.0, 0.0, 0.0], [0.0], cell="chain_sum/nano")
    runs = per_run(tmp_path, run_ids=["g0", "g1", "d0", "d1"])
    assert runs.height == 4
    t = table(runs)
    grpo = t.filter(t["recipe"] == "grpo").row(0, named=True)
    assert grpo["n"] == 2 and math.isclose(grpo["acc_mean"], 0.6) and math.isclose(grpo["acc_std"], math.sqrt(0.02))
    assert math.isclose(grpo["kl_k3"], 0.015) and math.isclose(grpo["clip_high"], 0.2) and grpo["len"] == 12.0
    assert math.isclose(grpo["spent"], 1.0)
    dapo = t.filter(t["recipe"] == "dapo").row(0, named=True)
    assert dapo["n"] == 1 and dapo["not_finished"] == 1 and dapo["acc_mean"] == 0.9  # the diverged 0.95 is not averaged
    assert math.isclose(dapo["kl_k3"], 0.01)  # NaN steps ignored
    assert t["recipe"].to_list() == ["dapo", "grpo"]  # best first
    out = io.StringIO()
    print_leaderboard(runs, expected=6, out=out)
    text = out.getvalue()
    assert "0.600 ± 0.141" in text and "not finished (1):" in text and "diverged" in text
    assert "non-finite loss" in text and "2 of the suite's 6 runs have no record yet" in text
    assert "chain_sum" not in text
    assert per_run(tmp_path, suite="t").height == 5  # by tag
