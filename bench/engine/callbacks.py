"""What happens around the training loop, as callbacks: evaluation scheduling, the progress bar,
a caller's hook on evaluations (a tuner's pruning), the live stream of rows, resume checkpoints,
trackers (trackers.py). `Trainer.run` calls `on_start` once set up (or restored from a
checkpoint), `on_step` after every step, `on_eval` after every evaluation and `on_end` when the
budget is spent; each callback reads what it needs from the trainer (`fraction()`, `evaluate()`),
so the loop itself stays four lines; `close()` follows, however the run ended. A callback with state
that a resumed run needs returns it from `state_dict()` (plain values: it goes into the checkpoint).

Callbacks see the trainer through `Trainer` below, the protocol of what they read, so this module
sits under trainer.py and never imports it.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from bench import results


class Trainer(Protocol):
    """What a callback may read or call on the trainer (bench/engine/trainer.py implements it)."""

    cfg: Any  # the run's RunConfig
    steps: list[dict]  # the rows so far: every step, every evaluation, the evaluations' greedy samples
    evals: list[dict]
    samples: list[dict]

    def fraction(self) -> float:
        """Share of the compute budget spent."""

    def evaluate(self, frac: float) -> dict:
        """Evaluate now, label the row with `frac`, call every callback's on_eval; the row."""

    def save_state(self, every: int) -> Path:
        """Write the resume checkpoint; its path."""


class Callback:
    def on_start(self, trainer: Trainer) -> None:
        pass

    def on_step(self, trainer: Trainer, row: dict) -> None:
        pass

    def on_eval(self, trainer: Trainer, row: dict) -> None:
        pass

    def on_end(self, trainer: Trainer) -> None:
        pass

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def close(self) -> None:
        """Release files; called once when the run returns or raises, whatever ended it."""


class Evaluations(Callback):
    """Evaluate when the spent fraction of the budget passes one of `fractions` (> 0): at most one
    evaluation per step, labelled with the last fraction the step passed."""

    def __init__(self, fractions: list[float]):
        self.pending = [f for f in fractions if f > 0]

    def on_step(self, trainer: Trainer, row: dict) -> None:
        frac = trainer.fraction() + 1e-12
        reached = [f for f in self.pending if f <= frac]
        if reached:
            self.pending = [f for f in self.pending if f > frac]
            trainer.evaluate(reached[-1])

    def state_dict(self) -> dict:
        return {"pending": list(self.pending)}

    def load_state_dict(self, state: dict) -> None:
        self.pending = list(state["pending"])


class Stream(Callback):
    """Append every step row, evaluation row and evaluation sample to results/live/<run_id>/
    (steps.jsonl, evals.jsonl, samples.jsonl), one JSON line each, flushed as it happens: a long
    run can be watched (`tail -f`) and a killed one leaves its rows. A fresh run starts the files
    empty; a resumed run rewrites them with the checkpoint's rows first (rows streamed after the
    checkpoint are trained again). The record (run.json, Parquet) is still written at the end."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.files: dict = {}

    def on_start(self, trainer: Trainer) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for name, rows in (("steps", trainer.steps), ("evals", trainer.evals), ("samples", trainer.samples)):
            results.write_jsonl(self.dir / f"{name}.jsonl", rows)
            self.files[name] = open(self.dir / f"{name}.jsonl", "a")

    def _write(self, name: str, rows: list[dict]) -> None:
        f = self.files.get(name)
        if f is not None:
            f.write("".join(map(results.json_line, rows)))
            f.flush()

    def on_step(self, trainer: Trainer, row: dict) -> None:
        self._write("steps", [row])

    def on_eval(self, trainer: Trainer, row: dict) -> None:
        self._write("evals", [row])
        self._write("samples", [s for s in trainer.samples if s["step"] == row["step"]])

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files = {}


class Checkpoints(Callback):
    """Save the trainer's whole state every `every` steps (checkpoint.py), after the step's
    evaluation if it had one. Last among the callbacks, so every other one has seen the step. Not
    after the last step: the record is written next."""

    def __init__(self, every: int):
        if every < 1:
            raise ValueError(f"checkpoint interval must be >= 1 step, got {every}")
        self.every = every

    def on_step(self, trainer: Trainer, row: dict) -> None:
        if row["step"] % self.every == 0 and trainer.fraction() < 1.0:  # after the last step the record follows
            trainer.save_state(self.every)


class OnEval(Callback):
    """A caller's function of each evaluation row; it may raise bench.engine.trainer.Stopped to end the run."""

    def __init__(self, fn: Callable[[dict], None]):
        self.fn = fn

    def on_eval(self, trainer: Trainer, row: dict) -> None:
        self.fn(row)


class Progress(Callback):
    """A tqdm bar over the budget (%), with the step's reward, accuracy, length and KL."""

    def __init__(self) -> None:
        self.bar = None

    def on_step(self, trainer: Trainer, row: dict) -> None:
        if self.bar is None:
            from tqdm import tqdm

            cfg = trainer.cfg
            self.bar = tqdm(total=100, unit="%", desc=f"{cfg.recipe.name} {cfg.task}/{cfg.scale} s{cfg.seed}",
                            bar_format="{l_bar}{bar}| {n:.0f}/{total_fmt}% [{elapsed}<{remaining}{postfix}]")
        self.bar.n = min(100.0, 100 * trainer.fraction())
        self.bar.set_postfix_str(f"reward {row['reward/mean']:.2f} acc {row['acc/train']:.2f} "
                                 f"len {row['len/mean']:.1f} kl {row.get('kl/k3', math.nan):.4f}")

    def on_eval(self, trainer: Trainer, row: dict) -> None:
        if self.bar is not None:
            self.bar.write(f"  eval @{row['fraction']:.0%} of budget: greedy acc {row['eval/acc_greedy']:.3f}")

    def on_end(self, trainer: Trainer) -> None:
        if self.bar is not None:
            self.bar.close()
