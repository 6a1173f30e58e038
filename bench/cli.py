"""`bench`: the command line. Each subcommand is a thin layer over a library call."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cmd_list(args: argparse.Namespace) -> int:
    what = args.what
    if what == "recipes":
        import algorithms

        for name in algorithms.names():
            print(name)
    elif what == "tasks":
        from bench import tasks

        for name in tasks.names():
            print(name)
    elif what == "scales":
        from bench import models

        for name in models.names():
            s = models.get(name)
            print(f"{name:12s} hidden={s.hidden:<4d} layers={s.layers:<3d} heads={s.heads:<3d} tokenizer={s.tokenizer}")
    elif what == "suites":
        suites = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "suites").glob("*.toml"))
        for name in suites:
            print(name)
    return 0


def _cmd_warmstart(args: argparse.Namespace) -> int:
    from bench import models, tasks
    from bench.warmstart import WarmStartConfig, warm_start

    task = tasks.get(args.task)
    scale = models.get(args.scale)
    cfg = WarmStartConfig(steps=args.steps, seed=args.seed)
    ws = warm_start(task, scale, cfg, cache=Path(args.cache) if args.cache else None, device=args.device,
                    log=lambda m: print(m, file=sys.stderr))
    m = ws.metrics
    print(f"task={task.name} scale={scale.name} key={ws.key} {'(cache hit)' if ws.cache_hit else '(trained)'}")
    print(f"held-out greedy accuracy: {ws.accuracy:.3f}  (n={int(m['eval/n'])}, mean length {m['eval/len_mean']:.1f} tokens, "
          f"truncated {m['eval/truncated_frac']:.3f})")
    print(f"time: {ws.seconds:.1f} s")
    print(f"checkpoint: {ws.path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench", description="grpo-bench: matched-compute comparisons of GRPO-family RL algorithms.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    ls = sub.add_parser("list", help="list registered recipes, tasks, model scales or suites",
                        description="List registered recipes, tasks, model scales or suites.")
    ls.add_argument("what", choices=["recipes", "tasks", "scales", "suites"])
    ls.set_defaults(func=_cmd_list)

    ws = sub.add_parser("warmstart", help="SFT a scale on a task's worked solutions (cached); print held-out accuracy",
                        description="Supervised warm start of a model scale on a task's worked solutions. Cached by "
                                    "content hash; prints held-out greedy accuracy, wall time and the checkpoint path.")
    ws.add_argument("--task", required=True, help="task name (see `bench list tasks`)")
    ws.add_argument("--scale", required=True, help="scale name (see `bench list scales`) or a local HF model directory")
    ws.add_argument("--steps", type=int, default=None, help="SFT steps (default: the task/scale default)")
    ws.add_argument("--seed", type=int, default=0)
    ws.add_argument("--device", default="cpu")
    ws.add_argument("--cache", default=None, help="cache directory (default: $BENCH_CACHE or ~/.cache/grpo-bench)")
    ws.set_defaults(func=_cmd_warmstart)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, KeyError) as e:
        # bad input: one clear line, no traceback
        print(f"bench {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
