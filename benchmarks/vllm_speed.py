"""Rollout tokens/s: the vLLM backend beside the native one (issue 8, acceptance item 4).

Run it with the vLLM venv: `make bench-vllm`, or `OMP_NUM_THREADS=1 .venv-vllm/bin/python
benchmarks/vllm_speed.py`. Prints measured figures; asserts nothing.

Both backends get the same freshly initialised model per scale (speed does not depend on the
weights; a random model rarely emits EOS, so rows run to the cap), the same left-padded task
prompts repeated G times (the trainer's batch shape), the same max_new_tokens, temperature 1 and
no top-p, and both return per-token log-probs. Generated tokens are counted the same way: each row
up to and including its first EOS (or the cap). vLLM runs in this process (in-process engine,
fp32, eager, as the trainer uses it), so both sides share one thread budget: torch threads are set
to --threads before vLLM starts (vLLM's CPU worker then blocks changes), and OMP_NUM_THREADS
should equal it (vLLM's CPU kernels use OpenMP; `make bench-vllm` sets 1). The first vLLM
generate is a warm-up (~3 s) and is not timed; every figure is the median of --repeats runs, the
two sides alternating so that drifting load hits both. Weight push time (`sync`, done
after every optimizer step) is printed too.

    OMP_NUM_THREADS=1 .venv-vllm/bin/python benchmarks/vllm_speed.py --scales nano,micro
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", default="nano,micro")
    ap.add_argument("--task", default="addition")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the task's cap")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if os.environ.get("OMP_NUM_THREADS") != str(args.threads):
        print(f"note: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')} but --threads {args.threads}: "
              "vLLM's kernels and torch then use different thread counts")
    torch.set_num_threads(args.threads)

    from bench import models, tasks
    from bench.engine.policy import Policy
    from bench.engine.rollout import NativeBackend, SamplingParams
    from bench.engine.vllm_backend import VLLMBackend

    import vllm

    task = tasks.get(args.task)
    max_new = args.max_new_tokens or task.max_new_tokens
    print(f"vllm {vllm.__version__}, torch {torch.__version__}, {args.threads} thread(s); task {args.task}, "
          f"{args.prompts} prompts × {args.group} samples, max_new_tokens {max_new}, temperature 1")
    print(f"{'scale':8s} {'params':>8s} {'native tok/s':>13s} {'vllm tok/s':>11s} {'vllm/native':>11s} "
          f"{'push ms':>8s}")
    for name in args.scales.split(","):
        scale = models.get(name)
        tok = models.build_tokenizer(scale)
        policy = Policy(models.build_model(scale, tok, seed=0).eval(), tok)
        prompts = policy.encode_prompts([e.prompt for e in task.split("test", n=args.prompts)])
        rep = [p for p in prompts for _ in range(args.group)]
        native = NativeBackend(policy.model, policy.pad_id, policy.eos_id)
        fast = VLLMBackend(policy, seed=0)
        times: dict[str, list[float]] = {"native": [], "vllm": []}
        tokens: dict[str, list[int]] = {"native": [], "vllm": []}
        for r in range(args.repeats + 1):
            for side, be in (("native", native), ("vllm", fast)) if r % 2 == 0 else (("vllm", fast), ("native", native)):
                t0 = time.perf_counter()
                g = be.generate(rep, SamplingParams(max_new, seed=r))
                dt = time.perf_counter() - t0
                if r:  # run 0 warms both up
                    times[side].append(dt)
                    tokens[side].append(int(g.mask.sum()))
        push = []
        for _ in range(3):
            t0 = time.perf_counter()
            fast.sync(policy.model)
            push.append(time.perf_counter() - t0)
        tps = {s: statistics.median(n / t for n, t in zip(tokens[s], times[s])) for s in times}
        print(f"{name:8s} {models.n_params(policy.model) / 1e6:7.2f}M {tps['native']:13.0f} {tps['vllm']:11.0f} "
              f"{tps['vllm'] / tps['native']:11.2f} {1e3 * statistics.median(push):8.1f}")
        fast.close()
        del fast


if __name__ == "__main__":
    main()
