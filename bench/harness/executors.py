"""Executors: where runs execute. Both take jobs (cfg dicts, root, wait, options) and report outcomes as
they arrive, one per run; a job is the same `worker.run_job` call on either (one run, or a stack of
runs of one cell), so the tables are the same.

local  a pool of spawned processes (`workers` at once, reused across runs: importing torch and
       transformers costs seconds, a tiny run costs seconds too). Each run sets its own torch
       threads (RunConfig.threads), chosen so workers × threads ≤ the machine's cores.
ray    each run a Ray task reserving `threads` CPUs (and GPUs when the device is cuda), on a local
       Ray instance started here or on an existing cluster (`address`). The results directory
       must be a path every node sees (a shared filesystem): workers write there directly.
"""
from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from algorithms.errors import InputError
from bench.harness.worker import init_local_worker, run_job
from bench.numerics import pinned_env

Job = tuple[list[dict], str, bool, dict | None]  # ([RunConfig.to_dict(), ...], results root, wait for the locks, options)


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _crashed(job: Job, why: str) -> list[dict]:
    from bench.config import run_id_of

    return [{"run_id": run_id_of(cfg), "recipe": cfg["recipe"]["name"], "cell": cfg["tags"].get("cell"),
             "seed": cfg["seed"], "status": "crashed", "reason": why, "acc": None, "wall_s": None} for cfg in job[0]]


class LocalExecutor:
    name = "local"

    def __init__(self, workers: int):
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is None:
            return
        if exc[0] is None:
            self._pool.shutdown(wait=True)
            return
        # interrupted: stop now. Queued runs would otherwise still start, and a worker mid-run would
        # finish it first. A killed run leaves no record (at most a temp dir), so a rerun redoes it.
        procs = list((self._pool._processes or {}).values())  # no public handle before Python 3.14
        self._pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.kill()

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=init_local_worker)
        return self._pool

    def call(self, fn: Callable, arg_lists: list[tuple]) -> list:
        """fn(*args) for each args in a worker process, the results in order: `bench tune`'s workers,
        one long call each (a trial's run goes through worker.run_one there)."""
        futures = [self._get_pool().submit(fn, *args) for args in arg_lists]
        return [f.result() for f in futures]

    def run(self, jobs: list[Job], on_done: Callable[[dict], None]) -> None:
        pending = {self._get_pool().submit(run_job, *job): job for job in jobs}
        while pending:
            # a timeout, so the main thread wakes to handle Ctrl-C (a signal may land on another thread)
            finished, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in finished:
                job = pending.pop(fut)
                try:
                    out = fut.result()
                except BrokenProcessPool:
                    # a worker died (killed, out of memory): every queued future fails with it. No
                    # record was written for these runs, so the next `bench suite` redoes them.
                    out = _crashed(job, "a worker process died (killed or out of memory?); rerun to resume")
                    self._pool = None  # a broken pool takes no more work; the next run() starts a new one
                except Exception as e:  # noqa: BLE001  (e.g. a config that fails to load)
                    out = _crashed(job, f"{type(e).__name__}: {e}")
                for o in out:
                    on_done(o)


class RayExecutor:
    name = "ray"

    def __init__(self, threads: int, gpus: float, address: str | None, workers: int):
        self.threads, self.gpus, self.address, self.workers = threads, gpus, address, workers

    def __enter__(self) -> RayExecutor:
        try:
            import ray
        except ImportError:
            raise InputError("--executor ray needs Ray: pip install 'grpo-bench[ray]'") from None
        self.ray = ray
        # a cluster's workers get this process's CPU numerics pin (bench/numerics.py), whatever their environment
        env = {"env_vars": pinned_env()}
        if self.address:
            ray.init(address=self.address, log_to_driver=False, runtime_env=env)
        else:  # a private local instance sized to the requested concurrency
            ray.init(num_cpus=self.workers * self.threads, include_dashboard=False, log_to_driver=False, runtime_env=env)
        return self

    def __exit__(self, *exc) -> None:
        self.ray.shutdown()

    def run(self, jobs: list[Job], on_done: Callable[[dict], None]) -> None:
        ray = self.ray
        remotes = {}
        pending = {}
        for job in jobs:
            gpus = self.gpus if str(job[0][0]["device"]).startswith("cuda") else 0
            fn = remotes.get(gpus) or remotes.setdefault(gpus, ray.remote(num_cpus=self.threads, num_gpus=gpus)(run_job))
            pending[fn.remote(*job)] = job
        while pending:
            finished, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            if not finished:
                continue
            job = pending.pop(finished[0])
            try:
                out = ray.get(finished[0])
            except Exception as e:  # noqa: BLE001  (the worker died, or the task failed to start)
                out = _crashed(job, f"{type(e).__name__}: {e}")
            for o in out:
                on_done(o)
