"""Engine speed beside transformers and TRL at equal shapes (issue 4, acceptance item 6).

Prints measured figures; it asserts nothing. Three comparisons, each run in this one process so
that the ratios share the machine's load (timings on a shared CPU box move ±30–50% from run to
run; the ratio of two figures taken minutes apart moves less):

1. Rollout tokens/s: `NativeBackend.generate` vs transformers `model.generate(do_sample=True)`,
   same model, same left-padded task prompts, same batch and max_new_tokens, temperature 1, no top-k/p.
   The batch is shaped like an RL step's: --prompts distinct prompts, each --group times in a row
   (the engine encodes each distinct prompt once; `generate` and a plain HF step do not).
   Generated tokens are counted the same way for both: each row up to and including its first
   EOS (or max_new_tokens), never padding. Freshly initialised models (speed does not depend on
   the weights; a random model rarely emits EOS, so rows run to the cap).
2. Train tokens/s: our update (`sequence_logprobs` with the detached entropy the trainer logs,
   a masked token-mean loss, backward, grad-norm clip, AdamW step) vs a plain HF step
   (`model(input_ids, attention_mask, labels)`, backward, clip, AdamW) on the same batch: the
   prompts of (1) followed by the completions our backend sampled. Tokens/s counts real
   (non-padding) prompt + completion tokens.
3. Seconds per RL step: `Trainer.step` on a grpo RunConfig vs TRL's `GRPOTrainer`, both from one
   warm-start checkpoint directory, with the same prompts per step × group size, max completion
   length, β = 0.04, ε = 0.2, one update per batch (TRL: num_iterations=1, loss_type="grpo",
   scale_rewards="group"), lr, grad clip, and the task's verifier as the reward. One warm-up
   step, then the median of --rl-steps steps, each timed from the end of the previous one; the
   TRL run sits between the two halves of the engine's timed steps (load drift hits both). The
   mean completion length of the timed steps is printed beside each, because step time follows it.
4. Runs per core-hour, stacked vs one at a time (issue 27): R grpo runs of one cell (seeds 0..R-1,
   one warm start) on math-small's cell settings (16 prompts x 8, fp32, evaluations at 0, 0.5 and
   1 of the budget with k = 4 samples), each a whole run (set-up, --stack-steps steps, its three
   evaluations, its record), trained once one after another (`Trainer.run`) and once as one stack
   (`bench.engine.stack.run_stack`, the Stacked ops: sampling as one StackedLM call); runs per
   core-hour = R / CPU hours of this process (on a GPU: R / wall hours). Per R, one at a time first.
   --stack-eval sets the evaluation's held-out problems: math-small's 500 would make the benchmark
   minutes per run; the default keeps evaluation's share of generation near a math-small run's.

Every timed figure of (1) and (2) is the median of --repeats runs after one warm-up run, the two
sides alternating so that drifting load hits both. Everything runs on --threads torch threads,
default 1: on a quiet 2-core box two threads train ~1.8x faster, but once another process holds
a core, OpenMP threads wait on each other (decoding measured 50-100x slower, and a default run
took over 10 minutes instead of one). On a machine of your own, pass --threads 0 (all cores).
The warm start is trained into a temporary BENCH_CACHE (short: --warmstart-steps) unless --cache
names one, and run outputs go to a temporary directory that is deleted at exit.

    python benchmarks/engine_speed.py                      # nano and micro, 1-2 min on 2 cores
    python benchmarks/engine_speed.py --scales nano,micro,small --repeats 9 --json speed.json
    python benchmarks/engine_speed.py --skip rl            # parts 1-2 only
    python benchmarks/engine_speed.py --skip rollout-train,rl --stack-replicas 1,4,8,16   # part 4 only
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a file from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO))

import algorithms  # noqa: E402
from bench import models, tasks  # noqa: E402
from bench.config import Budget, RunConfig, TrainConfig  # noqa: E402
from bench.engine.ledger import Ledger, ModelShape  # noqa: E402
from bench.engine.policy import Policy, sequence_logprobs  # noqa: E402
from bench.engine.padding import left_pad  # noqa: E402
from bench.engine.rollout import NativeBackend, SamplingParams  # noqa: E402
from bench.warmstart import WarmStartConfig  # noqa: E402


PARTS = {"rollout-train", "rl", "stacked"}


def alternating(fns: dict, repeats: int) -> dict[str, list[float]]:
    """Warm up each, then time them in turn, `repeats` rounds: load drift hits every side alike."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return times


