"""`bench`: the command line. Each subcommand is a thin layer over a library call."""
from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from bench import errors


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (exit 2), like every other bad input."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int_at_least(lo: int):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"got {text!r}; expected an integer >= {lo}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"got {v}; expected an integer >= {lo}")
        return v
    return parse


LADDER_DEFAULT = (200, 400, 800, 1600, 3200)  # bench.ladder.LADDER (not imported: keeps `bench --help` fast)


def _ints(text: str) -> list[int]:
    """A comma-separated ascending list of positive integers: 200,400,800."""
    try:
        v = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}; expected comma-separated integers, e.g. 200,400,800") from None
    if not v or min(v) < 1 or v != sorted(set(v)):
        raise argparse.ArgumentTypeError(f"got {text!r}; expected distinct positive integers in ascending order")
    return v


def _floats(text: str) -> list[float]:
    """A comma-separated list of finite numbers > 0: 3e-3,1e-3."""
    try:
        v = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}; expected comma-separated numbers, e.g. 3e-3,1e-3") from None
    if not v or not all(0 < x < float("inf") for x in v):
        raise argparse.ArgumentTypeError(f"got {text!r}; expected finite numbers > 0")
    return v


def _positive_float(text: str) -> float:
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}; expected a finite number > 0") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"got {text!r}; expected a finite number > 0")
    return v


