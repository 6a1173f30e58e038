"""Which CPU kernel-set settings change the bits, and what each costs per nano step (issue 45, item 5).

Prints measured figures; it asserts nothing. Each kernel set is a set of environment variables read
when torch, MKL, oneDNN or OpenBLAS load (so each runs in its own child process, the variables set
before Python starts, OMP_NUM_THREADS=1): the default pin of bench/numerics.py, an SSE4-level set
(the nearest this machine gets to "another ISA": ATen's scalar-vector DEFAULT kernels, MKL's SSE4_2
branch), MKL's Conditional Numerical Reproducibility branches (MKL_CBWR), and oneDNN switched off.
Every child, on the same inputs (numpy-generated, so the inputs themselves do not depend on the
ISA), prints sha1 hashes of:

  init      a freshly initialised nano model (seed 0): torch's RNG and init kernels
  aten      softmax, log-softmax, RMS norm, SiLU and a sum over fixed tensors: ATen's own kernels
  linear    F.linear forward and backward (dX, dW, db) at every nano linear shape, a step's rows
  bmm       torch.bmm forward and backward at attention's score shape (rows x heads, seq, head_dim 32)
  sdpa      scaled_dot_product_attention (causal, GQA-shaped, as nano's) forward and backward
  fwd_bwd   the HF forward of nano (numpy weights) on a fixed RL-shaped batch, labels loss, backward
  logprobs  the engine's sequence_logprobs (the fused forward) with entropy, and its backward
  step      the policy weights and each step's logged metrics after --steps engine steps

and times those engine steps: `Trainer.step` of a grpo RunConfig (addition, 16 prompts x 8 samples,
the task's max_new_tokens: rollout, reference pass, loss, backward, clip, AdamW) from one warm start
trained once under the default pin (--warmstart-steps of SFT) and loaded by every child as a local
model directory, with the KL metrics a nano cell logs. Step time: the median CPU seconds (user +
system of the child, one thread: steadier than wall time on a shared box) of the steps after the
first. Kernel sets are run in --rounds rounds, the order reversed every other round, and each
set's step times pooled, so load drift hits every set alike; read the ratios, not the seconds.

"hash groups" labels each column's distinct hashes A, B, C... in order of appearance: two sets with
the same letter in a column computed the same bits there.

    OMP_NUM_THREADS=1 python benchmarks/kernel_sets.py                 # ~5 min on 2 shared cores
    OMP_NUM_THREADS=1 python benchmarks/kernel_sets.py --repeats 3 --rounds 1 --sets pin,sse,pin+cnr
    OMP_NUM_THREADS=1 python benchmarks/kernel_sets.py --json kernel_sets.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a file from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO))

PIN = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
       "OPENBLAS_CORETYPE": "Haswell"}  # bench/numerics.py's PIN (not imported: importing bench sets it)
SSE = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41",
       "OPENBLAS_CORETYPE": "Nehalem"}
# name -> (environment, in-process switches); every variable any set names is cleared in the others
KERNEL_SETS: dict[str, tuple[dict[str, str], dict]] = {
    "pin": (PIN, {}),
    "sse": (SSE, {}),
    "pin+mkl-sse4_2": ({**PIN, "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}, {}),
    "pin+aten-default": ({**PIN, "ATEN_CPU_CAPABILITY": "default"}, {}),
    "pin+cnr": ({**PIN, "MKL_CBWR": "COMPATIBLE"}, {}),
    "pin+cbwr-avx2-strict": ({**PIN, "MKL_CBWR": "AVX2,STRICT"}, {}),
    "sse+cnr": ({**SSE, "MKL_CBWR": "COMPATIBLE"}, {}),
    "pin-onednn-off": (PIN, {"mkldnn": False}),
}
EXTRA_VARS = ("MKL_CBWR",)
COLUMNS = ("init", "aten", "linear", "bmm", "sdpa", "fwd_bwd", "logprobs", "step")
SCALE, TASK = "nano", "addition"


# ---------------------------------------------------------------------------- child
def _sha(*tensors) -> str:
    import hashlib

    h = hashlib.sha1()
    for t in tensors:
        h.update(t.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()[:12]


def _hashes(batch_rows: int, seq: int, completion: int) -> dict[str, str]:
    import numpy as np
    import torch
    import torch.nn.functional as F

    from bench import models, tasks
    from bench.engine.padding import left_pad
    from bench.engine.policy import Policy, sequence_logprobs

    rng = np.random.default_rng(0)  # numpy's scalar generator: the inputs do not depend on the ISA

    def randn(*shape, scale=1.0, grad=False):
        t = torch.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32))
        return t.requires_grad_(grad)

    out = {}
    scale = models.get(SCALE)
    tok = models.build_tokenizer(scale)
    out["init"] = _sha(*models.build_model(scale, tok, seed=0).state_dict().values())

    x = randn(batch_rows * 4, 263, scale=3.0)
    h = randn(batch_rows * 4, 64)
    out["aten"] = _sha(F.softmax(x, -1), F.log_softmax(x, -1), F.rms_norm(h, (64,), torch.ones(64), 1e-6),
                       F.silu(h), x.sum(-1), h.pow(2).mean(-1, keepdim=True).rsqrt())

    n = batch_rows * seq  # a step's rows through every linear of nano: q, k/v, o, gate/up, down, lm_head
    parts = []
    for fin, fout, bias in ((64, 64, True), (64, 32, True), (64, 64, False), (64, 256, False), (256, 64, False),
                            (64, 263, False)):
        a, w = randn(n, fin, grad=True), randn(fout, fin, scale=0.05, grad=True)
        b = randn(fout, grad=True) if bias else None
        y = F.linear(a, w, b)
        y.backward(randn(n, fout))
        parts += [y, a.grad, w.grad] + ([b.grad] if bias else [])
    out["linear"] = _sha(*parts)

    q, k, v = (randn(batch_rows, heads, seq, 32, grad=True) for heads in (2, 1, 1))
    o = F.scaled_dot_product_attention(q, k.expand(-1, 2, -1, -1), v.expand(-1, 2, -1, -1), is_causal=True)
    o.backward(randn(*o.shape))
    out["sdpa"] = _sha(o, q.grad, k.grad, v.grad)
    a, b = randn(batch_rows * 2, seq, 32, grad=True), randn(batch_rows * 2, 32, seq, grad=True)
    s = torch.bmm(a, b)  # attention's scores and their gradients as plain batched GEMMs (MKL)
    s.backward(randn(*s.shape))
    out["bmm"] = _sha(s, a.grad, b.grad)

    model = models.build_model(scale, tok, seed=0)
    with torch.no_grad():  # numpy weights: these columns test compute, not init
        for name, p in model.named_parameters():
            p.copy_(torch.ones_like(p) if "norm" in name else randn(*p.shape, scale=0.05))
    task = tasks.get(TASK)
    policy = Policy(model, tok)
    prompts = [p for p in policy.encode_prompts([e.prompt for e in task.split("train", n=batch_rows // 8)])
               for _ in range(8)]
    ids, att = left_pad(prompts, policy.pad_id)
    comp = torch.from_numpy(rng.integers(0, len(tok), (len(prompts), completion)))
    full = torch.cat([ids, comp], 1)
    full_att = torch.cat([att, torch.ones_like(comp)], 1)
    labels = full.masked_fill(torch.cat([torch.zeros_like(att), torch.ones_like(comp)], 1) == 0, -100)
    res = model(input_ids=full, attention_mask=full_att, labels=labels)
    res.loss.backward()
    out["fwd_bwd"] = _sha(res.logits, res.loss, *(p.grad for p in model.parameters()))
    model.zero_grad(set_to_none=True)
    logp, ent = sequence_logprobs(model, ids, att, comp, 1.0, with_entropy=True)
    logp.mean().backward()
    out["logprobs"] = _sha(logp, ent, *(p.grad for p in model.parameters()))
    return out


def _steps(warm: Path, root: Path, steps: int) -> tuple[str, list[float], list[float], list[float]]:
    import torch

    import algorithms
    from bench.config import Budget, RunConfig, TrainConfig, WarmStartConfig
    from bench.harness.worker import trainer as make_trainer

    # the warm start as a local model directory (the same weights in every child, whatever its ISA:
    # the cache key of a warm start names a non-AVX2 ISA); kl_metrics as a built-in scale has them
    cfg = RunConfig(recipe=algorithms.get("grpo"), task=TASK, scale=str(warm), budget=Budget(value=steps, kind="steps"),
                    train=TrainConfig(kl_metrics=True), warmstart=WarmStartConfig(steps=0), threads=1)
    trainer = make_trainer(cfg, root=root)
    trainer._setup()
    cpu, wall, lens, rows = [], [], [], []
    for step in range(1, steps + 1):
        c0, t0 = time.process_time(), time.perf_counter()
        row = trainer.step(step)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
        lens.append(row["len/mean"])
        rows.append(torch.tensor([v for k, v in sorted(row.items()) if isinstance(v, float) and not k.startswith("time/")],
                                 dtype=torch.float64))
    return _sha(*trainer.policy.model.state_dict().values(), *rows), cpu, wall, lens


# mkl_cbwr_get's codes (mkl_service.h); MKL_CBWR_STRICT is not part of the branch it returns
CBWR_BRANCHES = {1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2", 9: "AVX",
                 10: "AVX2", 11: "AVX512_MIC", 12: "AVX512"}


def mkl_branch() -> str:
    """The CNR branch MKL runs in (MKL_CBWR as MKL took it: on a non-Intel CPU an ISA branch reads
    AUTO), from the MKL linked into libtorch_cpu; '?' where that symbol is absent."""
    import ctypes

    import torch

    try:
        lib = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
        torch.ones(4, 4) @ torch.ones(4, 4)  # MKL reads MKL_CBWR on first use
        code = lib.mkl_serv_cbwr_get(1)  # MKL_CBWR_BRANCH
    except (OSError, AttributeError):
        return "?"
    return CBWR_BRANCHES.get(code, str(code))


def child(spec: dict) -> dict:
    import torch

    import bench  # noqa: F401  (the pin, setdefault: the parent set every variable already)
    from bench.numerics import cpu_capability

    torch.set_num_threads(1)
    if spec["switches"].get("mkldnn") is False:
        torch.backends.mkldnn.enabled = False
    if spec["mode"] == "prepare":
        from bench import models, tasks
        from bench.config import WarmStartConfig
        from bench.warmstart import warm_start

        ws = warm_start(tasks.get(TASK), models.get(SCALE), WarmStartConfig(steps=spec["warmstart_steps"], eval_examples=32),
                        cache=Path(spec["cache"]))
        return {"path": str(ws.path), "accuracy": ws.accuracy}
    out = {"cpu_capability": cpu_capability(), "mkl_branch": mkl_branch(), "mkldnn": torch.backends.mkldnn.enabled}
    if spec["hashes"]:
        out["hashes"] = _hashes(spec["rows"], spec["seq"], spec["completion"])
    step_hash, cpu, wall, lens = _steps(Path(spec["warm"]), Path(spec["root"]), spec["steps"])
    if spec["hashes"]:
        out["hashes"]["step"] = step_hash
    out.update({"cpu_s": cpu, "wall_s": wall, "len": lens})
    return out


# ---------------------------------------------------------------------------- parent
def run_child(name: str, spec: dict, log) -> dict:
    env_vars, switches = KERNEL_SETS[name]
    env = {k: v for k, v in os.environ.items() if k not in PIN and k not in EXTRA_VARS}
    env.update(env_vars)
    env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"})
    spec = {**spec, "switches": switches}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"kernel set {name}: child exited {p.returncode}\n{p.stderr[-3000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    log(f"  {name}: {time.perf_counter() - t0:.0f}s")
    return res


def groups(values: list[str]) -> list[str]:
    """A, B, C... per distinct value, in order of appearance."""
    seen: dict[str, str] = {}
    return [seen.setdefault(v, chr(ord("A") + len(seen))) for v in values]


def table(headers: list[str], rows: list[list], left: int = 1) -> str:
    """Plain-text table; the first `left` columns are labels (left-aligned), the rest figures."""
    cells = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    return "\n".join([line(cells[0]), line(["-" * w for w in widths])] + [line(r) for r in cells[1:]])


def report(res: dict) -> str:
    names = list(res["sets"])
    base = statistics.median(res["sets"][names[0]]["cpu_s"])
    cols = {c: groups([res["sets"][n]["hashes"][c] for n in names]) for c in COLUMNS}
    rows = []
    for i, n in enumerate(names):
        s = res["sets"][n]
        med = statistics.median(s["cpu_s"])
        rows.append([n, s["cpu_capability"], s["mkl_branch"], "".join(cols[c][i] for c in COLUMNS), f"{med:.3f}",
                     f"{statistics.median(s['wall_s']):.3f}", f"{med / base:.2f}", f"{statistics.mean(s['len']):.1f}"])
    env_lines = [f"  {n}: " + " ".join(f"{k}={v}" for k, v in KERNEL_SETS[n][0].items())
                 + "".join(f" [torch.backends.{k}.enabled={v}]" for k, v in KERNEL_SETS[n][1].items()) for n in names]
    out = [f"kernel sets: torch {res['torch']} on {res['cpu']}, 1 thread; load average {res['load']}",
           f"{res['scale']} grpo step ({TASK}, 16 prompts x 8): median CPU s of {res['timed']} steps per set "
           f"({res['rounds']} rounds x {res['repeats']}, each round's first step untimed); "
           f"ratio to {names[0]} (above 1: slower)",
           f"hash groups, one letter per column ({' '.join(COLUMNS)}): the same letter, the same bits",
           "", table(["kernel set", "cpu_capability", "MKL CNR", "hash groups", "CPU s/step", "wall s/step", "ratio",
                      "mean len"], rows), "", "sets:", *env_lines, "",
           "hashes:", table(["kernel set", *COLUMNS], [[n, *(res["sets"][n]["hashes"][c] for c in COLUMNS)]
                                                       for n in names])]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(KERNEL_SETS),
                    help=f"comma-separated kernel sets, the first is the ratios' base: {', '.join(KERNEL_SETS)}")
    ap.add_argument("--repeats", type=int, default=3, help="timed engine steps per set and round (after one untimed)")
    ap.add_argument("--rounds", type=int, default=2, help="passes over the sets (order reversed every other pass)")
    ap.add_argument("--warmstart-steps", type=int, default=60, help="SFT steps of the shared warm start")
    ap.add_argument("--rows", type=int, default=128, help="batch rows of the hashed tensors (a step's 16 x 8)")
    ap.add_argument("--seq", type=int, default=40, help="sequence length of the hashed linear and attention inputs")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0

    names = [s for s in args.sets.split(",") if s]
    bad = [s for s in names if s not in KERNEL_SETS]
    if bad:
        ap.error(f"--sets: unknown kernel set(s) {bad}; valid: {', '.join(KERNEL_SETS)}")
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    tmp = Path(tempfile.mkdtemp(prefix="kernel-sets-"))
    t0 = time.perf_counter()
    try:
        log(f"warm start: {TASK}/{SCALE}, {args.warmstart_steps} SFT steps under the pin ...")
        warm = run_child("pin", {"mode": "prepare", "cache": str(tmp / "cache"), "warmstart_steps": args.warmstart_steps},
                         log)
        sets: dict[str, dict] = {}
        for r in range(args.rounds):
            log(f"round {r + 1}/{args.rounds}")
            for n in (names if r % 2 == 0 else names[::-1]):
                spec = {"mode": "measure", "warm": warm["path"], "root": str(tmp / "results" / f"{n}-{r}"),
                        "steps": args.repeats + 1, "hashes": r == 0, "rows": args.rows, "seq": args.seq,
                        "completion": 16}
                res = run_child(n, spec, log)
                s = sets.setdefault(n, {"cpu_capability": res["cpu_capability"], "mkl_branch": res["mkl_branch"],
                                        "hashes": res.get("hashes"),
                                        "cpu_s": [], "wall_s": [], "len": []})
                for k in ("cpu_s", "wall_s", "len"):
                    s[k] += res[k][1:]  # the first step of each child: warm-up
        sets = {n: sets[n] for n in names}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    import torch

    res = {"torch": torch.__version__, "cpu": platform.processor() or platform.machine(), "scale": SCALE,
           "load": " ".join(f"{x:.1f}" for x in os.getloadavg()), "rounds": args.rounds, "repeats": args.repeats,
           "timed": args.rounds * args.repeats, "warmstart_accuracy": warm["accuracy"],
           "command": " ".join([Path(sys.executable).name, *sys.argv]), "wall_s": time.perf_counter() - t0,
           "sets": sets}
    print(report(res))
    print(f"\n{res['wall_s']:.0f}s in all; warm start greedy accuracy {warm['accuracy']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