def matmul_peak(n: int = 512, repeats: int = 20) -> float:
    """Measured fp32 matmul FLOP/s on this process's threads: best of `repeats` n×n×n products
    (the ceiling that every phase's achieved FLOP/s is read against)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def generated_tokens(completions: torch.Tensor, eos_id: int) -> int:
    """Tokens of (B, T) completions up to and including each row's first EOS (all T if none)."""
    is_eos = completions == eos_id
    T = completions.shape[1]
    first = torch.where(is_eos.any(1), is_eos.int().argmax(1) + 1, torch.full_like(is_eos[:, 0], T, dtype=torch.long))
    return int(first.sum())


# ---------------------------------------------------------------------------- 1 and 2
def bench_scale(scale_name: str, task, n_prompts: int, group: int, max_new: int, repeats: int, log) -> dict:
    scale = models.get(scale_name)
    tok = models.build_tokenizer(scale)
    model = models.build_model(scale, tok, seed=0)
    policy = Policy(model, tok)
    # an RL batch: each prompt `group` times, as the trainer samples it (both sides get this batch)
    prompts = [p for p in policy.encode_prompts([e.prompt for e in task.split("train", n=n_prompts)])
               for _ in range(group)]
    ids, att = left_pad(prompts, policy.pad_id)
    params = SamplingParams(max_new_tokens=max_new, temperature=1.0, seed=0)
    backend = NativeBackend(model, policy.pad_id, policy.eos_id)
    counts: dict[str, int] = {}

    def ours():
        g = backend.generate(prompts, params)
        counts["native"] = int(g.mask.sum())

    def hf():
        model.eval()
        torch.manual_seed(0)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=att, do_sample=True, max_new_tokens=max_new,
                                 temperature=1.0, top_k=0, top_p=1.0, pad_token_id=policy.pad_id,
                                 eos_token_id=policy.eos_id, use_cache=True)
        counts["hf"] = generated_tokens(out[:, ids.shape[1]:], policy.eos_id)

    log(f"  rollout {scale_name}: {n_prompts} prompts x {group} samples x {max_new} new tokens")
    gt = alternating({"native": ours, "hf": hf}, repeats)
    gen = {k: {"s": statistics.median(v), "tokens": counts[k], "tok_s": counts[k] / statistics.median(v), "runs_s": v}
           for k, v in gt.items()}
    shape = ModelShape.of(model)
    g0 = backend.generate(prompts, params)
    gen_flops = Ledger().generation(shape, map(len, prompts), g0.lengths.tolist())  # nominal: prefix sharing not credited
    for v in gen.values():  # FLOP/s of the ledger's count for the same work (both sample ~the same lengths)
        v["flop_s"] = gen_flops * v["tokens"] / counts["native"] / v["s"]

    # Training batch: the prompts above + the completions our backend samples (right-padded after EOS).
    g = backend.generate(prompts, params)
    comp, cmask = g.tokens, g.mask
    real = int(att.sum() + cmask.sum())
    seq = torch.cat([ids, comp], 1)
    full_att = torch.cat([att, torch.ones_like(comp)], 1)
    labels = seq.masked_fill(torch.cat([torch.zeros_like(att), cmask.long()], 1) == 0, -100)
    m_ours, m_hf = copy.deepcopy(model).train(), copy.deepcopy(model).train()
    opt_ours = torch.optim.AdamW(m_ours.parameters(), lr=1e-4)
    opt_hf = torch.optim.AdamW(m_hf.parameters(), lr=1e-4)

    def train_ours():
        opt_ours.zero_grad(set_to_none=True)
        logp, _ = sequence_logprobs(m_ours, ids, att, comp, 1.0, with_entropy=True)
        loss = -(logp * cmask).sum() / cmask.sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m_ours.parameters(), 1.0)
        opt_ours.step()

    def train_hf():
        opt_hf.zero_grad(set_to_none=True)
        loss = m_hf(input_ids=seq, attention_mask=full_att, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m_hf.parameters(), 1.0)
        opt_hf.step()

    log(f"  train {scale_name}: batch {tuple(seq.shape)}, {real} real tokens")
    tt = alternating({"ours": train_ours, "hf": train_hf}, repeats)
    train_flops = Ledger().training(shape, (att.sum(-1) + cmask.sum(-1)).long().tolist(), 0)
    train = {k: {"s": statistics.median(v), "tokens": real, "tok_s": real / statistics.median(v), "runs_s": v,
                 "flop_s": train_flops / statistics.median(v)} for k, v in tt.items()}
    return {"scale": scale_name, "params": models.n_params(model), "batch": list(seq.shape),
            "prompt_width": ids.shape[1], "generate": gen, "train": train}


