"""Suites stack seeds by default on CUDA at the stack `stacked_speed.py` measured best for the scale,
never on a CPU (issue 41, item 3); --stack and [resources] stack win; --dry-run says which and why.
No GPU is needed: the plan is a function of the device's name."""
import pytest

from bench import suite as suites
from bench.cli import main
from bench.harness import runner

SUITE = """\
recipes = ["grpo"]
seeds = 4
tasks = ["addition"]
scales = [{scales}]
budget = "2steps"
{resources}
"""


def load(tmp_path, scales='"nano"', resources=""):
    p = tmp_path / "s.toml"
    p.write_text(SUITE.format(scales=scales, resources=resources))
    return suites.load(p)


def test_cuda_stacks_by_default_at_the_measured_r_and_a_cpu_never(tmp_path):
    s = load(tmp_path)
    cpu, gpu = runner.make_plan(s, 4, device="cpu"), runner.make_plan(s, 4, device="cuda")
    assert (cpu.stack, gpu.stack) == (1, runner.GPU_STACK["nano"][0]) == (1, 16)
    assert cpu.stack_from.startswith("default on a CPU") and "11.8x" in gpu.stack_from
    assert runner.make_plan(s, 4, device="cuda:1").stack == 16
    assert runner.make_plan(load(tmp_path, '"nano", "small"'), 8, device="cuda").stack == 4  # one R: the smallest
    unmeasured = runner.make_plan(load(tmp_path, '"pico"'), 4, device="cuda")
    assert unmeasured.stack == 1 and "no stacked_speed measurement for scale(s) pico" in unmeasured.stack_from


def test_an_explicit_stack_wins(tmp_path):
    s = load(tmp_path, resources="[resources]\nstack = 2")
    assert (runner.make_plan(s, 4, device="cuda").stack, runner.make_plan(s, 4, device="cuda").stack_from) == (
        2, "[resources] stack")
    assert runner.make_plan(s, 4, device="cpu").stack == 2
    p = runner.make_plan(load(tmp_path), 4, device="cuda", stack=1)
    assert (p.stack, p.stack_from) == (1, "--stack")
    with pytest.raises(ValueError, match="resources.stack"):
        load(tmp_path, resources="[resources]\nstack = 0")


def test_dry_run_says_how_runs_stack(tmp_path, capsys):
    load(tmp_path)
    assert main(["suite", str(tmp_path / "s.toml"), "--dry-run", "--no-calibrate", "--results", str(tmp_path / "r")]) == 0
    assert "runs one at a time (default on a CPU: one run at a time (stacking does not pay there))" in \
        capsys.readouterr().out
