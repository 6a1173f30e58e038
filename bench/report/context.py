"""What every report section reads: the suite, its results and the frames the sections share.
`tables` collects the CSV frames (each section's, bench/report/registry.py), `figs` the PNG bytes."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import polars as pl

from bench.report import figures as F
from bench.report import tables as T
from bench.report.data import Data
from bench.report.render import Figure
from bench.suite import Suite


@dataclass
class Context:
    """What every section reads; `tables` collects the CSV frames, `figs` the PNG bytes.

    grad_ref: (other completions' length, L_max) of the aggregation-weight example (set with the
    length section's tables); across_sentences: task group -> recipe -> sentence (across_tasks's)."""

    suite: Suite
    root: Path
    data: Data
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    figs: dict[str, bytes] = field(default_factory=dict)
    grad_ref: tuple[int, int] = (0, 0)
    across_sentences: dict = field(default_factory=dict)

    @cached_property
    def runs(self) -> pl.DataFrame:
        """tables.per_run: each finished run's metrics, evaluation count, plateau window."""
        return T.per_run(self.suite, self.data)

    @cached_property
    def curves(self) -> pl.DataFrame:
        """Finished runs' binned step metrics in long form, which the KL, clipping and entropy figures share."""
        d = self.data
        return T.curve_frame(d, ["kl/k1", "kl/k3", "policy/clip_frac_low", "policy/clip_frac_high",
                                 "policy/entropy"] + [m for m in ("policy/ratio_dev_frac", "policy/log_ratio_abs_mean")
                                                      if m in d.steps.columns])

    @property
    def cells(self) -> list[str]:
        return [c.name for c in self.suite.cells]

    @property
    def budgets(self) -> dict[str, float]:
        return {c.name: c.budget.value for c in self.suite.cells}

    @property
    def xlabels(self) -> dict[str, str]:
        unit = {"flops": "FLOPs", "steps": "optimizer steps", "tokens": "generated tokens"}
        return {c.name: f"compute ({unit[c.budget.kind]})" for c in self.suite.cells}

    @property
    def colors(self) -> dict:
        return F.palette(list(self.suite.recipes))

    @property
    def base(self) -> str:
        return T.baseline(self.suite)

    def figure(self, name: str, fig, caption: str) -> Figure:
        self.figs[name] = F.png_bytes(fig)
        return Figure(name, caption)
