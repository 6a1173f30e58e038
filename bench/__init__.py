"""grpo-bench: matched-compute comparisons of GRPO-family RL algorithms on one shared engine.

CPU numerics are pinned here, before torch computes anything or numpy loads OpenBLAS (they read these
on first use): PyTorch's own vectorised kernels and MKL's, oneDNN's and OpenBLAS's dispatch stop at AVX2
on x86-64 machines, so a run or warm start trained on an AVX-512 machine rounds as on an AVX2 one and
comes out bit for bit the same (measured 2026-12-05: an addition/nano warm start trained on an AVX-512 EPYC came out with other
weights, greedy accuracy 0.67 against the published 0.59, and every curve moved; pinned, it reproduced
the published checkpoint's SHA-256; and the published reports' sigmoid fits, scipy on OpenBLAS, came
out otherwise until OpenBLAS was pinned too). The cost is ~6% of a nano step here. A variable already
set wins: `ATEN_CPU_CAPABILITY=avx512` buys the speed back; run.json's hardware.cpu_capability says
which ISA a run's kernels used.
"""
from bench.numerics import pin_cpu_isa

pin_cpu_isa()
