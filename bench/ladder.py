"""`bench calibrate`: the SFT steps and lr that put a (task, scale) where RL can show skill.

A comparison of skill needs a policy that already writes the task's worked format (so an accuracy
gain is not a switch of format) and is right on some problems but not most (so there is room to
sharpen). `bench calibrate` measures this instead of hand-tuning a table per scale: for each SFT
lr in turn, it trains warm starts on a ladder of step counts (200, 400, 800, ...; each one a real,
cached warm start, so the chosen one is already trained) and evaluates each on held-out problems
with k answers sampled at T = 1. It stops at the first rung where

    format rate (share of sampled answers well-formed, Task.well_formed) >= min_format  and
    sampled pass@1 >= target[0]

and records that rung in `bench/calibration.json`, with every rung it measured. When the ladder steps
over the range (one rung below target[0], the next above target[1]) it tries up to two rungs between
them. A rung whose pass@1 is above target[1] is still chosen (more SFT only raises it), marked
"too easy": raise the task's difficulty. A ladder that ends below the targets records its best rung, marked "not met".

The chosen entry is recorded by bench/calibration.py, which runs read at config time.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import math
from pathlib import Path

import torch

from bench.calibration import match_key
from bench.config import EvalConfig
from bench.engine.evaluate import evaluate
from bench.warmstart import code_fingerprint, warm_start

LADDER = (200, 400, 800, 1600, 3200)


@dataclasses.dataclass
class Rung:
    lr: float
    steps: int
    metrics: dict[str, float]
    seconds: float
    key: str
    sha256: str


def choose(rungs: list[Rung], min_format: float, target: tuple[float, float]) -> tuple[Rung, str]:
    """The first rung meeting the targets ("ok", or "too easy" above target[1]), else the best one
    ("not met": the highest format rate, then pass@1)."""
    for r in rungs:
        if r.metrics["eval/format_rate"] >= min_format and r.metrics["eval/avg_k"] >= target[0]:
            return r, "ok" if r.metrics["eval/avg_k"] <= target[1] else "too easy"
    best = max(rungs, key=lambda r: (round(r.metrics["eval/format_rate"], 2), r.metrics["eval/avg_k"]))
    return best, "not met"


def calibrate(task, scale, ws, *, lrs: tuple[float, ...], ladder: tuple[int, ...] = LADDER, n: int = 500,
              k: int = 4, min_format: float = 0.95, target: tuple[float, float] = (0.15, 0.5),
              refine: int = 2, cache: Path | None = None, device: str = "cpu", log=print) -> dict:
    """Train and measure the ladder (see the module docstring); returns the entry to record. When the
    ladder steps over the target range (one rung below pass@1 target[0], the next above target[1]),
    up to `refine` rungs between them (geometric midpoints) look for one inside it."""
    test = task.split("test", n)
    rungs: list[Rung] = []

    def measure(lr: float, steps: int) -> Rung:
        w = warm_start(task, scale, ws.replace(steps=steps, lr=lr, calibrated=False), cache=cache, device=device)
        policy = w.load(device)
        with torch.no_grad():
            m = evaluate(policy, task, test, EvalConfig(n_examples=n, k=k), seed=0)
        log(f"  lr {lr:g} steps {steps:5d}: format {m['eval/format_rate']:.3f} (greedy {m['eval/format_greedy']:.3f})"
            f"  pass@1 {m['eval/avg_k']:.3f}  pass@{k} {m['eval/pass_k']:.3f}  greedy {m['eval/acc_greedy']:.3f}"
            f"  acc|formed {m['eval/acc_formatted']:.3f}  ({w.seconds:.0f} s{', cached' if w.cache_hit else ''})")
        rung = Rung(lr, steps, m, w.seconds, w.key, w.sha256)
        rungs.append(rung)
        return rung

    status = "not met"
    for lr in lrs:
        tried: list[Rung] = []
        for steps in ladder:
            tried.append(measure(lr, steps))
            chosen, status = choose(tried, min_format, target)
            if status != "not met":
                break
        if status == "too easy" and len(tried) >= 2:
            # the ladder stepped over the target range (below it, then above): look between the two
            lower, upper = tried[-2], tried[-1]
            for _ in range(refine):
                mid = int(round(math.sqrt(lower.steps * upper.steps) / 10) * 10)
                if not lower.steps < mid < upper.steps:
                    break
                r = measure(lr, mid)
                tried = sorted([*tried, r], key=lambda x: x.steps)
                verdict = choose([r], min_format, target)[1]
                if verdict == "ok":
                    break
                lower, upper = (r, upper) if verdict == "not met" else (lower, r)
            chosen, status = choose(tried, min_format, target)
        if status != "not met":
            break
    if status == "not met":
        chosen, status = choose(rungs, min_format, target)
    return {
        "match": json.loads(json.dumps(match_key({**dataclasses.asdict(task.config), "name": task.name}, scale.name, ws),
                                       default=str)),
        "steps": chosen.steps, "lr": chosen.lr, "status": status,
        "measured": {k_: round(v, 4) for k_, v in chosen.metrics.items()},
        "criteria": {"min_format": min_format, "target_pass1": list(target), "n": n, "k": k, "temperature": 1.0},
        "rungs": [{"lr": r.lr, "steps": r.steps, "format_rate": round(r.metrics["eval/format_rate"], 4),
                   "pass1": round(r.metrics["eval/avg_k"], 4), "pass_k": round(r.metrics["eval/pass_k"], 4),
                   "greedy": round(r.metrics["eval/acc_greedy"], 4), "seconds": round(r.seconds, 1),
                   "sha256": r.sha256} for r in rungs],
        "code": code_fingerprint(), "date": datetime.date.today().isoformat(),
    }