# ---------------------------------------------------------------------------- 3
def bench_rl(args, scale: str, root: Path, log) -> dict:
    from bench.harness.worker import trainer as make_trainer

    train = TrainConfig(prompts_per_step=args.rl_prompts, group_size=args.rl_group, max_new_tokens=args.rl_max_new)
    ws = WarmStartConfig(steps=args.warmstart_steps)
    cfg = RunConfig(recipe=algorithms.get("grpo"), task=args.task, scale=scale,
                    budget=Budget(value=args.rl_steps + 1, kind="steps"), train=train, warmstart=ws,
                    threads=args.threads)
    trainer = make_trainer(cfg, root=root / "results", log=log)
    log(f"  grpo step {scale}: warm start {args.task}/{scale} ({ws.resolve(args.task, scale).steps} SFT steps "
        "unless cached) ...")
    t0 = time.perf_counter()
    trainer._setup()
    log(f"  set-up {time.perf_counter() - t0:.1f}s (warm start {trainer.ws.path}, "
        f"greedy acc {trainer.ws.accuracy:.2f})")
    max_new = trainer.max_new
    phase_flops = count_phase_flops(trainer.ledger)
    rows = []

    def engine_steps(first: int, last: int) -> None:
        for step in range(first, last + 1):
            for k in phase_flops:
                phase_flops[k] = 0
            t0 = time.perf_counter()
            row = trainer.step(step)
            rows.append({"s": time.perf_counter() - t0, "len": row["len/mean"], "reward": row["reward/mean"],
                         "rollout_s": row["time/rollout_s"], "reference_s": row["time/reference_s"],
                         "train_s": row["time/train_s"],
                         **{f"{p}_flop_s": phase_flops[p] / row[f"time/{p}_s"] for p in phase_flops}})

    # the TRL run sits between two halves of the engine's steps, so load drift on a shared box
    # hits both sides alike (timed one after the other, a busy spell can double one side)
    half = 1 + args.rl_steps // 2  # the warm-up step and the first half
    engine_steps(1, half)
    trl_res = bench_trl(args, trainer, max_new, root / f"trl-{scale}", log) if has_trl() else None
    engine_steps(half + 1, args.rl_steps + 1)
    timed = rows[1:]
    ours = {"s_step": statistics.median(r["s"] for r in timed), "runs_s": [r["s"] for r in timed],
            "len_mean": statistics.mean(r["len"] for r in timed),
            "reward_mean": statistics.mean(r["reward"] for r in timed),
            "phases_s": {p: statistics.median(r[f"{p}_s"] for r in timed) for p in ("rollout", "reference", "train")},
            "phases_flop_s": {p: statistics.median(r[f"{p}_flop_s"] for r in timed) for p in ("rollout", "reference", "train")}}
    out = {"task": args.task, "scale": scale, "prompts_per_step": args.rl_prompts, "group_size": args.rl_group,
           "max_new_tokens": max_new, "warmstart_steps": args.warmstart_steps,
           "warmstart_acc": trainer.ws.accuracy, "ours": ours, "trl": trl_res}
    return out


