"""Reproduction at the verdict level: does a rerun on another machine reach the published conclusions?

    bench reproduce REPORT --verdicts [--only cell=C]   rerun every seed of every recipe of the chosen
                                                          cells and compare the conclusions

Bitwise identity (`bench reproduce` without --verdicts) holds only where the hardware and libraries
match the record: another CPU rounds otherwise and RL turns a last-bit difference into other samples
within a few steps. What must hold everywhere is what the report concludes. Per cell, with the
report's own statistics (`bench.report.tables.leaderboard`, its margin and its baseline):

- contrast: each recipe's difference from the baseline, paired by seed within each side
  (Δ(s) = recipe(s) − baseline(s)), published against rerun by two one-sided tests on the
  difference of the two Δs, paired by seed: the 90% t interval of Δ_rerun(s) − Δ_published(s)
  inside ±margin. A contrast that moved by the margin or more does not reproduce.
- verdict: better / worse / equivalent / undecided, the same on both sides, or a disagreement the
  published report could not have excluded: the two Δs within the published minimum detectable
  difference of each other, never better on one side and worse on the other.
- kind: what the gain is (skill, sharpening, collapse, ...: `bench.report.coverage`, read on sampled
  pass@1, greedy accuracy and pass@K), the same on both sides, or a disagreement the published report
  could not have excluded: on every axis whose finding differs, the two Δs within that axis's
  published minimum detectable difference.
- level: each recipe's primary metric, rerun minus published, paired by seed. It reproduces when
  that shift's 95% interval includes 0 or lies within ±margin, and is judged only where the cell's
  intervals cover warm-start variance (several warm starts); a cell with one warm start reports the
  shift as "level depends on the warm start" (the same SFT recipe on other hardware trains another
  warm start, and one warm start gives the intervals no variance to cover that).

Exit 1 (a `VerdictCheck` that fails) names each conclusion that does not reproduce.
"""
from __future__ import annotations

import math
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from algorithms.errors import InputError


@dataclass
class Contrast:
    """One recipe against the baseline in one cell, published and rerun."""

    cell: str
    recipe: str
    diff_pub: float  # mean Δ over seeds, published
    diff_new: float
    shift: float  # mean of Δ_rerun(s) − Δ_published(s)
    shift_lo: float  # its 90% paired t interval (the TOST interval)
    shift_hi: float
    equivalent: bool  # the interval inside ±margin
    verdict_pub: str
    verdict_new: str
    mdd_pub: float
    verdict_ok: bool
    verdict_note: str

    @property
    def ok(self) -> bool:
        return self.equivalent and self.verdict_ok


@dataclass
class KindCheck:
    """One recipe's coverage kind against the baseline in one cell, published and rerun (axes: per axis
    of bench.report.coverage.AXES, (Δ published, Δ rerun, published MDD, finding published, finding rerun))."""

    cell: str
    recipe: str
    kind_pub: str
    kind_new: str
    axes: dict
    ok: bool
    note: str


def _num(v) -> float:
    return math.nan if v is None else float(v)


def _kind_agreement(kind_pub: str, kind_new: str, axes: dict) -> tuple[bool, str]:
    """The same kind; or, on every axis whose finding differs, |Δ rerun − Δ published| within that
    axis's published MDD (a difference the published runs could not have detected)."""
    if kind_pub == kind_new:
        return True, "the same"
    beyond = []
    for axis, (d_pub, d_new, mdd, f_pub, f_new) in axes.items():
        if f_pub == f_new:
            continue
        if not (math.isfinite(mdd) and math.isfinite(d_pub) and math.isfinite(d_new) and abs(d_new - d_pub) <= mdd):
            beyond.append(f"{axis} {f_pub} → {f_new}, Δ {d_pub:+.4f} → {d_new:+.4f} beyond the published MDD {mdd:.4g}")
    if beyond:
        return False, "; ".join(beyond)
    return True, "every axis that moved stays within its published MDD"


@dataclass
class Level:
    """One recipe's primary metric in one cell, rerun minus published, paired by seed."""

    cell: str
    recipe: str
    mean_pub: float
    mean_new: float
    shift: float
    lo: float  # 95% paired t interval of the shift
    hi: float
    warm_starts: int  # distinct warm starts among the cell's published runs
    ok: bool | None  # None: not judged (one warm start)


