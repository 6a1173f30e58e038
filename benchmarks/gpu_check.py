"""GPU paths of the engine, in one short script for a lent GPU machine (or --device cpu to try it).

Checks and prints: the algorithms' CUDA-vs-CPU tests; a warm start on the GPU; engine steps at
two scales, per precision (--precisions, default bf16 and fp32) and per forward path (--paths):
`hf` is the transformers forward (BENCH_FUSED=0, the engine before issue 17), `fused` the
hand-fused forward with its static KV cache, prefix sharing and on-device sampling. Each run
gives seconds per step by phase, generated tokens/s, training FLOP/s (the ledger's training
FLOPs over the train phase's seconds), finite metrics, clip fractions exactly 0 with one update
per batch, peak GPU memory. The closing table is issue 17's acceptance 3: generated tok/s and
training TFLOP/s at small and medium in bf16, hf (before) beside fused (after), and generated
tok/s at small against 10x the 23.6k measured before (the H200 figure in the engine issue).

    python benchmarks/gpu_check.py --device cuda --scales small medium --json out.json
    python benchmarks/gpu_check.py --device cuda --skip-tests --precisions bf16 --steps 3   # quicker
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--scales", nargs="+", default=["small", "medium"])
    ap.add_argument("--task", default="addition")
    ap.add_argument("--ws-steps", type=int, default=400)
    ap.add_argument("--steps", type=int, default=4, help="engine steps timed per (scale, precision)")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--precisions", nargs="+", default=["bf16", "fp32"], choices=["bf16", "fp32"])
    ap.add_argument("--paths", nargs="+", default=["hf", "fused"], choices=["hf", "fused"],
                    help="forward paths to time: hf = transformers (BENCH_FUSED=0), fused = the engine's own")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    import algorithms
    from bench import models, tasks
    from bench.config import Budget, EvalSchedule, RunConfig, TrainConfig
    from bench.engine.ledger import Ledger
    from bench.harness.worker import trainer
    from bench.warmstart import WarmStartConfig, warm_start

    report: dict = {"torch": torch.__version__, "device": args.device}
    import transformers

    report["transformers"] = transformers.__version__
    if args.device.startswith("cuda"):
        report["gpu"] = torch.cuda.get_device_name(0)
    print(json.dumps(report), flush=True)

    if not args.skip_tests:
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/algorithms"],
                           cwd=ROOT, capture_output=True, text=True)
        tail = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-500:]
        report["algorithms_tests"] = {"rc": p.returncode, "summary": tail, "seconds": round(time.perf_counter() - t, 1)}
        print("algorithms tests:", report["algorithms_tests"], flush=True)
        if p.returncode != 0:
            print(p.stdout[-3000:])

    if not os.environ.get("BENCH_CACHE"):  # a throwaway cache unless the caller names one
        os.environ["BENCH_CACHE"] = tempfile.mkdtemp(prefix="gpu-check-cache-")
    task = tasks.get(args.task)
    train_flops = [0]  # the ledger's training FLOPs of the current run (wrapped at class level)
    inner_training = Ledger.training

    def training(self, *a, **k):
        f = inner_training(self, *a, **k)
        train_flops[0] += f
        return f

    Ledger.training = training
    rows = []
    for scale_name in args.scales:
        scale = models.get(scale_name)
        wcfg = WarmStartConfig(steps=args.ws_steps, eval_examples=200)
        if args.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        ws = warm_start(task, scale, wcfg, device=args.device)
        print(f"warm start {args.task}/{scale_name}: acc {ws.accuracy:.3f} in {ws.seconds:.1f}s "
              f"({args.ws_steps} SFT steps + eval)", flush=True)
        for precision, path in [(p, q) for p in args.precisions for q in args.paths]:
            os.environ["BENCH_FUSED"] = "1" if path == "fused" else "0"
            train_flops[0] = 0
            if args.device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
            cfg = RunConfig(
                recipe=algorithms.get("grpo"), task=args.task, scale=scale_name, budget=Budget(value=args.steps, kind="steps"),
                train=TrainConfig(prompts_per_step=args.prompts, group_size=args.group, precision=precision,
                                  micro_batch_size=256),
                eval=EvalSchedule(every=1.0, n_examples=200, k=0), warmstart=wcfg, device=args.device)
            out = Path(tempfile.mkdtemp(prefix="gpu-check-results-"))
            t = time.perf_counter()
            res = trainer(cfg, root=out).run()
            wall = time.perf_counter() - t
            import polars as pl

            st = pl.read_parquet(res.path / "steps.parquet")
            ev = pl.read_parquet(res.path / "evals.parquet")
            later = st.slice(1)  # drop the first step (allocator and kernel warm-up)
            med = lambda c, later=later, st=st: float(later[c].median()) if later.height else float(st[c].median())  # noqa: E731
            gen_tok = float(st["compute/gen_tokens"][-1] / st["time/rollout_s"].sum())
            row = {
                "scale": scale_name, "precision": precision, "path": path, "status": res.status,
                "params_M": round(json.loads((res.path / "run.json").read_text())["model"]["params"] / 1e6, 2),
                "step_s": med("time/step_s"), "rollout_s": med("time/rollout_s"), "reference_s": med("time/reference_s"),
                "train_s": med("time/train_s"), "gen_tok_per_s": gen_tok,
                "train_tok_per_s": float(st["compute/train_tokens"][-1] / st["time/train_s"].sum()),
                "tflops_per_s": float(st["compute/flops"][-1] / st["time/step_s"].sum() / 1e12),
                "train_tflops_per_s": float(train_flops[0] / st["time/train_s"].sum() / 1e12),
                "acc_start": float(ev["eval/acc_greedy"][0]), "acc_end": float(ev["eval/acc_greedy"][-1]),
                "clip_frac_max": float((st["policy/clip_frac_low"] + st["policy/clip_frac_high"]).max()),
                "finite": all(math.isfinite(x) for x in st["kl/k3"].to_list() + st["loss/policy"].to_list()),
                "run_wall_s": round(wall, 1),
            }
            if args.device.startswith("cuda"):
                row["peak_mem_GiB"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    os.environ.pop("BENCH_FUSED", None)
    Ledger.training = inner_training
    report["engine"] = rows
    print(acceptance_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    ok = all(r["status"] == "finished" and r["finite"] and r["clip_frac_max"] == 0 for r in rows)
    print("GPU CHECK", "OK" if ok else "FAILED")
    return 0 if ok else 1


EARLIER_GEN_TOK_S = 23_600  # small, bf16, H200, transformers forward (the engine issue's note)


def acceptance_table(rows: list[dict]) -> str:
    """Issue 17 acceptance 3: hf (before) beside fused (after) per scale and precision."""
    by = {(r["scale"], r["precision"], r["path"]): r for r in rows}
    out = ["", "scale   precision  gen tok/s hf -> fused (x)        train TFLOP/s hf -> fused   step s hf -> fused"]
    for scale, precision in dict.fromkeys((r["scale"], r["precision"]) for r in rows):
        hf, fu = by.get((scale, precision, "hf")), by.get((scale, precision, "fused"))
        cell = lambda k, fmt, hf=hf, fu=fu: " -> ".join(fmt.format(x[k]) if x else "-" for x in (hf, fu))  # noqa: E731
        ratio = f"({fu['gen_tok_per_s'] / hf['gen_tok_per_s']:.1f}x)" if hf and fu else ""
        out.append(f"{scale:<7} {precision:<9}  {cell('gen_tok_per_s', '{:,.0f}'):>22} {ratio:<7}  "
                   f"{cell('train_tflops_per_s', '{:.3f}'):>22}  {cell('step_s', '{:.3f}'):>18}")
    small = by.get(("small", "bf16", "fused"))
    if small:
        x = small["gen_tok_per_s"] / EARLIER_GEN_TOK_S
        out.append(f"small bf16 fused: {small['gen_tok_per_s']:,.0f} generated tok/s = {x:.1f}x the earlier "
                   f"{EARLIER_GEN_TOK_S:,} (acceptance: >= 10x) -> {'MET' if x >= 10 else 'NOT MET'}")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
