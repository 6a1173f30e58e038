"""CPU numerics pinned on `import bench` (bench/numerics.py): torch dispatches to AVX2 on x86-64, a
user's own setting wins, run.json records the ISA, and a warm start trained at another ISA has its
own cache key."""
import os
import platform
import subprocess
import sys

import pytest

from bench.numerics import PIN

X86 = platform.machine().lower() in ("x86_64", "amd64")
KEY = ("from bench import models, tasks, warmstart; from bench.config import WarmStartConfig;"
       "print(warmstart.warmstart_key(tasks.get('addition'), models.get('nano'), WarmStartConfig(steps=10)))")


def _py(code: str, **env) -> str:
    e = {k: v for k, v in os.environ.items() if k not in PIN}
    out = subprocess.run([sys.executable, "-c", code], env={**e, **env}, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not X86, reason="the pin is for x86-64 machines")
def test_import_bench_pins_avx2_and_a_users_setting_wins():
    code = ("import torch, bench, os; print(torch.backends.cpu.get_cpu_capability(), os.environ['MKL_ENABLE_INSTRUCTIONS'],"
            "os.environ['OPENBLAS_CORETYPE'])")
    assert _py(code) == "AVX2 AVX2 Haswell"  # torch imported first: it has computed nothing yet, so the pin still holds
    assert _py(code, ATEN_CPU_CAPABILITY="default", MKL_ENABLE_INSTRUCTIONS="SSE4_2") == "DEFAULT SSE4_2 Haswell"


def test_run_json_records_the_isa():
    from bench import results
    from bench.numerics import cpu_capability

    hw = results.environment()["hardware"]
    # AVX2 under the pin; a user's own ATEN_CPU_CAPABILITY (make test-numerics sets "default") wins
    pinned = os.environ.get("ATEN_CPU_CAPABILITY", "avx2").lower() == "avx2"
    assert hw["cpu_capability"] == cpu_capability() and (hw["cpu_capability"] == "AVX2" or not X86 or not pinned)


@pytest.mark.skipif(not X86, reason="the pin is for x86-64 machines")
def test_a_warm_start_at_another_isa_has_its_own_key():
    pinned, other = _py(KEY), _py(KEY, ATEN_CPU_CAPABILITY="default")
    assert len(pinned) == len(other) == 16 and pinned != other


def test_run_json_records_where_it_ran():
    """CPU vendor and model, widest ISA, BLAS and the numerics settings (issue 45)."""
    from bench import results
    from bench.numerics import PIN

    hw = results.environment()["hardware"]
    for key in ("cpu_vendor", "cpu_model", "isa", "blas", "kernel_env"):
        assert key in hw, key
    if platform.system() == "Linux" and X86:
        assert hw["cpu_vendor"] and hw["cpu_model"] and hw["isa"] in ("avx512f", "avx2", "avx", "sse4_2")
    assert hw["blas"] == "unknown" or hw["blas"].split()[0] in ("mkl", "openblas", "accelerate", "blis", "armpl")
    assert isinstance(hw["kernel_env"], dict) and all(k in hw["kernel_env"] for k in PIN if k in os.environ)
    line = results.describe_hardware(hw)
    assert hw["blas"] in line and f"torch kernels {hw['cpu_capability']}" in line and "MKL_CBWR" in line
    assert results.same_hardware(hw, hw)


def test_hardware_records_compare_and_old_ones_never_match():
    from bench import results

    new = {"machine": "x86_64", "cpus": 2, "torch_threads": 1, "cpu_capability": "AVX2", "cpu_vendor": "GenuineIntel",
           "cpu_model": "Intel Xeon (family 6 model 85)", "isa": "avx512f", "blas": "mkl 2024.2",
           "kernel_env": {"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1"}}
    old = {"machine": "x86_64", "processor": "", "cpus": 2, "python": "3.11.7", "torch_threads": 1}
    assert results.same_hardware(new, {**new, "torch_threads": 2, "kernel_env": {"ATEN_CPU_CAPABILITY": "avx2"}})
    assert not results.same_hardware(new, {**new, "cpu_vendor": "AuthenticAMD"})
    assert not results.same_hardware(new, {**new, "kernel_env": {**new["kernel_env"], "MKL_CBWR": "COMPATIBLE"}})
    assert not results.same_hardware(old, old) and not results.same_hardware(new, old)
    assert "GenuineIntel Intel Xeon" in results.describe_hardware(new)
    assert "not recorded" in results.describe_hardware(old) and "2 CPUs" in results.describe_hardware(old)
    assert results.describe_hardware({}) == "hardware not recorded"


def test_manifest_says_where_runs_ran_and_old_records_render_as_before(tmp_path):
    from bench import suite as suites
    from bench.report.manifest import manifest

    s = suites.load("math-small")
    old = {"hardware": {"machine": "x86_64", "cpus": 2, "python": "3.11.7", "torch_threads": 1}, "config": {}}
    new = {"hardware": {**old["hardware"], "cpu_vendor": "AuthenticAMD", "cpu_model": "AMD EPYC", "isa": "avx2",
                        "cpu_capability": "AVX2", "blas": "mkl 2024.2", "kernel_env": {}}, "config": {}}
    rows = dict(manifest(s, tmp_path, {"a": old, "b": new}, 2))
    hw = rows["runs' hardware"]
    assert "x86_64, 2 CPUs, python 3.11.7, torch threads 1" in hw  # the old record, as reports rendered it
    assert "AuthenticAMD AMD EPYC, x86_64 (avx2), torch kernels AVX2, BLAS mkl 2024.2, MKL_CBWR unset" in hw