@dataclass
class VerdictCheck:
    cells: list[str]
    margin: float
    contrasts: list[Contrast] = field(default_factory=list)
    kinds: list[KindCheck] = field(default_factory=list)
    levels: list[Level] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # reruns that did not finish, missing runs

    @property
    def failures(self) -> list[str]:
        """One line per conclusion that does not reproduce."""
        out = list(self.errors)
        for c in self.contrasts:
            if not c.equivalent:
                out.append(f"{c.cell} {c.recipe}: its contrast with the baseline moved by {c.shift:+.4f} "
                           f"(90% [{c.shift_lo:+.4f}, {c.shift_hi:+.4f}], not within ±{self.margin:g})")
            if not c.verdict_ok:
                out.append(f"{c.cell} {c.recipe}: verdict {c.verdict_pub} published, {c.verdict_new} rerun ({c.verdict_note})")
        for k in self.kinds:
            if not k.ok:
                out.append(f"{k.cell} {k.recipe}: kind {k.kind_pub} published, {k.kind_new} rerun ({k.note})")
        for lv in self.levels:
            if lv.ok is False:
                out.append(f"{lv.cell} {lv.recipe}: level moved by {lv.shift:+.4f} (95% [{lv.lo:+.4f}, {lv.hi:+.4f}])")
        return out

    @property
    def ok(self) -> bool:
        return not self.failures


def _paired_shift(new: dict, pub: dict, alpha: float):
    from bench.report import stats

    x, y = stats.paired(new, pub)
    return stats.paired_t(x, y, alpha=alpha)


def _verdict_agreement(pub: str, new: str, diff_pub: float, diff_new: float, mdd: float) -> tuple[bool, str]:
    if pub == new:
        return True, "the same"
    if {pub, new} == {"better", "worse"}:
        return False, "opposite directions"
    if math.isfinite(mdd) and abs(diff_new - diff_pub) <= mdd:
        return True, f"Δ {diff_pub:+.4f} → {diff_new:+.4f}, within the published MDD {mdd:.4f}"
    return False, f"Δ {diff_pub:+.4f} → {diff_new:+.4f}, beyond the published MDD {mdd:.4g}"