def bench_stacked(args, scale: str, root: Path, log) -> list[dict]:
    """Part 4: per R, R whole runs one at a time and as one stack (see the module docstring)."""
    from bench.config import EvalSchedule
    from bench.harness.worker import stack, trainer

    on_gpu = args.device != "cpu"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    train = TrainConfig(prompts_per_step=16, group_size=8, lr=1e-4, micro_batch_size=128)
    ev = EvalSchedule(every=0.5, n_examples=args.stack_eval, k=4)

    def cfgs(R: int) -> list[RunConfig]:
        return [RunConfig(recipe=algorithms.get("grpo"), task=args.task, scale=scale, seed=s,
                          budget=Budget(value=args.stack_steps, kind="steps"), train=train, eval=ev,
                          warmstart=WarmStartConfig(steps=args.warmstart_steps), threads=args.threads,
                          device=args.device) for s in range(R)]

    trainer(cfgs(1)[0], root=root / "stack-warmup").run()  # trains the warm start into the cache, untimed
    out = []
    for R in [int(r) for r in args.stack_replicas.split(",") if r]:
        timed: dict[str, tuple[float, float]] = {}
        for side in ("single", "stacked"):
            where = root / f"stack-{scale}-{R}-{side}"
            sync()
            c0, t0 = time.process_time(), time.perf_counter()
            if side == "single":
                res = [trainer(c, root=where).run() for c in cfgs(R)]
            else:
                res = stack(cfgs(R), where).results
            sync()
            timed[side] = (time.process_time() - c0, time.perf_counter() - t0)
            bad = [r for r in res if isinstance(r, BaseException) or r.status != "finished"]
            if bad:
                raise RuntimeError(f"stacked benchmark, {scale} R={R} {side}: {bad[0]}")
        per_hour = {k: 3600 * R / (w if on_gpu else c) for k, (c, w) in timed.items()}
        row = {"scale": scale, "R": R, "stacked_runs_per_hour": per_hour["stacked"],
               "single_runs_per_hour": per_hour["single"], "ratio": per_hour["stacked"] / per_hour["single"],
               "single_cpu_s": timed["single"][0], "single_wall_s": timed["single"][1],
               "stacked_cpu_s": timed["stacked"][0], "stacked_wall_s": timed["stacked"][1],
               "steps": args.stack_steps, "eval_examples": args.stack_eval, "device": args.device}
        log(f"  {scale} R={R}: {row['single_runs_per_hour']:.0f} runs/h one at a time, "
            f"{row['stacked_runs_per_hour']:.0f} stacked ({row['ratio']:.2f}x)")
        out.append(row)
    return out


def count_phase_flops(ledger: Ledger) -> dict[str, int]:
    """Wrap the trainer's ledger so each step's FLOPs are also summed by phase (its charges for
    generation, frozen forwards and training are made in the rollout, reference and train phases)."""
    counts = {"rollout": 0, "reference": 0, "train": 0}
    for method, phase in (("generation", "rollout"), ("forward", "reference"), ("training", "train")):
        inner = getattr(ledger, method)

        def charged(*a, _inner=inner, _phase=phase, **k):
            f = _inner(*a, **k)
            counts[_phase] += f
            return f

        setattr(ledger, method, charged)
    return counts


def has_trl() -> bool:
    try:
        import trl  # noqa: F401
    except ImportError:
        return False
    return True


