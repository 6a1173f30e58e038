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


def _cmd_run(args: argparse.Namespace) -> int:
    import algorithms
    from bench import models, tasks
    from bench.config import Budget, RunConfig
    from bench.engine.trainer import Trainer

    tasks.get(args.task)  # fail fast on bad names, before any work
    models.get(args.scale)
    cfg = RunConfig(recipe=algorithms.get(args.recipe), task=args.task, scale=args.scale,
                    budget=Budget.parse(args.budget), seed=args.seed, device=args.device, threads=args.threads)
    if args.set:
        cfg = cfg.with_overrides(args.set)
    root = Path(args.results) if args.results else None
    print(f"run {cfg.run_id}: {cfg.recipe.name} on {cfg.task}/{cfg.scale}, budget {cfg.budget}, seed {cfg.seed}")
    res = Trainer(cfg, root=root, log=lambda m: print(m, file=sys.stderr), progress=not args.quiet,
                  save_checkpoint=args.save_checkpoint).run()
    f = res.final
    print(f"status: {res.status}{' (' + res.reason + ')' if res.reason else ''}")
    if f:
        print(f"final held-out greedy accuracy {f.get('eval/acc_greedy', float('nan')):.3f}, "
              f"avg@k {f.get('eval/avg_k', float('nan')):.3f}, pass@k {f.get('eval/pass_k', float('nan')):.3f}, "
              f"mean length {f.get('eval/len_mean', float('nan')):.1f}")
    print(f"results: {res.path}")
    return 0 if res.status == "finished" else 1


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

    run = sub.add_parser("run", help="train one recipe on one task and scale for a compute budget",
                         description="Train one recipe end to end on the shared engine: warm start, rollouts, "
                                     "updates, held-out evaluations at fixed fractions of the budget. Writes "
                                     "results/runs/<run_id>/ (run.json, steps.parquet, evals.parquet).")
    run.add_argument("--recipe", required=True, help="recipe name (see `bench list recipes`)")
    run.add_argument("--task", required=True, help="task name (see `bench list tasks`)")
    run.add_argument("--scale", required=True, help="scale name or a local HF model directory")
    run.add_argument("--budget", required=True, help="compute budget: FLOPs (2e12), or with a unit: 40steps, 5e5tokens")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--set", action="append", metavar="PATH=VALUE", default=[],
                     help="override a config field, e.g. train.lr=1e-4, recipe.objective.eps_high=0.28, "
                          "eval.every=0.25 (repeatable)")
    run.add_argument("--results", default=None, help="results directory (default: $BENCH_RESULTS or ./results)")
    run.add_argument("--device", default="cpu")
    run.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    run.add_argument("--save-checkpoint", action="store_true", help="save the final policy in transformers format")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.set_defaults(func=_cmd_run)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, LookupError) as e:
        # bad input: one clear line, no traceback
        print(f"bench {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