def compare(suite, published_root: Path, rerun_root: Path, cells: list[str]) -> VerdictCheck:
    """The published runs (results root `published_root`, e.g. REPORT/data) against the reruns
    (`rerun_root`) in `cells` of `suite`, with the report's statistics."""

    from bench.report import coverage
    from bench.report import data as report_data
    from bench.report import stats
    from bench.report.tables import baseline, leaderboard, per_run

    sub = suite.replace(cells=tuple(c for c in suite.cells if c.name in cells))
    margin = sub.report.margin
    check = VerdictCheck(cells=list(cells), margin=margin)
    sides = {}
    for side, root in (("published", published_root), ("rerun", rerun_root)):
        d = report_data.load(sub, root)
        absent = d.runs.filter(~d.runs["status"].is_in(["finished", "diverged"]))
        for row in absent.iter_rows(named=True):
            check.errors.append(f"{row['cell']} {row['recipe']} seed {row['seed']}: no {side} record "
                                f"({row['status']}{': ' + row['reason'] if row['reason'] else ''})")
        sides[side] = (d, leaderboard(sub, d), per_run(sub, d), coverage.verdicts(sub, d))
    if check.errors:
        return check
    (dp, board_p, runs_p, cov_p), (_, board_n, runs_n, cov_n) = sides["published"], sides["rerun"]
    base = baseline(sub)

    def by_seed(runs, cell, recipe) -> dict[int, float]:
        r = runs.filter((runs["cell"] == cell) & (runs["recipe"] == recipe))
        return dict(zip(r["seed"].to_list(), r["primary"].to_list()))

    def row(board, cell, recipe) -> dict:
        return board.filter((board["cell"] == cell) & (board["recipe"] == recipe)).row(0, named=True)

    for cell in cells:
        rids = dp.runs.filter(dp.runs["cell"] == cell)["run_id"].to_list()
        warm = len({(dp.metas[r].get("warmstart") or {}).get("key") for r in rids})
        for recipe in sub.cell_recipes(cell):
            pub, new = by_seed(runs_p, cell, recipe), by_seed(runs_n, cell, recipe)
            t = _paired_shift(new, pub, alpha=stats.ALPHA)
            judged = warm > 1
            ok = (bool(t.lo <= 0 <= t.hi) or bool(-margin < t.lo and t.hi < margin)) if judged else None
            check.levels.append(Level(cell, recipe, float(np.mean(list(pub.values()))), float(np.mean(list(new.values()))),
                                      t.diff, t.lo, t.hi, warm, ok))
            if recipe == base:
                continue
            bp, bn = by_seed(runs_p, cell, base), by_seed(runs_n, cell, base)
            d_pub = {s: pub[s] - bp[s] for s in pub.keys() & bp.keys()}
            d_new = {s: new[s] - bn[s] for s in new.keys() & bn.keys()}
            tost = _paired_shift(d_new, d_pub, alpha=2 * stats.ALPHA)  # the (1 − 2α) interval: TOST at α
            equivalent = bool(tost.n >= 2 and -margin < tost.lo and tost.hi < margin)
            rp, rn = row(board_p, cell, recipe), row(board_n, cell, recipe)
            mdd = rp["mdd"] if rp["mdd"] is not None else math.nan
            agree, note = _verdict_agreement(rp["verdict"], rn["verdict"], rp["diff"], rn["diff"], mdd)
            check.contrasts.append(Contrast(cell, recipe, rp["diff"], rn["diff"], tost.diff, tost.lo, tost.hi,
                                            equivalent, rp["verdict"], rn["verdict"], mdd, agree, note))
            kp, kn = (c.filter((c["cell"] == cell) & (c["recipe"] == recipe)) for c in (cov_p, cov_n))
            if kp.height and kn.height:
                kp, kn = kp.row(0, named=True), kn.row(0, named=True)
                axes = {a: (_num(kp[f"{a}_diff"]), _num(kn[f"{a}_diff"]), _num(kp[f"{a}_mdd"]), kp[f"{a}_dir"], kn[f"{a}_dir"])
                        for a in coverage.AXES}
                agree, note = _kind_agreement(kp["kind"], kn["kind"], axes)
                check.kinds.append(KindCheck(cell, recipe, kp["kind"], kn["kind"], axes, agree, note))
    return check


def render(check: VerdictCheck, out) -> None:
    for cell in check.cells:
        print(f"{cell} (margin ±{check.margin:g}; contrasts paired by seed within each side, then across sides)", file=out)
        for c in (c for c in check.contrasts if c.cell == cell):
            print(f"  {c.recipe:>10} vs baseline: Δ {c.diff_pub:+.4f} published, {c.diff_new:+.4f} rerun; "
                  f"difference {c.shift:+.4f}, 90% [{c.shift_lo:+.4f}, {c.shift_hi:+.4f}] "
                  f"{'inside' if c.equivalent else 'NOT inside'} ±{check.margin:g}: "
                  f"{'reproduces' if c.equivalent else 'DOES NOT REPRODUCE'}", file=out)
            print(f"  {'':>10} verdict: {c.verdict_pub} published, {c.verdict_new} rerun "
                  f"({c.verdict_note}): {'agrees' if c.verdict_ok else 'DISAGREES'}", file=out)
            for k in (k for k in check.kinds if k.cell == cell and k.recipe == c.recipe):
                moves = ", ".join(f"{a} {d_pub:+.4f} → {d_new:+.4f}" for a, (d_pub, d_new, *_r) in k.axes.items())
                print(f"  {'':>10} kind: {k.kind_pub} published, {k.kind_new} rerun (Δ {moves}; {k.note}): "
                      f"{'agrees' if k.ok else 'DISAGREES'}", file=out)
        for lv in (lv for lv in check.levels if lv.cell == cell):
            head = (f"  {lv.recipe:>10} level: {lv.mean_pub:.4f} published, {lv.mean_new:.4f} rerun, "
                    f"shift {lv.shift:+.4f}, 95% [{lv.lo:+.4f}, {lv.hi:+.4f}]: ")
            if lv.ok is None:
                tail = f"level depends on the warm start (the cell has {lv.warm_starts} warm start; not judged)"
            else:
                tail = (f"reproduces over {lv.warm_starts} warm starts" if lv.ok else
                        f"DOES NOT REPRODUCE over {lv.warm_starts} warm starts")
            print(head + tail, file=out)
    for e in check.errors:
        print(f"  {e}", file=out)
    bad = check.failures
    if bad:
        print(f"{len(bad)} conclusion(s) do not reproduce:", file=out)
        for b in bad:
            print(f"  {b}", file=out)
    else:
        n = len(check.contrasts)
        print(f"the verdicts of {len(check.cells)} cell(s) reproduce: {n} contrast(s) within the margin, "
              f"{n} verdict(s) agree, {len(check.kinds)} kind(s) agree", file=out)


