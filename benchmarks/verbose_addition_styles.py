"""Accuracy and length of a policy's sampled answers on verbose_addition, split by style.

    OMP_NUM_THREADS=1 python benchmarks/verbose_addition_styles.py CHECKPOINT_DIR [--k 4]

CHECKPOINT_DIR is a saved policy (a warm start: `bench warmstart` prints its path). Samples k
completions per held-out prompt at temperature 1 and groups them by working style (bare, terse or
spelled column lines) and number of re-check lines (3 means "3 or more", i.e. degenerate repeats),
so one can tell whether length carries reward on this task (spelled or checked answers more often
right) or is neutral (the same accuracy at every length).
"""
from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from bench import tasks
from bench.engine.policy import Policy
from bench.engine.rollout import NativeBackend, SamplingParams
from bench.tasks.verbose_addition import verbosity


def style(completion: str) -> tuple[str, int]:
    v = verbosity(completion)
    working = "bare" if v["terse"] + v["spelled"] == 0 else "spelled" if v["spelled"] > v["terse"] else "terse"
    return working, min(v["checks"], 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--k", type=int, default=4, help="samples per held-out prompt")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    task = tasks.get("verbose_addition")
    tok = AutoTokenizer.from_pretrained(args.checkpoint)
    tok.padding_side = "left"
    policy = Policy(AutoModelForCausalLM.from_pretrained(args.checkpoint, dtype=torch.float32), tok)
    examples = [e for e in task.split("test") for _ in range(args.k)]
    backend = NativeBackend(policy.model, policy.pad_id, policy.eos_id, chunk_size=256)
    g = backend.generate(policy.encode_prompts([e.prompt for e in examples]),
                         SamplingParams(max_new_tokens=task.max_new_tokens, seed=args.seed))
    texts = policy.decode(g.tokens, g.mask)
    rows: dict[object, list[tuple[float, int]]] = defaultdict(list)
    for text, ex, n in zip(texts, examples, g.lengths.tolist()):
        hit = task.score(text, ex)
        rows[style(text)].append((hit, n))
        rows["all"].append((hit, n))
    for key in sorted(rows, key=str):
        r = rows[key]
        acc = statistics.mean(c for c, _ in r)
        se = (acc * (1 - acc) / len(r)) ** 0.5
        print(f"{str(key):16s} n={len(r):4d} share={len(r) / len(texts):.3f} "
              f"acc={acc:.3f}±{1.96 * se:.3f} len={statistics.mean(n for _, n in r):.1f}")
    print(f"truncated {g.truncated.float().mean().item():.3f} (cap {task.max_new_tokens})")


if __name__ == "__main__":
    main()
