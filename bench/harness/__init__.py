"""The harness: run a suite's RunConfigs on local processes or Ray, resumably, with progress.

    suite.toml ─► bench.suite.load ─► Suite.expand ─► runner.run_suite ─► executor (local | ray)
                                                                            └─► worker.run_job per job

A job is one run, or (with `--stack R` / `[resources] stack`) up to R runs of one cell that differ
only in their seed, trained as one stack (bench/engine/stack.py). `worker.run_job` is the only code
that trains: it takes each run's lock (locks.py), skips runs another process finished, and calls
the engine's Trainer from the run's warm start (`worker.trainer`; in a stack, one per thread), which
writes results atomically.
"""
