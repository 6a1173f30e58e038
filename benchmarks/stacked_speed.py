"""What seed-vectorised training buys (issue 27): R replicas as one StackedLM vs R separate models.

Prints measured figures; it asserts nothing. For each scale and each R, three phases of an RL step
at math-small's cell settings (16 prompts x group 8 per replica, the addition task's prompts and
max_new_tokens), each timed stacked (one call for all R replicas) and sequential (R calls, one per
replica, as R separate runs would make them), alternating so that drifting load hits both:

  rollout  StackedLM.generate vs R x NativeBackend.generate (replica r: its own 16 prompts, seed r)
  train    StackedLM.logprobs + backward vs R x (sequence_logprobs + backward), on those rollouts,
           with the detached entropy the trainer logs and a masked token-mean loss per replica;
           "train/1": the stack, one forward + backward per replica (logprobs(replicas=slice(r, r + 1))),
           which holds one replica's activations at a time, as the sequential side does
  optim    clip_grad_norm_ (per replica) + AdamW step over the stacked leaves vs R x (clip + AdamW)

Figures: median CPU seconds (user + system of this process) of --repeats after one warm-up, and
median wall seconds beside them; replica-steps per CPU second (R / seconds: the runs-per-core-hour
proxy, as a run is a fixed number of steps); stacked speed-up (sequential s / stacked s). "step"
sums the three phases. The rollout also counts the rows whose tokens differ between the two sides
(float-rounding flips; see tests/engine/test_stacked.py). On a shared box CPU seconds still move
±10-20% between runs (cache contention): read ratios, and run it twice.

Models: a short in-memory warm start (--warmstart-steps of SFT on the task's worked solutions) so
that rows end at EOS with RL-like lengths; every replica starts from it (as the seeds of one cell
do), with its own prompts and sampling seed. One torch thread (--threads): on a shared 2-core box,
threads wait on each other. Memory grows with R: the stacked train phase at micro, R=16, holds the
activations of 16 x 128 rows (StackedLM.logprobs runs the replicas a few at a time, see PASS_BYTES).

    python benchmarks/stacked_speed.py                   # nano and micro, R in 1,4,8,16: ~5.5 CPU min
    python benchmarks/stacked_speed.py --scales nano --replicas 1,2,4 --json stacked.json
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a file from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO))

from bench import models, tasks  # noqa: E402
from bench.config import WarmStartConfig  # noqa: E402
from bench.engine.policy import Policy, sequence_logprobs  # noqa: E402
from bench.engine.padding import left_pad  # noqa: E402
from bench.engine.rollout import NativeBackend, SamplingParams  # noqa: E402
from bench.engine.stacked import StackedLM  # noqa: E402
from bench.warmstart import sft  # noqa: E402

PHASES = ("rollout", "train", "optim")  # "train/1": the stack, one replica per forward + backward


def alternating(fns: dict, repeats: int, sync=lambda: None) -> dict[str, dict]:
    """Warm up each, then time them in turn, `repeats` rounds: load drift hits every side alike.
    Per side: median CPU seconds of this process (user + system: what a run costs in core-hours,
    and steadier than wall time on a shared box, where a process waits for a core) and median wall.
    On a GPU, `sync` waits for the device after each call and "s" is the wall time (the host's CPU
    seconds there are mostly the wait)."""
    for fn in fns.values():
        fn()
        sync()
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    wall: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            sync()
            cpu[k].append(time.process_time() - c0)
            wall[k].append(time.perf_counter() - t0)
    on_gpu = DEVICE.type != "cpu"
    return {k: {"s": statistics.median(wall[k] if on_gpu else cpu[k]), "wall_s": statistics.median(wall[k]),
                "cpu_runs": cpu[k], "wall_runs": wall[k]} for k in fns}


DEVICE = torch.device("cpu")


def _sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def warm_policy(scale_name: str, task, steps: int, log) -> Policy:
    scale = models.get(scale_name)
    tok = models.build_tokenizer(scale)
    policy = Policy(models.build_model(scale, tok, seed=0).to(DEVICE), tok)
    t0 = time.perf_counter()
    sft(policy, task.split("train", n=4096), WarmStartConfig(steps=steps, batch_size=32, warmup_steps=min(20, steps)))
    log(f"  {scale_name}: {steps} SFT steps in {time.perf_counter() - t0:.1f}s")
    return policy


def bench_replicas(policy: Policy, task, R: int, n_prompts: int, group: int, max_new: int, repeats: int,
                   lr: float, log, seq_max: int | None = None) -> dict:
    """One R: every phase stacked and (for R <= seq_max) sequential. Above seq_max only the stacked
    side is timed (a GPU's R = 256 sequential would take minutes); the report compares it with R
    times the largest timed R's sequential figure per replica."""
    seq_on = seq_max is None or R <= seq_max
    reps = [copy.deepcopy(policy.model).train() for _ in range(R)]
    stack = StackedLM.from_models(reps)
    pad, eos = policy.pad_id, policy.eos_id
    examples = task.split("train", n=n_prompts * R)
    prompts = [[p for p in policy.encode_prompts([e.prompt for e in examples[r * n_prompts:(r + 1) * n_prompts]])
                for _ in range(group)] for r in range(R)]
    seeds = list(range(R))
    params = SamplingParams(max_new, 1.0)
    backends = [NativeBackend(m, pad, eos) for m in reps]
    out: dict = {}

    def roll_stacked():
        out["stacked_gens"] = stack.generate(prompts, params, seeds, pad, eos)

    def roll_seq():
        out["seq_gens"] = [b.generate(prompts[r], SamplingParams(max_new, 1.0, seed=seeds[r]))
                           for r, b in enumerate(backends)]

    log(f"    R={R} rollout")
    sides = lambda fns: fns if seq_on else {k: v for k, v in fns.items() if k == "stacked"}  # noqa: E731
    t_roll = alternating(sides({"stacked": roll_stacked, "sequential": roll_seq}), repeats, _sync)
    gens = out["stacked_gens"]
    seq = out["seq_gens"] if seq_on else gens  # above seq_max the training batch is the stack's own rollouts
    differ = 0 if seq_on else None
    for g, s in zip(gens, seq) if seq_on else ():
        w = min(g.tokens.shape[1], s.tokens.shape[1])
        differ += int(((g.tokens[:, :w] != s.tokens[:, :w]).any(1) | (g.lengths != s.lengths)).sum())
    gen_tokens = sum(int(g.mask.sum()) for g in seq)

    # the training batch: each replica's prompts (left-padded on their own for the sequential side, to
    # the widest of the stack for the stacked one) and its sampled completions
    own = [tuple(t.to(DEVICE) for t in left_pad(p, pad)) for p in prompts]
    ids, att = (t.view(R, n_prompts * group, -1).to(DEVICE) for t in left_pad([p for ps in prompts for p in ps], pad))
    T = max(g.tokens.shape[1] for g in seq)
    comp = torch.stack([torch.nn.functional.pad(g.tokens, (0, T - g.tokens.shape[1]), value=pad) for g in seq])
    cmask = torch.stack([torch.nn.functional.pad(g.mask, (0, T - g.mask.shape[1])) for g in seq])

    def train_stacked():
        for p in stack.parameters():
            p.grad = None
        logp, _ = stack.logprobs(ids, att, comp, 1.0, with_entropy=True)
        loss = (-(logp * cmask).sum((1, 2)) / cmask.sum((1, 2))).sum()  # replicas' losses: disjoint weights
        loss.backward()

    def train_seq():
        for r, m in enumerate(reps):
            m.zero_grad(set_to_none=True)
            g = seq[r]
            logp, _ = sequence_logprobs(m, own[r][0], own[r][1], g.tokens, 1.0, with_entropy=True)
            (-(logp * g.mask).sum() / g.mask.sum()).backward()

    def train_each():  # the stack's weights, one replica per forward and backward (one's activations held)
        for p in stack.parameters():
            p.grad = None
        for r in range(R):
            sl = slice(r, r + 1)
            logp, _ = stack.logprobs(ids[sl], att[sl], comp[sl], 1.0, with_entropy=True, replicas=sl)
            (-(logp[0] * cmask[r]).sum() / cmask[r].sum()).backward()

    log(f"    R={R} train")
    t_train = alternating(sides({"stacked": train_stacked, "sequential": train_seq, "each": train_each}), repeats, _sync)
    opt_stacked = torch.optim.AdamW(stack.parameters(), lr=lr)
    opts = [torch.optim.AdamW(m.parameters(), lr=lr) for m in reps]

    def optim_stacked():
        stack.clip_grad_norm_(1.0)
        opt_stacked.step()

    def optim_seq():
        for m, o in zip(reps, opts):
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            o.step()

    t_optim = alternating(sides({"stacked": optim_stacked, "sequential": optim_seq}), repeats, _sync)
    res = {"R": R, "gen_tokens": gen_tokens, "rows": R * n_prompts * group, "rows_differing": differ,
           "peak_mem_gb": torch.cuda.max_memory_allocated() / 2**30 if DEVICE.type == "cuda" else None,
           "mean_len": gen_tokens / (R * n_prompts * group), "train_batch": list(comp.shape), "prompt_width": ids.shape[-1]}
    for name, t in zip(PHASES, (t_roll, t_train, t_optim)):
        res[name] = t
    return res


def report(res: dict) -> str:
    unit = "wall seconds (GPU, synchronised)" if res["device"] != "cpu" else "CPU seconds"
    out = [f"stacked vs sequential replicas: torch {res['torch']}, device {res['device']}, {res['threads']} thread(s), "
           f"{res['cpu']}, load {res['load']}; {res['prompts']} prompts x group {res['group']} per replica, max "
           f"{res['max_new']} new tokens, median of {res['repeats']}",
           f"per phase: {unit} sequential / stacked (speed-up = sequential ÷ stacked); step: the three phases "
           "(train as one stacked call); "
           "replica-steps/s = R ÷ step seconds (runs per core-hour ∝ it); gen tok/s: the stack's generated tokens per "
           "second of its rollout; wall x: the step's speed-up in wall time. '~': sequential not timed at this R, "
           "taken as R x the per-replica seconds of the largest R timed"]
    head = ["scale", "R", "mean len", *[f"{p} seq/stk (x)" for p in PHASES], "train/1 stk (x)", "step seq/stk",
            "replica-steps/s seq/stk", "step x", "wall x", "gen tok/s", "peak GiB", "rows differing"]
    rows = []
    for s in res["scales"]:
        per_rep: dict = {}  # phase -> (cpu s, wall s) per replica at the largest R timed sequentially
        for r in s["runs"]:
            timed = "sequential" in r["rollout"]
            if timed:
                per_rep = {p: (r[p]["sequential"]["s"] / r["R"], r[p]["sequential"]["wall_s"] / r["R"]) for p in PHASES}
            seq = {p: (r[p]["sequential"]["s"], r[p]["sequential"]["wall_s"]) if timed else
                   (per_rep[p][0] * r["R"], per_rep[p][1] * r["R"]) for p in PHASES}
            mark = "" if timed else "~"
            cells = []
            tot = {"sequential": 0.0, "stacked": 0.0}
            wall = {"sequential": 0.0, "stacked": 0.0}
            for p in PHASES:
                a, b = seq[p][0], r[p]["stacked"]["s"]
                tot["sequential"] += a
                tot["stacked"] += b
                wall["sequential"] += seq[p][1]
                wall["stacked"] += r[p]["stacked"]["wall_s"]
                cells.append(f"{mark}{a:.3f}/{b:.3f} ({a / b:.1f}x)")
            each = r["train"].get("each")
            cells.append(f"{each['s']:.3f} ({seq['train'][0] / each['s']:.1f}x)" if each else "-")
            a, b = tot["sequential"], tot["stacked"]
            differ = "-" if r["rows_differing"] is None else f"{r['rows_differing']}/{r['rows']}"
            peak = "-" if r.get("peak_mem_gb") is None else f"{r['peak_mem_gb']:.1f}"
            rows.append([s["scale"], str(r["R"]), f"{r['mean_len']:.1f}", *cells, f"{mark}{a:.3f}/{b:.3f}",
                         f"{r['R'] / a:.2f}/{r['R'] / b:.2f}", f"{mark}{a / b:.2f}x",
                         f"{mark}{wall['sequential'] / wall['stacked']:.2f}x",
                         f"{r['gen_tokens'] / r['rollout']['stacked']['wall_s']:.0f}", peak, differ])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join(out + [fmt(head)] + [fmt(row) for row in rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", default="nano,micro")
    ap.add_argument("--replicas", default="1,4,8,16", help="values of R")
    ap.add_argument("--task", default="addition")
    ap.add_argument("--prompts", type=int, default=16, help="distinct prompts per replica (math-small: 16)")
    ap.add_argument("--group", type=int, default=8, help="samples per prompt (math-small: 8)")
    ap.add_argument("--max-new", type=int, default=None, help="max new tokens (default: the task's cap)")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats after one warm-up")
    ap.add_argument("--warmstart-steps", type=int, default=60, help="SFT steps of the in-memory warm start")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (on a GPU the figures are synchronised wall seconds)")
    ap.add_argument("--seq-max", type=int, default=None,
                    help="time the sequential side only up to this R (default: every R); above it the report "
                         "scales the largest timed R's per-replica figure")
    args = ap.parse_args(argv)
    global DEVICE
    DEVICE = torch.device(args.device)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    transformers.utils.logging.disable_progress_bar()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    task = tasks.get(args.task)
    max_new = args.max_new or task.max_new_tokens
    res = {"torch": torch.__version__, "device": str(DEVICE) if DEVICE.type == "cpu" else torch.cuda.get_device_name(DEVICE),
           "cpu": platform.processor() or platform.machine(),
           "threads": torch.get_num_threads(), "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
           "prompts": args.prompts, "group": args.group, "max_new": max_new, "repeats": args.repeats,
           "command": " ".join([Path(sys.executable).name, *sys.argv]), "args": vars(args), "scales": []}
    t0 = time.perf_counter()
    for name in [s for s in args.scales.split(",") if s]:
        policy = warm_policy(name, task, args.warmstart_steps, log)
        runs = [bench_replicas(policy, task, int(R), args.prompts, args.group, max_new, args.repeats, args.lr, log,
                               args.seq_max) for R in args.replicas.split(",")]
        res["scales"].append({"scale": name, "params": models.n_params(policy.model), "runs": runs})
    res["wall_s"] = time.perf_counter() - t0
    print(report(res))
    print(f"wall {res['wall_s']:.0f}s")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
