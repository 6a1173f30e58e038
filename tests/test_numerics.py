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
    assert hw["cpu_capability"] == cpu_capability() and (hw["cpu_capability"] == "AVX2" or not X86)


@pytest.mark.skipif(not X86, reason="the pin is for x86-64 machines")
def test_a_warm_start_at_another_isa_has_its_own_key():
    pinned, other = _py(KEY), _py(KEY, ATEN_CPU_CAPABILITY="default")
    assert len(pinned) == len(other) == 16 and pinned != other
