"""The harness: run a suite's RunConfigs on local processes or Ray, resumably, with progress.

    suite.toml ─► bench.suite.load ─► Suite.expand ─► runner.run_suite ─► executor (local | ray)
                                                                            └─► worker.run_job per job

A job is one run, or (with `--stack R` / `[resources] stack`) up to R runs of one cell that differ
only in their seed, trained as one stack (bench/engine/stack.py). `worker.run_one` is the only code
that runs a run, for `bench run`, these jobs (`worker.run_job`; `worker.run_stacked` for a stack) and
`bench tune`'s trials alike: it takes the run's lock (locks.py), keeps a record another process
finished, sets a corrupt one aside, resumes or starts over, and calls the engine's Trainer from the
run's warm start (`worker.trainer`; in a stack, one per thread), which writes results atomically.
"""