def bench_trl(args, trainer, max_new: int, root: Path, log) -> dict:
    import logging

    import trl
    from datasets import Dataset
    from transformers import AutoTokenizer, PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    logging.getLogger("trl").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")  # deprecated-alias notices
    task, tc = trainer.task, trainer.cfg.train
    pool = task.split("train", n=args.rl_prompts * (args.rl_steps + 2) * 4)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": e.prompt}], "idx": i} for i, e in enumerate(pool)])

    def reward(completions, idx, **_):  # the task's verifier, as our engine scores it
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [float(task.score(t, pool[i]) >= 1.0) for t, i in zip(texts, idx)]

    class StepClock(TrainerCallback):
        def __init__(self):
            self.marks: list[float] = []

        def on_train_begin(self, *a, **k):
            self.marks.append(time.perf_counter())

        def on_step_end(self, *a, **k):
            self.marks.append(time.perf_counter())

    cfg = GRPOConfig(
        output_dir=str(root), use_cpu=True, bf16=False, use_vllm=False,
        gradient_checkpointing=False, activation_checkpointing=False,  # the new name of the same switch
        per_device_train_batch_size=args.rl_prompts * args.rl_group, num_generations=args.rl_group,
        gradient_accumulation_steps=1, max_completion_length=max_new, max_steps=args.rl_steps + 1,
        learning_rate=tc.lr, weight_decay=tc.weight_decay, max_grad_norm=tc.grad_clip, lr_scheduler_type="constant",
        warmup_steps=0, beta=0.04, loss_type="grpo", num_iterations=1, epsilon=0.2, scale_rewards="group",
        temperature=tc.temperature, top_p=tc.top_p, top_k=0, report_to="none", save_strategy="no", logging_steps=1,
        disable_tqdm=True, seed=trainer.cfg.seed, dataloader_num_workers=0,
    )
    tok = AutoTokenizer.from_pretrained(trainer.ws.path)
    tok.padding_side = "left"
    clock = StepClock()
    grpo = GRPOTrainer(model=str(trainer.ws.path), reward_funcs=[reward], args=cfg, train_dataset=ds,
                       processing_class=tok, callbacks=[clock])
    grpo.remove_callback(PrinterCallback)  # it prints every log dict to stdout; the table is the output
    log(f"  TRL {trl.__version__} GRPOTrainer: {args.rl_steps + 1} steps ...")
    grpo.train()
    durations = [b - a for a, b in zip(clock.marks, clock.marks[1:])][1:]  # drop the warm-up step
    logs = [h for h in grpo.state.log_history if "completions/mean_length" in h][1:]
    return {"s_step": statistics.median(durations), "runs_s": durations, "version": trl.__version__,
            "threads": torch.get_num_threads(),
            "len_mean": statistics.mean(h["completions/mean_length"] for h in logs) if logs else float("nan"),
            "reward_mean": statistics.mean(h["reward"] for h in logs) if logs else float("nan")}


# ---------------------------------------------------------------------------- report
def table(headers: list[str], rows: list[list], left: int = 1) -> str:
    """Plain-text table; the first `left` columns are labels (left-aligned), the rest figures."""
    cells = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    return "\n".join([line(cells[0]), line(["-" * w for w in widths])] + [line(r) for r in cells[1:]])


