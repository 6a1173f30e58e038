"""The harness: run a suite's RunConfigs on local processes or Ray, resumably, with progress.

    suite.toml ─► bench.suite.load ─► Suite.expand ─► runner.run_suite ─► executor (local | ray)
                                                                            └─► worker.run_one per run

`worker.run_one` is the only code that trains: it takes the run's lock (locks.py), skips a run
that another process finished, and calls the engine's Trainer, which writes results atomically.
"""
