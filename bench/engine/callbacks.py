"""What happens around the training loop, as callbacks: evaluation scheduling, the progress bar,
a caller's hook on evaluations (a tuner's pruning). `Trainer.run` calls `on_step` after every
step, `on_eval` after every evaluation and `on_end` when the budget is spent; each callback reads
what it needs from the trainer (`fraction()`, `evaluate()`), so the loop itself stays four lines.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from bench.engine.trainer import Trainer


class Callback:
    def on_step(self, trainer: Trainer, row: dict) -> None:
        pass

    def on_eval(self, trainer: Trainer, row: dict) -> None:
        pass

    def on_end(self, trainer: Trainer) -> None:
        pass


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


class OnEval(Callback):
    """A caller's function of each evaluation row; it may raise trainer.Stopped to end the run."""

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