def _add_results(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", default=None, help="results directory (default: $BENCH_RESULTS or ./results)")


def _add_live(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint-every", type=_int_at_least(1), default=None, metavar="N",
                        help="save a resume checkpoint every N steps in RESULTS/live/RUN_ID/ (deleted when the run's "
                             "record is written; not hashed: run ids and results do not change)")
    parser.add_argument("--report-to", default="none", metavar="TRACKER",
                        help="live tracker: none (default), tensorboard (RESULTS/tensorboard/), wandb (offline unless "
                             "WANDB_MODE says otherwise: RESULTS/wandb/) or trackio (local: TRACKIO_DIR, default "
                             "RESULTS/trackio/)")


def _root(args: argparse.Namespace) -> Path:
    """The results directory: --results, else $BENCH_RESULTS, else ./results."""
    from bench import results

    return Path(args.results) if args.results else results.default_root()


def _cmd_list(args: argparse.Namespace) -> int:
    what = args.what
    if what == "recipes":
        import algorithms

        for name in algorithms.names():
            if not args.verbose:
                print(name)
                continue
            r = algorithms.get(name)  # its paper line, then its parts (the paths variants and --set change)
            note = " ".join(r.description.split("\n\n")[0].split())
            print(f"{r}\n" + textwrap.fill(note, 100, initial_indent="  ", subsequent_indent="  ") + "\n")
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
    elif what == "calibrations":
        from bench import calibration

        for e in calibration.read():
            m = e["match"]
            params = {k: v for k, v in m["task"].items() if k not in ("name", "seed", "test_size", "holdout_frac", "version")}
            print(f"{m['task']['name']}/{m['scale']} {params} direct_frac={m['warmstart']['direct_frac']}: "
                  + calibration.describe(e))
    return 0


def _cmd_warmstart(args: argparse.Namespace) -> int:
    from bench import models, preflight, tasks
    from bench.config import WarmStartConfig
    from bench.warmstart import cache_dir, warm_start

    cfg = WarmStartConfig(steps=args.steps, seed=args.seed)  # bad values fail here, in one line
    task = tasks.get(args.task, **_task_params(args.data, args.param))
    scale = models.get(args.scale)
    preflight.check_device(args.device)
    cache = Path(args.cache) if args.cache else None
    preflight.check_writable(cache or cache_dir(), "cache directory")
    ws = warm_start(task, scale, cfg, cache=cache, device=args.device, log=lambda m: print(m, file=sys.stderr))
    m = ws.metrics
    if not m:  # a local model directory with no SFT: nothing trained, nothing cached
        print(f"task={task.name} scale={scale.name}: no warm start (steps 0); the model is used as it is")
        print(f"checkpoint: {ws.path}")
        return 0
    print(f"task={task.name} scale={scale.name} key={ws.key} {'(cache hit)' if ws.cache_hit else '(trained)'}")
    print(f"held-out greedy accuracy: {ws.accuracy:.3f}  (n={int(m['eval/n'])}, mean length {m['eval/len_mean']:.1f} tokens, "
          f"truncated {m['eval/truncated_frac']:.3f})")
    print(f"time: {ws.seconds:.1f} s")
    print(f"checkpoint: {ws.path}")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from bench import calibration, ladder, models, preflight, tasks
    from bench.config import WarmStartConfig, parse_assignments
    from bench.typed import unflatten

    tree = unflatten(parse_assignments(args.set)) if args.set else {}
    if set(tree) - {"warmstart"}:
        raise errors.InputError(f"--set: calibration takes warm-start settings only (warmstart.FIELD=VALUE), got "
                                f"{', '.join(sorted(set(tree) - {'warmstart'}))}")
    ws = WarmStartConfig.build(tree.get("warmstart", {}))
    if len(args.target) != 2 or not 0 <= args.target[0] < args.target[1] <= 1:
        raise errors.InputError(f"--target: got {args.target}; expected LO,HI with 0 <= LO < HI <= 1")
    if not 0 < args.min_format <= 1:
        raise errors.InputError(f"--min-format: got {args.min_format}; expected a number in (0, 1]")
    task = tasks.get(args.task, **_task_params(args.data, args.param))
    scale = models.get(args.scale)
    preflight.check_device(args.device)
    out = Path(args.out) if args.out else calibration.PATH
    preflight.check_file_writable(out, "--out")  # before the calibration's training, not after
    if args.cache:
        preflight.check_writable(args.cache, "--cache")
    lo, hi = args.target
    print(f"calibrating the warm start of {task.name} {task.config} at {scale.name}: lrs {', '.join(map(str, args.lrs))}, "
          f"steps {', '.join(map(str, args.steps))}; target format rate >= {args.min_format}, pass@1 in [{lo}, {hi}] "
          f"(n {args.n}, k {args.k}, T = 1)", file=sys.stderr)
    entry = ladder.calibrate(task, scale, ws, lrs=tuple(args.lrs), ladder=tuple(args.steps), n=args.n, k=args.k,
                             min_format=args.min_format, target=(lo, hi),
                             cache=Path(args.cache) if args.cache else None, device=args.device,
                             log=lambda m: print(m, file=sys.stderr))
    print(calibration.describe(entry))
    if args.dry_run:
        print("not recorded (--dry-run)")
        return 0
    calibration.write(entry, out)
    print(f"recorded in {out}: runs with warmstart.calibrated = true on this task and scale use it")
    return 0 if entry["status"] == "ok" else 3


def _task_params(data: str | None, assignments: list[str]) -> dict:
    """--data PATH (a dataset task's path) and --param KEY=VALUE as task parameters."""
    from bench.config import parse_value

    params = {} if data is None else {"path": data}
    for a in assignments:
        key, sep, raw = a.partition("=")
        if not sep or not key.strip():
            raise errors.InputError(f"--param {a!r}: expected KEY=VALUE, e.g. extractor=boxed")
        params[key.strip()] = parse_value(raw.strip())
    return params


def _cmd_run(args: argparse.Namespace) -> int:
    import algorithms
    from bench import preflight
    from bench.config import Budget, RolloutConfig, RunConfig, parse_assignments

    # fail before work: the config (types, ranges, --set), the task parameters, the device and the
    # results directory are all checked before the warm start trains
    if args.recipe.startswith("file:"):  # a recipe variant `bench recipe --write` wrote
        from bench.interop import load_variant_file

        recipe = load_variant_file(args.recipe[len("file:"):])
    else:
        recipe = algorithms.get(args.recipe)
    # built once, with the --set assignments merged in (RunConfig.compose)
    cfg = RunConfig.compose(parse_assignments(args.set or []), recipe=recipe, task=args.task, scale=args.scale,
                            budget=Budget.parse(args.budget), seed=args.seed, device=args.device, threads=args.threads,
                            rollout=RolloutConfig.parse(args.rollout), task_params=_task_params(args.data, []))
    preflight.check_run(cfg)
    from bench.engine import trackers

    trackers.check(args.report_to)  # an unknown tracker or a missing package: before any work
    root = _root(args)
    preflight.check_writable(root, "results directory")
    try:
        return _run_locked(args, cfg, root)
    except OSError as e:  # a results path that is a file, unwritable, on a full disk: before any training
        raise RunRefused(f"results directory {root}: {e.strerror or e} ({e.filename or root})") from None
    except KeyboardInterrupt:
        from bench.engine import checkpoint

        ck = checkpoint.info(root, cfg.run_id)
        if ck:
            print(f"\ninterrupted: run {cfg.run_id} has a checkpoint at step {ck['step']}; rerun the same command "
                  "with --resume to continue from it", file=sys.stderr)
        else:
            print(f"\ninterrupted: nothing recorded for run {cfg.run_id}; rerun the same command to start it again",
                  file=sys.stderr)
        return 130


def _run_locked(args: argparse.Namespace, cfg, root: Path) -> int:
    from bench import results
    from bench.config import Regime
    from bench.engine import trackers
    from bench.harness import worker

    def replace(meta: dict) -> bool:  # a finished record: trained again with --force, or when it failed
        if not args.force and meta["status"] != "failed":
            return False
        print(f"run {cfg.run_id}: replacing its earlier `{meta['status']}` record"
              + (" (--force)" if meta["status"] != "failed" else f": {meta.get('reason', '')}"), file=sys.stderr)
        return True

    def before(resumed_from: int | None, every: int) -> None:
        print(f"run {cfg.run_id}: {cfg.recipe.name} on {cfg.task}/{cfg.scale}, budget {cfg.budget}, seed {cfg.seed}, "
              f"regime {Regime.of(cfg).describe()}"
              + (f"; resuming from step {resumed_from}" if resumed_from is not None else ""))
        live = results.live_dir(root, cfg.run_id)
        print(f"live rows: {live}/steps.jsonl, evals.jsonl, samples.jsonl"
              + (f"; a checkpoint every {every} step(s) in {live}" if every else ""))

    ran = worker.run_one(cfg, root, replace=replace, resume=bool(args.resume), checkpoint_every=args.checkpoint_every or 0,
                         notice=lambda line: print(line, file=sys.stderr), before=before,
                         log=lambda m: print(m, file=sys.stderr), progress=not args.quiet,
                         save_checkpoint=args.save_checkpoint, callbacks=trackers.make(args.report_to))
    if ran.status == "locked":  # the same lock `bench suite` workers take
        raise RunRefused(f"run {cfg.run_id} is being trained by another process right now (it holds "
                         f"{root / 'locks' / cfg.run_id}.lock); its record will be in {results.run_dir(root, cfg.run_id)}")
    if ran.status == "done":
        print(f"run {cfg.run_id} is already recorded ({ran.record['status']}) in {results.run_dir(root, cfg.run_id)}; "
              f"skipped{', nothing to resume' if args.resume else ''} (--force trains it again and replaces the record)")
        return 0
    if ran.status == "refused":
        raise RunRefused(ran.reason)
    if ran.error is not None:
        e = ran.error
        where = results.run_dir(root, cfg.run_id) / "run.json"
        setup = "during set-up" in results.read_meta(where.parent).get("reason", "") if where.is_file() else False
        raise RunRefused(f"run {cfg.run_id} failed: {type(e).__name__}: {_one_line(e)} (the traceback is in "
                         f"{where})", code=2 if setup or _expected(e) else 1) from None
    res = ran.result
    f = res.final
    print(f"status: {res.status}{' (' + res.reason + ')' if res.reason else ''}")
    if f:
        print(f"final held-out greedy accuracy {f.get('eval/acc_greedy', float('nan')):.3f}, "
              f"avg@k {f.get('eval/avg_k', float('nan')):.3f}, pass@k {f.get('eval/pass_k', float('nan')):.3f}, "
              f"mean length {f.get('eval/len_mean', float('nan')):.1f}")
    print(f"results: {res.path}")
    return 0 if res.status == "finished" else 1


def _cmd_eval(args: argparse.Namespace) -> int:
    from bench import lmeval

    root = _root(args)
    if args.export_only:
        for name in lmeval.export_all(root):
            print(f"{name}: {lmeval.tasks_dir(root) / name}.yaml")
        return 0
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    rec = lmeval.evaluate(args.target, args.tasks, root=root, backend=args.model, batch_size=args.batch_size,
                          limit=args.limit, device=args.device, log_samples=args.log_samples)
    for name, metrics in rec["results"].items():
        shown = ", ".join(f"{k.split(',')[0]} {v:.4f}" for k, v in metrics.items()
                          if isinstance(v, float) and not k.endswith("_stderr,none"))
        print(f"{name}: {shown} (n={rec['n_samples'].get(name, {}).get('effective', '?') if rec['n_samples'] else '?'})")
    print(f"results: {rec['path']}")
    return 0


def _cmd_suite(args: argparse.Namespace) -> int:
    from bench import preflight, results, suite as suites
    from bench.config import check_device
    from bench.harness import runner

    s = suites.load(args.name, tuned=not (args.defaults or args.tuned or args.tuned_file))
    if s.tuned_from is not None:
        print(f"tuned: {len(s.cell_overrides)} cell × recipe pair(s) from {s.tuned_from} (committed beside the suite; "
              "--defaults runs the suite's own settings)")
    root = _root(args)
    if args.tuned or args.tuned_file:
        from bench.tune import tuned

        path = Path(args.tuned_file) if args.tuned_file else tuned.default_path(root, s.name)
        s = tuned.apply(s, path)
        print(f"tuned: {len(s.cell_overrides)} cell × recipe pair(s) from {path}; the others run with the suite's settings")
    cfgs = s.expand(s.parse_only(args.only))
    if not cfgs:
        raise errors.InputError(f"--only {' '.join(args.only)} selects no run of suite {s.name}")
    device = check_device(args.device) if args.device else s.device
    preflight.check_runs(cfgs, device=device)
    from bench.engine import trackers

    trackers.check(args.report_to)
    if args.dry_run and root.exists():
        preflight.check_readable(root, "results directory")  # a plan reads which runs are done
    if not args.dry_run:
        preflight.check_writable(root, "results directory")
        if not args.no_report:
            from bench.report import default_dir

            preflight.check_writable(default_dir(s.name, root), "report directory")
    pending = [c for c in cfgs if not results.is_finished(root, c.run_id)]
    plan = runner.make_plan(s, len(pending), args.executor, args.workers, args.threads, args.device, args.address,
                            args.gpus_per_run, args.stack)
    if plan.stack > 1 and args.checkpoint_every:
        if plan.stack_from.startswith("default"):  # a default yields to an explicit request
            import dataclasses

            plan = dataclasses.replace(plan, stack=1, stack_from="default, off for --checkpoint-every (stacks "
                                       "keep no resume checkpoints)")
        else:
            raise errors.InputError(f"--checkpoint-every {args.checkpoint_every}: stacks keep no resume checkpoints; "
                                    f"use --stack 1 (stack {plan.stack} from {plan.stack_from})")
    if args.dry_run:
        from bench.harness.plan import print_plan

        print_plan(s, cfgs, root, plan, calibrate_time=not args.no_calibrate)
        return 0
    try:
        rc = runner.run_suite(s, cfgs, root, plan, retry_failed=args.retry_failed,
                              options={"checkpoint_every": args.checkpoint_every or 0, "report_to": args.report_to})
    except KeyboardInterrupt:
        print("\ninterrupted: finished runs are kept; rerun the same command to resume", file=sys.stderr)
        return 130
    if not args.no_report:
        from bench import report

        report.build_if_results(s, root)
    return rc


def _cmd_tune(args: argparse.Namespace) -> int:
    import time

    from bench import preflight, suite as suites
    from bench.harness.executors import cpu_count
    from bench.tune import costs, settings as tune_settings, storage, study, tuned

    s = suites.load(args.suite)
    root = _root(args)
    tuned_file = Path(args.tuned_file) if args.tuned_file else tuned.default_path(root, s.name)
    if args.summary:
        costs.print_summary(s, root, tuned_file)
        return 0
    only = s.parse_only(args.only)
    if bool(args.all) == bool(args.recipe):
        raise errors.InputError("give --recipe R (repeatable, or R1,R2) or --all (every recipe of the suite, matched)")
    recipes = [r for r in s.recipes if r in only.get("recipe", s.recipes)] if args.all else \
        [r.strip() for spec in args.recipe for r in spec.split(",")]
    for r in recipes:
        if r not in s.recipes:
            raise errors.InputError(suites.unknown("recipe", r, list(s.recipes)) + f" (in suite {s.name})")
    cells = [c for c in s.cells if c.name in only.get("cell", [c.name]) and c.task in only.get("task", [c.task])
             and c.scale in only.get("scale", [c.scale])]
    workers = args.workers or 1
    threads = args.threads or max(1, cpu_count() // workers)
    settings = tune_settings.from_suite(s, trials=args.trials, objective=args.objective, pruner=args.pruner)
    specs = study.plan(s, recipes, cells, settings)  # bad spaces, tasks, scales and devices fail here
    preflight.check_writable(root, "results directory")
    preflight.check_writable(tuned_file.parent, "tuned overrides directory")
    url = args.storage or storage.default_url(root, s.name)
    storage.open_storage(url)  # a malformed or unreachable storage fails here, before any run
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t0 = time.monotonic()
    try:
        study.run(url, specs, root, workers, threads, take_up_running=args.take_up_running)
    except KeyboardInterrupt:
        print("\ninterrupted: finished trials are kept; rerun the same command to run the rest", file=sys.stderr)
        return 130
    tables, notes = {}, {}
    for spec in specs:
        b = study.best(url, spec)
        if b is None:
            print(f"study {spec.name}: no completed trial; nothing written for it", file=sys.stderr)
            continue
        c = b["counts"]
        key = ("" if settings.cell else spec.cell, spec.recipe)  # tune.cell: the choice applies to every cell
        tables[key] = b["params"]
        notes[key] = (f"study {spec.name}: best of {c['complete'] + c['pruned']} trials "
                                           f"({c['pruned']} pruned, {c['fail']} failed) is trial {b['trial']}, "
                                           f"{settings.objective} of {settings.accuracy} = {b['value']:.3f}, the mean over tuning seeds "
                                           f"{list(settings.seeds)} (runs {', '.join(b['run_ids'])})")
        for edge in study.edges(spec.space, b["params"], spec.base):
            print(f"study {spec.name}: the chosen {edge}: the best may lie beyond it; extend the search past it "
                  "and tune again (into a new --storage)", file=sys.stderr)
            notes[key] += f"; AT AN EDGE: {edge}"
    if tables:
        path = tuned.write(tuned_file, s.name, tables, notes, header=f"storage: {storage.redact(url)}")
        print(f"tuned overrides: {path} (`bench suite {s.name} --tuned` uses them)")
    print(f"tuning took {time.monotonic() - t0:.0f} s wall\n")
    costs.print_summary(s, root, tuned_file)
    return 0


def _cmd_results(args: argparse.Namespace) -> int:
    from bench import preflight, results, suite as suites
    from bench.harness.leaderboard import per_run, print_leaderboard

    root = _root(args)
    preflight.check_readable(root, "results directory")
    try:
        s = suites.load(args.suite)
    except errors.InputError as e:  # no such suite, or a bad suite file: fall back to the suite tag in run.json
        print(f"note: {e}; selecting runs tagged suite={args.suite}", file=sys.stderr)
        for run_id, problem in results.problems(root):
            print(f"warning: skipped corrupt run {run_id}: {problem}", file=sys.stderr)
        runs = per_run(root, suite=args.suite)
        print_leaderboard(runs, title=f"suite {args.suite} (by tag): {runs.height} recorded runs in {root}")
        return 0
    cfgs = s.expand(s.parse_only(args.only))
    cell = {c.run_id: c.tags["cell"] for c in cfgs}
    for run_id, problem in results.problems(root, list(cell)):
        print(f"warning: skipped corrupt run {run_id}: {problem} (`bench suite` quarantines and reruns it)",
              file=sys.stderr)
    runs = per_run(root, run_ids=list(cell))
    runs = runs.with_columns(pl_replace_cell(runs, cell))
    print_leaderboard(runs, expected=len(cfgs),
                      title=f"suite {s.name}: {runs.height} of {len(cfgs)} runs recorded in {root.resolve()}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from bench import preflight, report, suite as suites

    s = suites.load(args.suite)
    root = _root(args)
    preflight.check_readable(root, "results directory")
    out = Path(args.out) if args.out else report.default_dir(s.name, root)
    preflight.check_writable(out, "report directory")  # before the tables and figures are built
    if (out / "figures").exists() and not (out / "figures").is_dir():
        raise errors.InputError(f"report directory {out}: {out / 'figures'} is a file; the report writes its figures there")
    out = report.build(s, root, out)
    print(f"report: {out / 'index.html'} and {out / 'report.md'}")
    return 0


def _cmd_publish(args: argparse.Namespace) -> int:
    from bench import preflight, publish, suite as suites

    s = suites.load(args.suite, tuned=not args.defaults)
    root = _root(args)
    preflight.check_readable(root, "results directory")
    if args.reports:
        preflight.check_writable(args.reports, "reports directory")
    publish.publish(s, root, Path(args.reports) if args.reports else None)
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from bench import preflight, publish

    for flag, value in (("--cache", args.cache), ("--keep", args.keep)):
        if value:
            preflight.check_writable(value, flag)
    if args.verdicts:
        from bench import replication

        check = replication.reproduce_verdicts(Path(args.report_dir), args.only,
                                               cache=Path(args.cache) if args.cache else None, workers=args.workers,
                                               keep=Path(args.keep) if args.keep else None)
        return 0 if check.ok else 1
    outcomes = publish.reproduce(Path(args.report_dir), args.runs, args.only,
                                 cache=Path(args.cache) if args.cache else None, workers=args.workers,
                                 keep=Path(args.keep) if args.keep else None)
    return 0 if all(o.identical for o in outcomes) else 1


def pl_replace_cell(runs, cell: dict):
    """A run shared with another suite carries that suite's tags: label it by this suite's cell."""
    import polars as pl

    return pl.col("run_id").replace_strict(cell, default=pl.col("cell"), return_dtype=pl.String).alias("cell")


def _cmd_recipe(args: argparse.Namespace) -> int:
    """Print a recipe; import one from a TRL or verl config (--from-*), or export one (--to)."""
    import algorithms
    from bench import interop

    sources = [a for a in ("from_trl", "from_trl_args", "from_verl") if getattr(args, a) is not None]
    if len(sources) > 1 or (sources and args.name):
        raise errors.InputError("give one of NAME, --from-trl FILE, --from-trl-args ARGS, --from-verl FILE")
    if not sources and not args.name:
        raise errors.InputError("give a recipe NAME (see `bench list recipes`) or --from-trl / --from-trl-args / "
                                "--from-verl")
    if args.write and not sources:
        raise errors.InputError("--write: writes an imported recipe; give --from-trl, --from-trl-args or --from-verl")
    if sources:
        if args.from_verl is not None:
            from bench.interop.verl import from_verl

            tr = from_verl(interop.load_verl(args.from_verl), str(args.from_verl))
        else:
            from bench.interop.trl import from_trl

            if args.from_trl is not None:
                tr = from_trl(interop.load_tree(args.from_trl), str(args.from_trl))
            else:
                tr = from_trl(interop.parse_cli_args(args.from_trl_args), "--from-trl-args")
        for line in tr.unmodelled:  # never silently dropped: each on stderr, and the import still succeeds
            print(f"bench recipe: unmodelled: {tr.source}: {line}", file=sys.stderr)
        recipe = tr.recipe
        if args.write:
            name = Path(args.write).stem.replace("-", "_").lower()
            text = interop.variant_toml(tr, name)
            Path(args.write).write_text(text, encoding="utf-8")
        if args.to is None:
            print(interop.describe(tr))
            if args.write:
                print(f"wrote {args.write}: run it with `bench run --recipe file:{args.write} ...`, or paste its "
                      "[variants] table into a suite")
            return 0
    else:
        recipe = algorithms.get(args.name)
        if args.to is None:
            print(recipe)
            return 0
    if args.to == "trl":
        import yaml

        from bench.interop.trl import to_trl

        config, notes = to_trl(recipe, max_completion_length=args.max_new_tokens)
        print(f"# GRPOConfig (TRL 1.16) for recipe {recipe.name} (id {recipe.id}): GRPOConfig(**yaml.safe_load(f))")
        print("\n".join(f"# note: {n}" for n in notes) + ("\n" if notes else ""), end="")
        print(yaml.safe_dump(config, sort_keys=False), end="")
    else:
        import yaml

        from bench.interop.verl import overrides, to_verl

        tree, notes = to_verl(recipe, max_response_length=args.max_new_tokens)
        print(f"# verl (0.9) PPO trainer config for recipe {recipe.name} (id {recipe.id}); as overrides:")
        print("#   " + " ".join(overrides(tree)))
        print("\n".join(f"# note: {n}" for n in notes) + ("\n" if notes else ""), end="")
        print(yaml.safe_dump(tree, sort_keys=False), end="")
    return 0


def interop_targets() -> tuple[str, ...]:
    from bench.interop import TARGETS

    return TARGETS


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bench", description="grpo-bench: matched-compute comparisons of GRPO-family RL algorithms.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    ls = sub.add_parser("list", help="list registered recipes, tasks, model scales or suites",
                        description="List registered recipes, tasks, model scales or suites.")
    ls.add_argument("what", choices=["recipes", "tasks", "scales", "suites", "calibrations"])
    ls.add_argument("-v", "--verbose", action="store_true",
                    help="recipes: each recipe's parts and the first line of its paper note")
    ls.set_defaults(func=_cmd_list)

    rc = sub.add_parser("recipe", help="print a recipe; import one from a TRL or verl config; export one to them",
                        description="Print a registered recipe's parts (NAME), or import a TRL GRPOConfig "
                                    "(--from-trl FILE.yaml|json, --from-trl-args '--loss_type dapo ...') or a verl "
                                    "config (--from-verl FILE.yaml, dotted overrides as keys allowed): the recipe, "
                                    "the run settings it fixes, and every field mapped, ignored (throughput only) "
                                    "or unmodelled (named on stderr). --to trl|verl prints the config that "
                                    "reproduces the recipe in that library, or names the part it cannot express.")
    rc.add_argument("name", nargs="?", default=None, help="a registered recipe (see `bench list recipes`)")
    rc.add_argument("--from-trl", default=None, metavar="FILE", help="a GRPOConfig's fields as YAML or JSON")
    rc.add_argument("--from-trl-args", default=None, metavar="ARGS", help="GRPOConfig fields as TRL's CLI flags, "
                    "one string: \"--loss_type dapo --beta 0\"")
    rc.add_argument("--from-verl", default=None, metavar="FILE", help="a verl PPO trainer config as YAML (nested "
                    "or dotted keys, e.g. actor_rollout_ref.actor.clip_ratio_high: 0.28)")
    rc.add_argument("--to", choices=interop_targets(), default=None, help="print the library's config instead")
    rc.add_argument("--write", default=None, metavar="FILE.toml",
                    help="write the import as a recipe variant: `bench run --recipe file:FILE.toml`, or paste "
                         "into a suite's [variants]")
    rc.add_argument("--max-new-tokens", type=_int_at_least(1), default=None, metavar="L",
                    help="--to: the generation cap to write (dr_grpo's and seq-mean-token-sum-norm's L_max)")
    rc.set_defaults(func=_cmd_recipe)

    ws = sub.add_parser("warmstart", help="SFT a scale on a task's worked solutions (cached); print held-out accuracy",
                        description="Supervised warm start of a model scale on a task's worked solutions. Cached by "
                                    "content hash; prints held-out greedy accuracy, wall time and the checkpoint path.")
    ws.add_argument("--task", required=True, help="task name (see `bench list tasks`)")
    ws.add_argument("--scale", required=True, help="scale name (see `bench list scales`) or a local HF model directory")
    ws.add_argument("--data", default=None, metavar="PATH",
                    help="a dataset task's data (gsm8k, math): a .jsonl/.json/.parquet/.csv file, a save_to_disk "
                         "directory or a hub name")
    ws.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a task parameter, e.g. extractor=boxed, question=problem (repeatable)")
    ws.add_argument("--steps", type=_int_at_least(0), default=None, help="SFT steps (default: the task/scale default)")
    ws.add_argument("--seed", type=int, default=0)
    ws.add_argument("--device", default="cpu")
    ws.add_argument("--cache", default=None, help="cache directory (default: $BENCH_CACHE or ~/.cache/grpo-bench)")
    ws.set_defaults(func=_cmd_warmstart)

    ca = sub.add_parser("calibrate", help="choose a task/scale's SFT steps and lr so RL starts well-formed, with headroom",
                        description="Train warm starts on a ladder of SFT step counts (each cached), measure each on "
                                    "held-out problems with k samples at T = 1, and record in bench/calibration.json "
                                    "the first whose format rate and sampled pass@1 meet the targets. Runs use it "
                                    "with warmstart.calibrated = true. Exit 0: targets met; 3: recorded, not met "
                                    "(too easy or too hard; the message says which).")
    ca.add_argument("--task", required=True, help="task name (see `bench list tasks`)")
    ca.add_argument("--scale", required=True, help="scale name (see `bench list scales`)")
    ca.add_argument("--data", default=None, metavar="PATH", help="a dataset task's data")
    ca.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a task parameter, e.g. difficulty=hard, max_digits=5 (repeatable)")
    ca.add_argument("--set", action="append", default=[], metavar="warmstart.FIELD=VALUE",
                    help="other warm-start settings, e.g. warmstart.direct_frac=0.6 (repeatable)")
    ca.add_argument("--lrs", type=_floats, default=[3e-3], help="SFT learning rates, tried in order (default 3e-3)")
    ca.add_argument("--steps", type=_ints, default=list(LADDER_DEFAULT), help="the ladder of SFT step counts "
                    f"(default {','.join(map(str, LADDER_DEFAULT))})")
    ca.add_argument("--n", type=_int_at_least(1), default=500, help="held-out problems (default 500)")
    ca.add_argument("--k", type=_int_at_least(1), default=4, help="samples per problem (default 4)")
    ca.add_argument("--min-format", type=float, default=0.95, help="least sampled format rate (default 0.95)")
    ca.add_argument("--target", type=_floats, default=[0.15, 0.5], metavar="LO,HI",
                    help="the sampled pass@1 range (default 0.15,0.5)")
    ca.add_argument("--out", default=None, help="the calibration file (default bench/calibration.json)")
    ca.add_argument("--dry-run", action="store_true", help="measure, print the choice, record nothing")
    ca.add_argument("--device", default="cpu")
    ca.add_argument("--cache", default=None, help="cache directory (default: $BENCH_CACHE or ~/.cache/grpo-bench)")
    ca.set_defaults(func=_cmd_calibrate)

    run = sub.add_parser("run", help="train one recipe on one task and scale for a compute budget",
                         description="Train one recipe end to end on the shared engine: warm start, rollouts, "
                                     "updates, held-out evaluations at fixed fractions of the budget. Rows stream to "
                                     "results/live/<run_id>/*.jsonl as they happen; at the end it writes "
                                     "results/runs/<run_id>/ (run.json, steps.parquet, evals.parquet, samples.jsonl).")
    run.add_argument("--recipe", required=True, help="recipe name (see `bench list recipes`), or file:PATH.toml "
                     "(a variant `bench recipe --from-trl/--from-verl --write` wrote)")
    run.add_argument("--task", required=True, help="task name (see `bench list tasks`)")
    run.add_argument("--scale", required=True, help="scale name or a local HF model directory")
    run.add_argument("--budget", required=True, help="compute budget: FLOPs (2e12), or with a unit: 40steps, 5e5tokens")
    run.add_argument("--data", default=None, metavar="PATH",
                     help="a dataset task's data (gsm8k, math): a .jsonl/.json/.parquet/.csv file, a save_to_disk "
                          "directory or a hub name; same as --set task_params.path=PATH")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--set", action="append", metavar="PATH=VALUE", default=[],
                     help="override a config field, e.g. train.lr=1e-4, recipe.objective.eps_high=0.28, "
                          "eval.every=0.25 (repeatable)")
    _add_results(run)
    run.add_argument("--device", default="cpu")
    run.add_argument("--threads", type=_int_at_least(0), default=0, help="torch threads (0: torch's default)")
    run.add_argument("--save-checkpoint", action="store_true", help="save the final policy in transformers format")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--force", action="store_true",
                     help="train again even when the run is already recorded, replacing its record")
    run.add_argument("--rollout", choices=["native", "vllm"], default="native",
                     help="rollout backend: native (torch) or vllm (needs `make setup-vllm`, run from .venv-vllm)")
    _add_live(run)
    run.add_argument("--resume", action="store_true",
                     help="continue the run from its last checkpoint (results/live/RUN_ID/), with the same settings; "
                          "the tables equal an uninterrupted run's")
    run.set_defaults(func=_cmd_run)

    ev = sub.add_parser("eval", help="evaluate a run's checkpoint (or any checkpoint) with lm-eval",
                        description="Evaluate a checkpoint through lm_eval.simple_evaluate. With no --tasks: the "
                                    "run's own task, exported from its held-out split as an lm-eval task "
                                    "(results/lmeval_tasks/), on the examples the run's greedy evaluation used; "
                                    "exact_match equals the run's eval/acc_greedy. Other bench tasks are "
                                    "bench_<task>; built-in lm-eval tasks work when their data is local. Writes "
                                    "results/runs/RUN_ID/lmeval/*.json (results/lmeval/ for a bare checkpoint).")
    ev.add_argument("target", metavar="RUN_ID|CHECKPOINT",
                    help="a run id under results/runs (run with --save-checkpoint) or a transformers model directory")
    ev.add_argument("--tasks", nargs="+", default=None, metavar="TASK",
                    help="lm-eval task names, e.g. bench_addition bench_chain_sum (default: the run's task)")
    ev.add_argument("--model", choices=["hf", "vllm"], default="hf",
                    help="lm-eval model backend: hf (transformers) or vllm (where installed)")
    ev.add_argument("--limit", type=_int_at_least(1), default=None, help="examples per task (default: the run's eval.n_examples)")
    ev.add_argument("--batch-size", type=_int_at_least(1), default=256)
    ev.add_argument("--device", default="cpu")
    ev.add_argument("--threads", type=_int_at_least(0), default=0, help="torch threads (0: torch's default)")
    ev.add_argument("--export-only", action="store_true",
                    help="export every bench task's held-out split as an lm-eval task and exit")
    ev.add_argument("--log-samples", action="store_true", help="keep every prompt and response in the record")
    _add_results(ev)
    ev.set_defaults(func=_cmd_eval)

    su = sub.add_parser("suite", help="run a suite: every task/scale cell × recipe × seed at matched compute",
                        description="Expand a suite (suites/NAME.toml or a path) into runs, skip finished ones, run "
                                    "the rest on local processes or Ray with a progress bar, then write the report. "
                                    "Interrupted or killed suites resume where they stopped; two processes on one "
                                    "results directory never run a run twice.")
    su.add_argument("name", help="suite name (see `bench list suites`) or a path to a .toml file")
    su.add_argument("--dry-run", action="store_true",
                    help="print the plan (runs, FLOPs, done/pending, estimated time) without running")
    su.add_argument("--no-calibrate", action="store_true", help="with --dry-run: skip the timing calibration")
    su.add_argument("--only", action="append", default=[], metavar="KEY=V1,V2",
                    help="restrict to some runs: recipe=grpo,dapo  seed=0  cell=addition/nano  task=...  scale=... "
                         "(repeatable; all must match)")
    su.add_argument("--executor", choices=["local", "ray"], default="local")
    su.add_argument("--workers", type=_int_at_least(1), default=None,
                    help="runs at once (default: one per core, at most the pending runs)")
    su.add_argument("--threads", type=_int_at_least(0), default=None,
                    help="torch threads per run (default: the suite's [resources] threads, else cores / workers)")
    su.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray instance)")
    su.add_argument("--gpus-per-run", type=_positive_float, default=None,
                    help="Ray with a cuda device: GPUs each run reserves; fractions pack runs on one GPU "
                         "(default: the suite's [resources] gpus_per_run, else 1)")
    su.add_argument("--device", default=None, help="override the suite's device (cpu, cuda, cuda:N); not hashed")
    su.add_argument("--stack", type=_int_at_least(1), default=None, metavar="R",
                    help="train up to R runs of one cell (the same config but the seed) as one stack in one worker, "
                         "their model calls batched together (default: the suite's [resources] stack, else 1 on a CPU and "
                         "the measured best stack for the scale on CUDA; --dry-run says which)")
    _add_results(su)
    su.add_argument("--retry-failed", action="store_true",
                    help="rerun runs whose record says `failed` (a crash; diverged runs are results and stay)")
    su.add_argument("--no-report", action="store_true", help="do not write the report (RESULTS/reports/SUITE) at the end")
    _add_live(su)
    su.add_argument("--tuned", action="store_true",
                    help="apply the tuned overrides that `bench tune` wrote (RESULTS/tuned/NAME.toml) on top of the "
                         "suite's own; tuned runs get their own ids and the tag tuned=true")
    su.add_argument("--tuned-file", default=None, help="with --tuned: a tuned overrides file elsewhere")
    su.add_argument("--defaults", action="store_true",
                    help="ignore the suite's committed tuned settings (suites/tuned/NAME.toml): every recipe at its "
                         "defaults and the suite's [overrides]")
    su.set_defaults(func=_cmd_suite)

    tu = sub.add_parser("tune", help="Optuna search per cell × recipe: trials are runs, pruned on evaluations",
                        description="One Optuna study per (suite cell, recipe). A trial is a regular run (tagged "
                                    "study and trial) with hyperparameters sampled from the recipe's search space "
                                    "(the ranges it registers with beside algorithms/search_spaces.BASE, changed by the suite's "
                                    "[tune.space.RECIPE]); "
                                    "its evaluations at compute checkpoints feed the pruner. --all gives every "
                                    "recipe the same trials at the same per-trial budget. The best values go to "
                                    "RESULTS/tuned/SUITE.toml for `bench suite SUITE --tuned`. Storage: a journal "
                                    "file RESULTS/tune/SUITE.journal by default, or any database URL Optuna takes "
                                    "(sqlite:///x.db, postgresql://user@host/db) for workers on many machines; "
                                    "`optuna-dashboard <path or URL>` shows the studies.")
    tu.add_argument("suite", help="suite name or path; its [tune] table sets trials, objective, pruner, spaces")
    tu.add_argument("--recipe", action="append", default=[], metavar="R", help="recipe(s) to tune (repeatable, or R1,R2)")
    tu.add_argument("--all", action="store_true", help="every recipe of the suite (or of --only recipe=...), matched")
    tu.add_argument("--trials", type=_int_at_least(1), default=None, help="trials per study (default: [tune] trials, else 8)")
    tu.add_argument("--objective", choices=["final", "auc"], default=None,
                    help="final: greedy accuracy at the end of the budget; auc: its mean over the budget")
    tu.add_argument("--pruner", choices=["median", "hyperband", "none"], default=None, help="default: median")
    tu.add_argument("--storage", default=None, metavar="URL",
                    help="journal file path or database URL (default: RESULTS/tune/SUITE.journal)")
    tu.add_argument("--workers", type=_int_at_least(1), default=None, help="processes running trials at once (default 1)")
    tu.add_argument("--threads", type=_int_at_least(0), default=None, help="torch threads per trial (default: cores / workers)")
    tu.add_argument("--take-up-running", action="store_true",
                    help="treat every RUNNING trial in the storage as interrupted and finish it (use only when no other "
                         "`bench tune` works on this storage; without it, only trials whose worker process on this "
                         "machine is gone are taken up)")
    tu.add_argument("--only", action="append", default=[], metavar="KEY=V1,V2",
                    help="restrict cells (cell=addition/nano, task=..., scale=...) or, with --all, recipes")
    _add_results(tu)
    tu.add_argument("--tuned-file", default=None, help="where to write the tuned overrides (default: RESULTS/tuned/SUITE.toml)")
    tu.add_argument("--summary", action="store_true",
                    help="print the tuning cost and tuned vs default accuracy from the results; run nothing")
    tu.set_defaults(func=_cmd_tune)

    rs = sub.add_parser("results", help="print a suite's leaderboard from the results tables",
                        description="Per task/scale cell and recipe: final held-out greedy accuracy mean ± std over "
                                    "seeds, final length, mean KL (k3), clip fractions, FLOPs spent, failures listed.")
    rs.add_argument("suite", help="suite name or path (runs are the suite's expansion; else those tagged with it)")
    rs.add_argument("--only", action="append", default=[], metavar="KEY=V1,V2", help="as for `bench suite`")
    _add_results(rs)
    rs.set_defaults(func=_cmd_results)

    rp = sub.add_parser("report", help="write a suite's comparison report (HTML, Markdown, figures, CSV tables)",
                        description="A pure function of the results directory and a fixed bootstrap seed: statistics "
                                    "over seeds with 95% intervals, figures, failed runs listed, and a manifest; "
                                    "writes RESULTS/reports/SUITE/ (index.html, report.md, figures/, *.csv); "
                                    "over a published report's runs (--results reports/SUITE/data) it rewrites "
                                    "reports/SUITE/ in place.")
    rp.add_argument("suite", help="suite name (see `bench list suites`) or a path to a .toml file")
    _add_results(rp)
    rp.add_argument("--out", default=None, help="output directory (default: RESULTS/reports/SUITE; reports/SUITE "
                                                "for --results reports/SUITE/data; $BENCH_REPORTS/SUITE when set)")
    rp.set_defaults(func=_cmd_report)

    pb = sub.add_parser("publish", help="copy a suite's runs into reports/SUITE/data and write its report there",
                        description="Publish a suite: its finished runs (at committed tuned settings: with its "
                                    "tuning trials and its runs at default settings) are copied from the results "
                                    "directory into "
                                    "reports/SUITE/data/runs (a run another report already holds is linked), then "
                                    "the report is written from them. Refused when a run is missing, was trained "
                                    "from a modified tree, does not record its warm start's weights, or a cell "
                                    "mixes warm starts.")
    pb.add_argument("suite", help="suite name (see `bench list suites`) or a path to a .toml file")
    _add_results(pb)
    pb.add_argument("--defaults", action="store_true",
                    help="publish the suite at its own settings, ignoring its committed tuned settings "
                         "(suites/tuned/NAME.toml); at tuned settings (the default when that file exists) the "
                         "tuning trials and the runs at default settings are published with it")
    pb.add_argument("--reports", default=None, help="reports directory (default: $BENCH_REPORTS or ./reports)")
    pb.set_defaults(func=_cmd_publish)

    rr = sub.add_parser("reproduce", help="rerun a sample of a published report's runs from scratch; compare tables",
                        description="Train the warm starts from scratch in a private cache, rerun N of the report's "
                                    "runs spread over its cells and recipes, and compare their step and evaluation "
                                    "tables (timing columns aside) and warm-start weights with the committed ones, "
                                    "naming every column that differs. Exit 0 when all are identical, 1 otherwise.")
    rr.add_argument("report_dir", metavar="REPORT_DIR", help="a published report directory, e.g. reports/math-small")
    rr.add_argument("--runs", "-n", type=_int_at_least(1), default=3, help="runs to rerun (default 3)")
    rr.add_argument("--only", action="append", default=[], metavar="KEY=V1,V2",
                    help="rerun only runs whose cell, recipe, seed, task or scale is one of the values (repeatable)")
    rr.add_argument("--verdicts", action="store_true",
                    help="the statistical level: rerun every recipe and seed of the chosen cells (--only cell=...) on "
                         "this machine and check that each contrast with the baseline (TOST within the report's "
                         "margin, paired by seed), each verdict and each level reproduce; exit 1 names what does not")
    rr.add_argument("--workers", type=_int_at_least(1), default=1, help="reruns at once (default 1)")
    rr.add_argument("--cache", default=None, metavar="DIR",
                    help="warm-start cache to train into (default: a new temporary directory); give an empty one")
    rr.add_argument("--keep", default=None, metavar="DIR", help="keep the reruns in this empty results directory")
    rr.set_defaults(func=_cmd_reproduce)
    return p


