"""What a held-out evaluation costs at n samples per problem (issues 40 and 41): seconds, samples/s and
generated tokens/s of `bench.engine.evaluate.evaluate` at each (problems, n) asked, split into the
greedy pass, the n samples per problem (one batched call, each distinct prompt prefilled once), the
scoring of the answers, the KL to the reference on the first sample of each problem, and the rest
(decoding tokens to text, format checks, the pass@k estimator).

Prints measured figures; it asserts nothing. Each configuration runs --repeats times after one warm-up,
alternating, on one torch thread (see engine_speed.py for why); the minimum is printed beside the
median. The policy is a short warm start of --task at --scale (trained into a temporary BENCH_CACHE
unless --cache names one): its answers have a task's real lengths (a fresh model runs every row to
the cap). The reference is a copy of it moved by one small random step, so the KL pass computes what
it computes in a run.

    python benchmarks/eval_speed.py                               # gcd/nano: 500x4, 500x64, 128x64, ~3 min
    python benchmarks/eval_speed.py --configs 500x4,256x32 --repeats 5 --json eval.json
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a file from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO))

from bench import models, tasks  # noqa: E402
from bench.config import EvalConfig  # noqa: E402
from bench.engine import evaluate as ev  # noqa: E402
from bench.warmstart import WarmStartConfig, warm_start  # noqa: E402


class Timed:
    """Wraps a function and sums the seconds spent in it (the phases of one evaluation)."""

    def __init__(self, fn):
        self.fn, self.s = fn, 0.0

    def __call__(self, *a, **k):
        t0 = time.perf_counter()
        try:
            return self.fn(*a, **k)
        finally:
            self.s += time.perf_counter() - t0


def one(policy, reference, task, examples, n_ex: int, k: int, batch: int) -> dict:
    """One evaluation at (n_ex problems, k samples each), its phases timed."""
    gen = Timed(ev.NativeBackend.generate)
    score = Timed(type(task).score)
    kl = Timed(ev.kl_to_reference)
    saved = ev.NativeBackend.generate, type(task).score, ev.kl_to_reference
    ev.NativeBackend.generate, type(task).score, ev.kl_to_reference = \
        lambda self, *a, **kw: gen(self, *a, **kw), lambda self, *a, **kw: score(self, *a, **kw), kl
    try:
        t0 = time.perf_counter()
        m = ev.evaluate(policy, task, examples, EvalConfig(n_examples=n_ex, k=k, batch_size=batch), seed=0,
                        reference=reference)
        s = time.perf_counter() - t0
    finally:
        ev.NativeBackend.generate, type(task).score, ev.kl_to_reference = saved
    samples = n_ex * (k + 1)  # the k samples and the greedy answer of each problem
    return {"s": s, "generate_s": gen.s, "score_s": score.s, "kl_s": kl.s, "samples": samples,
            "samples_per_s": samples / s, "tokens_per_s": m["eval/gen_tokens"] / s, "gen_tokens": m["eval/gen_tokens"],
            f"pass@{k}": m.get(f"eval/pass@{k}"), "avg_k": m.get("eval/avg_k"), "kl_k1": m.get("eval/kl_k1")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="gcd")
    ap.add_argument("--scale", default="nano")
    ap.add_argument("--configs", default="500x4,500x64,128x64",
                    help="PROBLEMSxN, comma-separated (n samples per problem; the greedy pass is always run)")
    ap.add_argument("--batch", type=int, default=256, help="rows per generate call (eval.batch_size)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmstart-steps", type=int, default=400)
    ap.add_argument("--cache", default=None, help="a BENCH_CACHE to keep the warm start in")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    try:
        configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",")]
        if any(len(c) != 2 or min(c) < 1 for c in configs):
            raise ValueError
    except ValueError:
        ap.error(f"--configs {args.configs!r}: expected PROBLEMSxN items such as 500x4,128x64, each >= 1")
    torch.set_num_threads(args.threads)


    tmp = None
    if args.cache:
        os.environ["BENCH_CACHE"] = args.cache
    elif "BENCH_CACHE" not in os.environ:
        tmp = tempfile.TemporaryDirectory()
        os.environ["BENCH_CACHE"] = tmp.name
    task = tasks.get(args.task)
    ws = warm_start(task, models.get(args.scale), WarmStartConfig(steps=args.warmstart_steps), log=lambda *a: None)
    policy = ws.load("cpu")
    reference = copy.deepcopy(policy.model).eval().requires_grad_(False)
    with torch.no_grad():
        g = torch.Generator().manual_seed(0)
        for p in reference.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 1e-3)
    examples = task.eval_set(max(n for n, _ in configs), 0)
    print(f"evaluation cost: {args.task}/{args.scale} warm start ({args.warmstart_steps} SFT steps, greedy acc "
          f"{ws.accuracy:.2f}), {args.threads} thread(s), {args.batch} rows per generate call, torch {torch.__version__}")
    for c in configs:  # warm-up
        one(policy, reference, task, examples, c[0], c[1], args.batch)
    runs: dict[tuple, list[dict]] = {c: [] for c in configs}
    for _ in range(args.repeats):
        for c in configs:
            runs[c].append(one(policy, reference, task, examples, c[0], c[1], args.batch))
    head = f"{'problems x n':>13} {'min s':>7} {'median s':>8} {'samples/s':>9} {'tokens/s':>9}  " \
           f"{'generate':>8} {'score':>6} {'kl':>5} {'other':>6}   pass@n  kl_k1"
    print(head)
    out = []
    for (n_ex, k), rs in runs.items():
        best = min(rs, key=lambda r: r["s"])
        print(f"{n_ex:>6} x {k:<5} {best['s']:7.2f} {statistics.median(r['s'] for r in rs):8.2f} "
              f"{best['samples_per_s']:9.0f} {best['tokens_per_s']:9.0f}  {best['generate_s']:8.2f} "
              f"{best['score_s']:6.2f} {best['kl_s']:5.2f} {best['s'] - best['generate_s'] - best['score_s'] - best['kl_s']:6.2f}"
              f"   {best[f'pass@{k}']:.3f}  {best['kl_k1']:.2e}")
        out.append({"problems": n_ex, "n": k, "runs": rs, "min": best})
    base = runs[configs[0]]
    b = max(r["samples_per_s"] for r in base)
    print(f"samples/s relative to {configs[0][0]}x{configs[0][1]} (best of {args.repeats}): " +
          ", ".join(f"{n}x{k} {max(r['samples_per_s'] for r in rs) / b:.2f}x" for (n, k), rs in runs.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"task": args.task, "scale": args.scale, "threads": args.threads,
                                               "batch": args.batch, "configs": out}, indent=1))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