def chosen_cells(metas: dict[str, dict], only: Iterable[str], where: str) -> list[str]:
    """The cells --only names (cell=, task= or scale=), every cell without it."""
    from bench.publish import _labels
    from bench.suite import parse_filters

    labels = [_labels(m) for m in metas.values()]
    valid = {k: sorted({lab[k] for lab in labels}) for k in ("cell", "task", "scale")}
    specs = list(only)
    for s in specs:
        key = s.split("=", 1)[0].strip()
        if key in ("recipe", "seed"):
            raise InputError(f"--verdicts reruns every recipe and seed of a cell (a verdict needs the baseline and "
                             f"every seed): --only {s} is refused; choose cells with cell=, task= or scale=")
    filters = parse_filters(specs, valid, where)
    return sorted({lab["cell"] for lab in labels if all(lab[k] in v for k, v in filters.items())})


def reproduce_verdicts(report_dir: Path, only: Iterable[str] = (), cache: Path | None = None, workers: int = 1,
                       keep: Path | None = None, out=None) -> VerdictCheck:
    """Rerun every run of the chosen cells of a published report (warm starts trained anew) and
    compare the conclusions (see the module's docstring)."""
    from bench import publish
    from bench import suite as suites

    out = out or sys.stdout
    report_dir = Path(report_dir)
    metas = publish.published_runs(report_dir)
    cells = chosen_cells(metas, only, f"in {report_dir}")
    try:
        suite = suites.load(report_dir.name)
    except Exception as e:  # the suite a report was built from is named by its directory
        raise InputError(f"{report_dir}: cannot load its suite {report_dir.name!r} ({e}); --verdicts recomputes the "
                         f"report's statistics from the suite file") from e
    # the report's runs of those cells (its data also keeps the tuning trials that chose its settings)
    expected = [c.run_id for c in suite.expand({"cell": cells})]
    missing = [rid for rid in expected if rid not in metas]
    if missing:
        raise InputError(f"{report_dir}: {len(missing)} of the {len(expected)} runs suite {suite.name} expands to in "
                         f"{', '.join(cells)} are not among its published runs (e.g. {', '.join(missing[:3])}): the "
                         f"suite file changed since publishing; check out the commit the report was published from")
    ids = expected
    with tempfile.TemporaryDirectory(prefix="bench-reproduce-") as tmp:
        cache_dir = Path(cache) if cache else Path(tmp) / "cache"
        root = Path(keep) if keep else Path(tmp) / "results"
        if keep and any(root.glob("runs/*")):
            raise InputError(f"--keep {root} is not empty: reruns go into an empty results directory")
        cache_dir.mkdir(parents=True, exist_ok=True)
        root.mkdir(parents=True, exist_ok=True)
        print(f"reproduce {report_dir} --verdicts: {len(ids)} runs of {', '.join(cells)} (every recipe and seed), "
              f"warm starts trained from scratch in {cache_dir}, reruns in {root}", file=out)
        publish.print_hardware(report_dir, metas, ids, out)
        t0 = time.monotonic()
        outcomes, _ = publish.rerun(ids, metas, root, cache_dir, workers, out)
        print(f"reran {len(ids)} run(s) in {publish._secs(time.monotonic() - t0)}", file=out)
        check = compare(suite, report_dir / "data", root, cells)
        check.errors[:0] = [f"{o.cell} {o.recipe} seed {o.seed}: {o.error}" for o in outcomes.values() if o.error]
    render(check, out)
    return check
