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