def _expected(e: BaseException) -> bool:
    """Bad input a user can fix: an InputError (algorithms/errors.py; ConfigError, SuiteError, CorruptRun,
    UnknownRecipeError, ... are ones). Anything else, a ValueError from a bug included, keeps its traceback.
    Read from sys.modules, not imported: a command that never loaded algorithms.errors raised none, and
    `bench list` stays free of torch."""
    mod = sys.modules.get("algorithms.errors")
    return mod is not None and isinstance(e, mod.InputError)


class RunRefused(Exception):
    """A run that cannot start or did not finish: one line on stderr, exit `code` (no traceback)."""

    def __init__(self, msg: str, code: int = 2):
        super().__init__(msg)
        self.code = code


def _one_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:  # Ctrl-C while the parser is built: the same one line as later
        print("\nbench: interrupted", file=sys.stderr)
        return 130
    try:
        return args.func(args)
    except RunRefused as e:
        print(f"bench {args.command}: error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:  # before any work started (imports, set-up): nothing to keep
        print(f"\nbench {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if not _expected(e):
            raise  # a bug (a ValueError from torch, polars or our own invariant included): its traceback, exit 1
        print(f"bench {args.command}: error: {e}", file=sys.stderr)  # bad input: one clear line, no traceback
        return 2


if __name__ == "__main__":
    sys.exit(main())