def report(res: dict) -> str:
    peak = res["matmul_peak_flop_s"]
    out = [f"engine speed: torch {res['torch']} on {res['cpu']}, {res['threads']} threads; "
           f"median of {res['repeats']} after a warm-up; load average {res['load']}",
           f"measured fp32 matmul peak: {peak / 1e9:.1f} GFLOP/s (512x512x512, best of 20); "
           "GFLOP/s below are the ledger's FLOPs of real tokens per second, % of that peak"]

    def gf(x: float) -> str:
        return f"{x / 1e9:.1f} ({100 * x / peak:.0f}%)"

    gen_rows, train_rows = [], []
    for s in res["scales"]:
        g, t = s["generate"], s["train"]
        gen_rows.append([s["scale"], f"{s['params'] / 1e6:.2f}M", f"{s['batch'][0]}x{res['max_new_tokens']}",
                         f"{g['native']['tok_s']:,.0f}", f"{g['hf']['tok_s']:,.0f}",
                         f"{g['native']['tok_s'] / g['hf']['tok_s']:.2f}x",
                         f"{g['native']['tokens']}/{g['hf']['tokens']}",
                         f"{gf(g['native']['flop_s'])} / {gf(g['hf']['flop_s'])}"])
        train_rows.append([s["scale"], f"{s['batch'][0]}x{s['batch'][1]}", f"{t['ours']['tok_s']:,.0f}",
                           f"{t['hf']['tok_s']:,.0f}", f"{t['ours']['tok_s'] / t['hf']['tok_s']:.2f}x",
                           f"{t['ours']['s']:.3f}/{t['hf']['s']:.3f}",
                           f"{gf(t['ours']['flop_s'])} / {gf(t['hf']['flop_s'])}"])
    if gen_rows:
        out += ["", "1. rollout: generated tokens/s (higher is better; tokens counted up to and including EOS)",
                table(["scale", "params", "batch", "native tok/s", "hf generate tok/s", "native/hf", "tokens n/hf",
                       "GFLOP/s native / hf"],
                      gen_rows)]
        out += ["", "2. training forward+backward+AdamW: real tokens/s (higher is better)",
                table(["scale", "batch", "ours tok/s", "hf labels tok/s", "ours/hf", "s/step ours/hf",
                              "GFLOP/s ours / hf"], train_rows)]
    if res["rl"]:
        first = res["rl"][0]
        rows, ratios = [], []
        for rl in res["rl"]:
            o, t = rl["ours"], rl["trl"]
            rows.append([rl["scale"], "engine (Trainer.step)", f"{o['s_step']:.3f}", f"{o['len_mean']:.1f}",
                         f"{o['reward_mean']:.2f}", "  ".join(f"{k} {v:.3f}" for k, v in o["phases_s"].items()),
                         "  ".join(f"{k} {gf(v)}" for k, v in o["phases_flop_s"].items())])
            if t:
                rows.append([rl["scale"], f"TRL {t['version']} GRPOTrainer", f"{t['s_step']:.3f}",
                             f"{t['len_mean']:.1f}", f"{t['reward_mean']:.2f}", "", ""])
                ratios.append(f"{rl['scale']} {t['s_step'] / o['s_step']:.2f}x")
        out += ["", f"3. grpo step: {first['task']}, {first['prompts_per_step']} prompts x {first['group_size']}, "
                    f"max {first['max_new_tokens']} new tokens, beta 0.04, one update per batch; median s/step "
                    f"of {len(first['ours']['runs_s'])} after a warm-up step (lower is better)",
                table(["scale", "trainer", "s/step", "mean len", "reward", "engine phases (s)",
                       "engine phases GFLOP/s (% of peak)"], rows, left=2)]
        if ratios:
            out.append("TRL s/step ÷ engine s/step (above 1: the engine is faster): " + ", ".join(ratios))
    if res.get("stacked"):
        first = res["stacked"][0]
        unit = "wall" if first["device"] != "cpu" else "CPU"
        rows = [[r["scale"], str(r["R"]), f"{r['single_runs_per_hour']:,.0f}", f"{r['stacked_runs_per_hour']:,.0f}",
                 f"{r['ratio']:.2f}x", f"{r['single_cpu_s']:.1f}/{r['stacked_cpu_s']:.1f}",
                 f"{r['single_wall_s']:.1f}/{r['stacked_wall_s']:.1f}"] for r in res["stacked"]]
        out += ["", f"4. whole grpo runs ({first['steps']} steps, 16 prompts x 8, evaluations at 0/0.5/1 on "
                    f"{first['eval_examples']} problems x 4 samples) on {first['device']}: runs per {unit} hour, "
                    "one at a time vs as one stack (higher is better)",
                table(["scale", "R", "one at a time", "stacked", "stacked/one", "CPU s one/stk", "wall s one/stk"],
                      rows)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", default="nano,micro", help="scales for parts 1-2, e.g. nano,micro,small")
    ap.add_argument("--task", default="addition", help="task whose prompts and verifier are used")
    ap.add_argument("--prompts", type=int, default=32, help="distinct prompts per batch (parts 1-2)")
    ap.add_argument("--group", type=int, default=TrainConfig().group_size,
                    help="samples per prompt (parts 1-2): the batch is prompts x group rows, as in an RL step")
    ap.add_argument("--max-new", type=int, default=32, help="new tokens per rollout (parts 1-2)")
    ap.add_argument("--repeats", type=int, default=7, help="timed repeats after one warm-up (parts 1-2)")
    ap.add_argument("--rl-scales", default="nano,micro", help="comma-separated scales for the RL step comparison")
    ap.add_argument("--rl-steps", type=int, default=10, help="timed RL steps per trainer, after one warm-up step")
    ap.add_argument("--rl-prompts", type=int, default=TrainConfig().prompts_per_step, help="prompts per RL step")
    ap.add_argument("--rl-group", type=int, default=TrainConfig().group_size, help="completions per prompt")
    ap.add_argument("--rl-max-new", type=int, default=None, help="max completion length (default: the task's cap)")
    ap.add_argument("--warmstart-steps", type=lambda v: None if v == "default" else int(v), default=60,
                    help="SFT steps of the warm start; short by default, as speed needs only a policy that "
                         "writes the answer format and stops. 'default': the task's own warm start, which "
                         "with --cache ~/.cache/grpo-bench reuses the checkpoint `bench run` trained")
    ap.add_argument("--cache", default=None, help="BENCH_CACHE to use (default: a temporary one, deleted at exit)")
    ap.add_argument("--skip", default="", help=f"comma-separated parts to skip: {', '.join(sorted(PARTS))}")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads for everything (0: torch's default, one per core)")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--stack-scales", default="nano,micro", help="scales for part 4 (stacked runs)")
    ap.add_argument("--stack-replicas", default="1,4,8", help="values of R for part 4")
    ap.add_argument("--stack-steps", type=int, default=8, help="RL steps per run in part 4")
    ap.add_argument("--stack-eval", type=int, default=48, help="held-out problems per evaluation in part 4")
    ap.add_argument("--device", default="cpu", help="part 4's device (cpu or cuda)")
    args = ap.parse_args(argv)

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    transformers.utils.logging.disable_progress_bar()  # "Loading weights" bars on every from_pretrained
    tmp = Path(tempfile.mkdtemp(prefix="engine-speed-"))
    os.environ["BENCH_CACHE"] = str(Path(args.cache).expanduser()) if args.cache else str(tmp / "cache")
    skip = {s for s in args.skip.split(",") if s}
    if skip - PARTS:
        ap.error(f"--skip: unknown part(s) {sorted(skip - PARTS)}; valid: {', '.join(sorted(PARTS))}")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    try:
        task = tasks.get(args.task)
        res = {"torch": torch.__version__, "cpu": platform.processor() or platform.machine(),
               "threads": torch.get_num_threads(), "repeats": args.repeats, "max_new_tokens": args.max_new,
               "command": " ".join([Path(sys.executable).name, *sys.argv]), "args": vars(args), "scales": [], "rl": [],
               "trl_installed": has_trl(), "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
               "matmul_peak_flop_s": matmul_peak(), "stacked": []}
        if "rollout-train" not in skip:
            for name in [s for s in args.scales.split(",") if s]:
                res["scales"].append(bench_scale(name, task, args.prompts, args.group, args.max_new, args.repeats, log))
        if "rl" not in skip:
            if not res["trl_installed"]:
                print("TRL is not installed: skipping the GRPOTrainer comparison "
                      "(install it with pip install -e '.[bench]')", flush=True)
            res["rl"] = [bench_rl(args, s, tmp, log) for s in args.rl_scales.split(",") if s]
        if "stacked" not in skip:
            for s in [s for s in args.stack_scales.split(",") if s]:
                res["stacked"] += bench_stacked(args, s, tmp, log)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(report(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
