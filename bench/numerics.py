"""Which CPU instruction set torch's kernels use, pinned for bit-reproducible runs across x86 machines.

Float matmuls and reductions round differently on AVX2 and AVX-512 code paths (the summation order
changes with the vector width), and RL amplifies a last-bit difference into other samples within a
few steps; a report's curve fits (scipy on OpenBLAS) can land on another local optimum. `pin_cpu_isa`
(called on `import bench`, before torch computes or numpy loads OpenBLAS) caps PyTorch's, MKL's,
oneDNN's and OpenBLAS's dispatch at AVX2, the widest ISA every x86-64 machine we run on has. A
variable the user already set is kept. Other architectures (arm64) are left alone: their kernels
differ anyway (a Ray cluster mixing architectures gets the driver's pin on every node: keep one).
"""
from __future__ import annotations

import functools
import os
import platform

PINNED_ISA = "AVX2"  # what run.json's hardware.cpu_capability says on a pinned x86-64 machine
# torch's kernels, MKL and oneDNN (torch's matmuls), and OpenBLAS (numpy's and scipy's: the report's
# fits and bootstraps; Haswell is its AVX2 kernel set, and it is read when numpy loads the library)
PIN = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
       "OPENBLAS_CORETYPE": "Haswell"}


def pin_cpu_isa() -> None:
    """Set PIN's variables that are unset, on x86-64 only."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        for k, v in PIN.items():
            os.environ.setdefault(k, v)


def pinned_env() -> dict[str, str]:
    """PIN's variables as this process has them (a user's own setting included), for worker processes
    that do not inherit this environment (a Ray cluster's)."""
    return {k: os.environ[k] for k in PIN if k in os.environ}


def cpu_capability() -> str:
    """The ISA torch's CPU kernels dispatch to in this process (AVX2, AVX512, DEFAULT, SVE256, ...)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


# variables that set how CPU kernels round, recorded in run.json (hardware.kernel_env) when set
KERNEL_VARS = (*PIN, "MKL_CBWR", "MKL_DYNAMIC", "OMP_DYNAMIC", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def kernel_env() -> dict[str, str]:
    """KERNEL_VARS as this process has them (only those set)."""
    return {k: os.environ[k] for k in KERNEL_VARS if k in os.environ}


def _sysctl(name: str) -> str | None:
    import subprocess

    try:
        out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=2)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@functools.cache
def cpu_identity() -> dict[str, str | None]:
    """The CPU's vendor (GenuineIntel, AuthenticAMD, Apple, ...), model name and widest vector ISA
    (avx512f, avx2, sse4_2, neon, sve, ...): /proc/cpuinfo on Linux, sysctl on macOS; None where
    unknown (never raises)."""
    vendor = model = isa = None
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        text = ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep and k.strip() not in fields:
            fields[k.strip()] = v.strip()
    vendor = fields.get("vendor_id") or fields.get("CPU implementer")
    model = fields.get("model name") or fields.get("Model") or fields.get("Processor")
    if model and fields.get("cpu family") and fields.get("model"):  # x86: one name covers several steppings
        model += f" (family {fields['cpu family']} model {fields['model']})"
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    for f in ("avx512f", "avx2", "avx", "sse4_2", "sve", "asimd", "neon"):
        if f in flags:
            isa = "neon" if f == "asimd" else f
            break
    if platform.system() == "Darwin":
        vendor = vendor or _sysctl("machdep.cpu.vendor") or ("Apple" if platform.machine() == "arm64" else None)
        model = model or _sysctl("machdep.cpu.brand_string")
        isa = isa or ("neon" if platform.machine() == "arm64" else None)
    return {"vendor": vendor, "model": model, "isa": isa}


@functools.cache
def blas_info() -> str:
    """What torch's float32 CPU matmuls run on, from its build config: e.g. "mkl 2024.2 (oneDNN 3.12.0)",
    "openblas", "accelerate"; "unknown" where the config does not say."""
    import re

    import torch

    cfg = torch.__config__.show()
    m = re.search(r"BLAS_INFO=([\w-]+)", cfg)
    name = m.group(1) if m else "unknown"
    ver = re.search(r"Math Kernel Library Version ([\d.]+)", cfg)
    dnn = re.search(r"oneDNN v([\d.]+)|Intel\(R\) MKL-DNN v([\d.]+)", cfg)
    out = f"{name} {'.'.join(ver.group(1).split('.')[:2])}" if name == "mkl" and ver else name
    if dnn:
        out += f" (oneDNN {dnn.group(1) or dnn.group(2)})"
    return out
