"""Statistics for reports: small pure functions over 1-D arrays of per-seed values (rliable-style).

Every random draw comes from `numpy.random.default_rng(seed)` created inside the call, so a result
depends only on its inputs and the seed, never on what was computed before it.

    mean, IQM                    point estimates over seeds
    bootstrap_ci                 95% percentile interval of any statistic over seeds
    prob_improvement             P(X > Y) + ½ P(X = Y) = U / (n_x n_y), Mann–Whitney U of X over Y
    prob_improvement_ci          its stratified bootstrap interval (X and Y resampled separately)
    paired_prob_improvement      the share of seeds on which X beat Y (ties ½): paired by seed
    wilson_ci                    Wilson score interval of a share (its interval over seeds)
    mann_whitney_p               two-sided Mann–Whitney p-value (exact for small samples, no ties)
    paired_t                     paired comparison by seed: mean difference, t interval, two-sided p
    cluster_paired_t             the same over clusters (warm starts): the t over the clusters' mean differences
    welch_t                      two independent samples: difference of means, Welch interval and p
    holm                         Holm's step-down adjustment of a family of p-values
    paired_mdd, seeds_needed     minimum detectable difference at a power, and seeds for a given one
    equivalent                   TOST: the (1 − 2α) interval of the difference inside ±margin
    curve_auc                    normalised area under an accuracy–compute curve
    curve_mean_to                its mean height from the first point to a given x (interpolated there)
    linear_slope                 least-squares slope
    fit_sigmoid                  ScaleRL's saturating fit R_C = R0 + (A − R0) / (1 + (C_mid / C)^B)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Callable

import numpy as np

SEED = 0  # the report's fixed bootstrap seed
N_BOOT = 2000
LEVEL = 0.95


def _clean(x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64).ravel()
    return a[np.isfinite(a)]


def mean(x) -> float:
    a = _clean(x)
    return float(a.mean()) if a.size else math.nan


def iqm(x) -> float:
    """Interquartile mean: the mean of the middle 50%, `scipy.stats.trim_mean(x, 0.25)` semantics.

    floor(0.25 n) values are cut from each end, as in scipy and rliable, so with fewer than four
    seeds nothing is cut and the IQM equals the mean (n = 4, 5: the middle 2, 3 values).
    """
    a = np.sort(_clean(x))
    if not a.size:
        return math.nan
    k = int(0.25 * a.size)
    return float(a[k:a.size - k].mean())


def bootstrap_ci(x, stat: Callable[[np.ndarray], float] = mean, n_boot: int = N_BOOT, seed: int = SEED,
                 level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap interval of `stat` over the values of x (resampled with replacement).

    One value gives the degenerate interval (x, x); none gives (nan, nan). With three seeds the
    interval only spans the values seen, so it understates the uncertainty: read it as a range.
    """
    a = _clean(x)
    if not a.size:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(n_boot, a.size))
    boots = np.array([stat(a[i]) for i in idx])
    q = (1 - level) / 2
    return float(np.quantile(boots, q)), float(np.quantile(boots, 1 - q))


def prob_improvement(x, y) -> float:
    """P(X > Y) + ½ P(X = Y) over all pairs: Mann–Whitney U of x over y divided by n_x n_y."""
    a, b = _clean(x), _clean(y)
    if not a.size or not b.size:
        return math.nan
    diff = a[:, None] - b[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def prob_improvement_ci(x, y, n_boot: int = N_BOOT, seed: int = SEED, level: float = LEVEL) -> tuple[float, float]:
    """Stratified percentile bootstrap of prob_improvement: x and y are resampled separately (rliable)."""
    a, b = _clean(x), _clean(y)
    if not a.size or not b.size:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, a.size, size=(n_boot, a.size))
    ib = rng.integers(0, b.size, size=(n_boot, b.size))
    boots = np.array([prob_improvement(a[i], b[j]) for i, j in zip(ia, ib)])
    q = (1 - level) / 2
    return float(np.quantile(boots, q)), float(np.quantile(boots, 1 - q))


def paired_prob_improvement(x, y) -> float:
    """The share of pairs (x_i, y_i) with x_i > y_i, ties counting ½: how often x beat y on the same
    seed. x and y are equal-length arrays, element i of each from seed i (see `paired`); pairs with
    a non-finite value are left out; nan without a pair.

    Not prob_improvement: that one pits every run of x against every run of y (Mann–Whitney), which
    for seeds paired by construction answers a different question and is pulled towards ½ by the
    seed-to-seed spread that pairing removes (10 wins in 10 seeds can read as 0.6 unpaired)."""
    xa, ya = finite_pairs(x, y)
    if not xa.size:
        return math.nan
    d = xa - ya
    return float(((d > 0).sum() + 0.5 * (d == 0).sum()) / d.size)


def wilson_ci(wins: float, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval of a share wins / n (wins may end in ½: ties); (nan, nan) when n = 0.

    Chosen over a bootstrap for shares of a few seeds: a bootstrap of 10 wins in 10 seeds is the
    single point (1, 1), while Wilson's (0.72, 1) says what 10 seeds can and cannot rule out."""
    from scipy.stats import norm

    if n <= 0:
        return math.nan, math.nan
    z = float(norm.ppf(1 - (1 - level) / 2))
    p = wins / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z / den * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n)))
    lo, hi = max(0.0, centre - half), min(1.0, centre + half)
    return (0.0 if wins <= 0 else lo), (1.0 if wins >= n else hi)  # exact at the ends, where rounding strays


def paired_prob_improvement_ci(x, y, level: float = LEVEL) -> tuple[float, float]:
    """The Wilson score interval (`wilson_ci`) of paired_prob_improvement over the n finite pairs:
    each seed is one trial that x wins (1), ties (½) or loses (0)."""
    xa, ya = finite_pairs(x, y)
    d = xa - ya
    return wilson_ci(float((d > 0).sum() + 0.5 * (d == 0).sum()), int(d.size), level)


def mann_whitney_p(x, y) -> float:
    """Two-sided Mann–Whitney U test p-value.

    Exact for small samples, ties included: the share of all splits of the pooled values into
    groups of the same sizes whose U is at least as far from its mean as the observed one (ties
    count ½ in U). scipy's default falls back to a normal approximation whenever values tie, which
    seed accuracies on a few hundred problems often do, and then reports p < 0.05 for 3 seeds
    against 3 (0.6, 0.6, 0.6 against 0.5, 0.5, 0.5 gives 0.047); exactly, the smallest p there is
    2/20 = 0.1. Larger samples (over 20,000 splits) use scipy's asymptotic test.
    """
    from itertools import combinations
    from math import comb

    from scipy.stats import mannwhitneyu

    a, b = _clean(x), _clean(y)
    if not a.size or not b.size:
        return math.nan
    pooled = np.concatenate([a, b])
    if np.ptp(pooled) == 0:
        return 1.0  # all values tied: no evidence either way (scipy warns and returns nan here)
    n = pooled.size
    if comb(n, a.size) > 20_000:
        return float(mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue)
    centre = a.size * b.size / 2
    observed = abs(_u(a, b) - centre)
    extreme = total = 0
    for idx in combinations(range(n), a.size):
        mask = np.zeros(n, dtype=bool)
        mask[list(idx)] = True
        total += 1
        extreme += abs(_u(pooled[mask], pooled[~mask]) - centre) >= observed - 1e-12
    return extreme / total


def _u(a: np.ndarray, b: np.ndarray) -> float:
    """Mann–Whitney U of a against b: pairs with a > b, ties counting ½."""
    d = a[:, None] - b[None, :]
    return float((d > 0).sum() + 0.5 * (d == 0).sum())


# ---------------------------------------------------------------------------------------------
# Paired comparisons (seeds are shared across recipes: seed s gives every recipe the same prompts,
# warm start and sampling seeds, so recipe − baseline differences are taken within a seed).

ALPHA = 0.05
POWER = 0.8


@dataclass(frozen=True)
class Paired:
    """A paired comparison of x against y over the seeds both have (d = x − y per seed).

    n: pairs; diff: mean of d; sd: its standard deviation (ddof 1); lo, hi: the two-sided (1 − α)
    t interval of the mean difference; p: two-sided paired t-test p-value (nan under 2 pairs;
    0 or 1 when every d is the same: a constant nonzero difference, or none)."""

    n: int
    diff: float
    sd: float
    lo: float
    hi: float
    p: float


def paired(x: dict, y: dict) -> tuple[np.ndarray, np.ndarray]:
    """Values of x and y (dicts seed -> value) at the seeds where both are finite, in seed order."""
    keys = sorted(k for k in x.keys() & y.keys() if math.isfinite(x[k]) and math.isfinite(y[k]))
    return np.array([x[k] for k in keys], dtype=np.float64), np.array([y[k] for k in keys], dtype=np.float64)


def paired_t(x, y, alpha: float = ALPHA) -> Paired:
    """Paired t-test of x against y (equal-length arrays, element i of each from seed i).

    Why t and not a rank or sign-flip test: with 3 seeds an exact sign-flip test cannot go below
    p = 2/2³ = 0.25 and Wilcoxon's signed-rank likewise, so they could never decide anything at
    the seed counts a laptop affords; the t-test is exact when seed-to-seed differences are normal,
    which accuracies averaged over hundreds of held-out problems are close to (its false-positive
    rate on binomial accuracies is checked by simulation in tests/report/test_stats.py).
    """
    from scipy.stats import t as student

    xa, ya = finite_pairs(x, y)
    d = xa - ya
    n = int(d.size)
    nan = math.nan
    if n == 0:
        return Paired(0, nan, nan, nan, nan, nan)
    diff = float(d.mean())
    if n < 2:
        return Paired(n, diff, nan, nan, nan, nan)
    sd = float(d.std(ddof=1))
    if sd <= 1e-12 * max(1.0, abs(diff)):  # every seed moved by the same amount
        return Paired(n, diff, 0.0, diff, diff, 1.0 if abs(diff) <= 1e-12 else 0.0)
    se = sd / math.sqrt(n)
    tq = float(student.ppf(1 - alpha / 2, n - 1))
    p = float(2 * student.sf(abs(diff) / se, n - 1))
    return Paired(n, diff, sd, diff - tq * se, diff + tq * se, p)


def cluster_means(x, y, groups) -> dict:
    """{group: mean of x − y over its finite pairs}, groups in sorted order (x, y, groups equal-length;
    a group without a finite pair is left out)."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    g = np.asarray(groups)
    ok = np.isfinite(xa) & np.isfinite(ya)
    return {k: float((xa[ok & (g == k)] - ya[ok & (g == k)]).mean()) for k in sorted(set(g[ok].tolist()))}


def cluster_paired_t(x, y, groups, alpha: float = ALPHA) -> Paired:
    """Two-stage (cluster) paired t of x against y: d_w, the mean of x − y over the pairs of cluster w,
    then `paired_t` over the W values d_w (against 0). n = W; diff: the mean of the d_w, each cluster
    weighted equally whatever its number of pairs; sd: their standard deviation; the interval and p
    from t with W − 1 degrees of freedom (nan under 2 clusters); `paired_mdd(sd, n)` is its MDD.

    For seeds that share a warm start: they are not independent draws of the comparison another warm
    start would give, so the seed-level t (df = pairs − 1) treats the warm start's own shift of the
    gap as if it averaged out over seeds. The cluster mean's t is valid whatever the within-cluster
    correlation, at the price of W − 1 degrees of freedom."""
    d = np.array(list(cluster_means(x, y, groups).values()), dtype=np.float64)
    return paired_t(d, np.zeros_like(d), alpha)


def welch_t(x, y, alpha: float = ALPHA) -> tuple[float, float, float, float]:
    """mean(y) − mean(x) of two independent samples with its (1 − α) Welch interval and two-sided
    Welch t-test p (Satterthwaite df); nan interval and p under 2 values in either; p 0 or 1 when
    neither varies (as paired_t)."""
    from scipy.stats import t as student

    a, b = _clean(x), _clean(y)
    if not a.size or not b.size:
        return math.nan, math.nan, math.nan, math.nan
    diff = float(b.mean() - a.mean())
    if a.size < 2 or b.size < 2:
        return diff, math.nan, math.nan, math.nan
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    se = math.sqrt(va + vb)
    if se <= 1e-12 * max(1.0, abs(diff)):
        return diff, diff, diff, 1.0 if abs(diff) <= 1e-12 else 0.0
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    tq = float(student.ppf(1 - alpha / 2, df))
    return diff, diff - tq * se, diff + tq * se, float(2 * student.sf(abs(diff) / se, df))


def holm(pvals) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error ≤ α when rejecting adjusted p < α).

    The i-th smallest of m p-values is multiplied by (m − i + 1), made monotone, capped at 1;
    NaN entries are not part of the family and stay NaN."""
    p = np.asarray(pvals, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    running = 0.0
    for rank, i in enumerate(ok[np.argsort(p[ok], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return [float(v) for v in out]


def paired_power(delta: float, sd: float, n: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t-test at true mean difference delta (noncentral t, df n − 1)."""
    from scipy.stats import nct
    from scipy.stats import t as student

    if n < 2 or not sd > 0:
        return math.nan
    tq = float(student.ppf(1 - alpha / 2, n - 1))
    nc = abs(delta) * math.sqrt(n) / sd
    lower = float(nct.cdf(-tq, n - 1, nc))  # rejecting on the wrong side: tiny, and NaN where scipy underflows
    return float(nct.sf(tq, n - 1, nc)) + (lower if math.isfinite(lower) else 0.0)


def paired_mdd(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """Minimum detectable difference: the mean difference the two-sided paired t-test at level α
    detects with the given power from n pairs whose differences have standard deviation sd.

    Solves paired_power(δ) = power for δ (noncentral t with df n − 1 and noncentrality δ√n / sd);
    for large n this approaches (z_{1−α/2} + z_power)·sd/√n. nan under 2 pairs or without a spread."""
    from scipy.optimize import brentq

    if n < 2 or not (math.isfinite(sd) and sd > 0):
        return math.nan
    hi = sd
    while paired_power(hi, sd, n, alpha) < power:
        hi *= 2
    return float(brentq(lambda d: paired_power(d, sd, n, alpha) - power, 0.0, hi, xtol=1e-10 * sd))


def seeds_needed(delta: float, sd: float, alpha: float = ALPHA, power: float = POWER, most: int = 10_000) -> float:
    """The fewest pairs (≥ 2) at which the paired t-test detects delta with the given power; nan
    without a spread; inf beyond `most`."""
    if not (math.isfinite(sd) and sd > 0) or not delta > 0:
        return math.nan
    n = 2
    while paired_power(delta, sd, n, alpha) < power:
        n = n + 1 if n < 64 else int(n * 1.25)
        if n > most:
            return math.inf
    if n > 64:  # the geometric steps overshoot: back off to the smallest n
        while n > 2 and paired_power(delta, sd, n - 1, alpha) >= power:
            n -= 1
    return float(n)


def decide(pvals, alpha: float = ALPHA) -> list[bool]:
    """The report's marks: Holm-adjusted p < α over one cell's comparisons (family-wise error ≤ α)."""
    return [math.isfinite(p) and p < alpha for p in holm(pvals)]


def equivalent(x, y, margin: float, alpha: float = ALPHA) -> bool:
    """Two one-sided tests (TOST): the (1 − 2α) paired t interval of x − y lies inside ±margin, so a
    difference as large as the margin is rejected at level α in both directions."""
    r = paired_t(x, y, alpha=2 * alpha)
    return bool(r.n >= 2 and math.isfinite(r.lo) and -margin < r.lo and r.hi < margin)


def finite_pairs(x, y) -> tuple[np.ndarray, np.ndarray]:
    """x and y as float64 arrays, keeping the pairs where both are finite."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(xa) & np.isfinite(ya)
    return xa[ok], ya[ok]


def curve_auc(x, y) -> float:
    """Trapezoid area under y(x) divided by the x range: the curve's mean height (nan under 2 points)."""
    xa, ya = finite_pairs(x, y)
    if xa.size < 2 or np.ptp(xa) == 0:
        return math.nan
    order = np.argsort(xa, kind="stable")
    xa, ya = xa[order], ya[order]
    return float(np.sum((xa[1:] - xa[:-1]) * (ya[1:] + ya[:-1]) / 2) / (xa[-1] - xa[0]))


def curve_mean_to(x, y, end: float) -> float:
    """The mean height of the piecewise-linear curve y(x) from its first point to `end`: the trapezoid
    area up to `end` (y interpolated there when the last point lies beyond it) divided by
    end − x_first. nan under 2 points, or when the points stop short of `end` (beyond rounding, 1e-9
    relative): a curve is not extrapolated."""
    xa, ya = finite_pairs(x, y)
    order = np.argsort(xa, kind="stable")
    xa, ya = xa[order], ya[order]
    if xa.size < 2 or xa[-1] < end - 1e-9 * max(1.0, abs(end)) or not end > xa[0]:
        return math.nan
    keep = xa < end
    return curve_auc(np.append(xa[keep], end), np.append(ya[keep], np.interp(end, xa, ya)))


def linear_slope(x, y) -> float:
    """Least-squares slope of y on x over the finite pairs (nan under 2 distinct x)."""
    xa, ya = finite_pairs(x, y)
    if xa.size < 2 or np.ptp(xa) == 0:
        return math.nan
    xc = xa - xa.mean()
    return float(np.sum(xc * (ya - ya.mean())) / np.sum(xc * xc))


# ---------------------------------------------------------------------------------------------
# ScaleRL's sigmoid compute–performance fit (Khatri et al. 2025, arXiv 2510.13786, eq. 1)

@dataclass(frozen=True)
class SigmoidFit:
    """R_C = R0 + (A − R0) / (1 + (C_mid / C)^B), with 95% intervals from the fit's covariance.

    identifiable is False (and `reason` says why) when the data do not pin the curve down: the fit
    failed, a parameter sits on its bound, the midpoint lies outside the observed compute, the
    asymptote's interval contains R0 (no gain) or reaches more than A_SLACK above the highest
    accuracy observed (R_max: the curve's ceiling is extrapolated, not seen), or an interval is too
    wide to mean anything. The parameter values are then computed but not trusted, and the report's
    table leaves them out (their digits are the optimizer's path, not the data's).
    """

    A: float
    B: float
    C_mid: float
    R0: float
    A_ci: tuple[float, float]
    B_ci: tuple[float, float]
    C_mid_ci: tuple[float, float]
    identifiable: bool
    reason: str
    n_points: int
    R_max: float = math.nan  # the highest accuracy among the fitted points


B_BOUNDS = (0.05, 20.0)
AT_BOUND = 1e-3  # a fitted parameter this share of its range from a bound is at the bound
LOG_MID_MARGIN = 3.0  # ln C_mid may range e^3 ≈ 20× beyond the observed compute, then it is at a bound
MAX_A_CI = 0.5  # an asymptote interval wider than this (accuracy units) is not identified
MAX_MID_CI_DECADES = 2.0  # nor a midpoint interval wider than this many decades of compute
MAX_B_CI_RATIO = 20.0
# An asymptote is identified only if its 95% upper bound lies within this much (accuracy units) of the
# highest accuracy any evaluation of the fit observed: 0.10 is about three binomial standard errors of
# one 200-problem evaluation at 50% accuracy (0.035 each), so a ceiling this far above every point is
# not something the points saw (ppo on math-small: A = 0.88 [0.66, 1.10] against a maximum of 0.61).
A_SLACK = 0.10


def sigmoid(C, A: float, B: float, C_mid: float, R0: float) -> np.ndarray:
    """ScaleRL's curve at compute C > 0."""
    C = np.asarray(C, dtype=np.float64)
    return R0 + (A - R0) / (1.0 + (C_mid / C) ** B)


def fit_sigmoid(C, R, R0: float) -> SigmoidFit:
    """Least-squares fit of A ∈ [0, 1], B, C_mid to points (C > 0, R), R0 (performance at C = 0) fixed.

    Parametrised in ln C_mid and scaled compute for conditioning; needs 4 points at 3 distinct C.
    """
    from scipy.optimize import curve_fit

    C, R = np.asarray(C, dtype=np.float64), np.asarray(R, dtype=np.float64)
    ok = np.isfinite(C) & np.isfinite(R) & (C > 0)
    C, R = C[ok], R[ok]
    nan2 = (math.nan, math.nan)

    r_max = float(R.max()) if R.size else math.nan

    def fail(reason: str, A=math.nan, B=math.nan, mid=math.nan) -> SigmoidFit:
        return SigmoidFit(A, B, mid, R0, nan2, nan2, nan2, False, reason, int(C.size), r_max)

    if not math.isfinite(R0):
        return fail("no accuracy at compute 0 (R0)")
    if C.size < 4 or np.unique(C).size < 3:
        return fail(f"too few points ({C.size} at {np.unique(C).size} compute values; need 4 at 3)")
    scale = float(np.exp(np.mean(np.log(C))))
    x = C / scale
    lo_x, hi_x = float(np.log(x.min())), float(np.log(x.max()))
    lower = [0.0, B_BOUNDS[0], lo_x - LOG_MID_MARGIN]
    upper = [1.0, B_BOUNDS[1], hi_x + LOG_MID_MARGIN]

    def f(xv, A, B, log_mid):
        return R0 + (A - R0) / (1.0 + np.exp(B * (log_mid - np.log(xv))))

    top = float(R.max()) if R.mean() >= R0 else float(R.min())
    p0 = [min(max(top, 0.01), 0.99), 1.0, (lo_x + hi_x) / 2]
    try:
        p, cov = curve_fit(f, x, R, p0=p0, bounds=(lower, upper), max_nfev=5000)
    except (RuntimeError, ValueError) as e:
        return fail(f"fit did not converge ({type(e).__name__})")
    A, B, log_mid = (float(v) for v in p)
    mid = float(np.exp(log_mid) * scale)
    se = np.sqrt(np.diag(cov)) if np.all(np.isfinite(cov)) else np.full(3, np.inf)
    z = 1.959963984540054
    A_ci = (A - z * se[0], A + z * se[0])
    B_ci = (B - z * se[1], B + z * se[1])
    with np.errstate(over="ignore"):
        mid_ci = (float(np.exp(log_mid - z * se[2]) * scale), float(np.exp(log_mid + z * se[2]) * scale))
    reason = ""
    names = ("asymptote A", "efficiency B", "midpoint C_mid")
    shown = (f"{A:.3g}", f"{B:.3g}", f"{mid:.3g}")
    for name, v, lo, hi, text in zip(names, p, lower, upper, shown):
        # within AT_BOUND of the parameter's range from a bound: where the data stop constraining a
        # parameter (C_mid beyond the observed compute), the optimizer stops along that flat direction
        # wherever its cost tolerance is met, which moves with the last steps' rounding (1e-5 of ln C_mid
        # apart on two x86-64 CPUs); a test this close to the bound would flip with the CPU
        if min(abs(v - lo), abs(hi - v)) <= AT_BOUND * (hi - lo):
            reason = f"{name} at its bound ({text})"
            break
    if not reason and not (lo_x <= log_mid <= hi_x):
        reason = "midpoint outside the observed compute range"
    if not reason and (not np.all(np.isfinite(se)) or np.any(se[1:] <= 0)):
        reason = "covariance not finite or degenerate (a flat curve leaves B and C_mid free)"
    if not reason and A_ci[0] <= R0 <= A_ci[1]:
        reason = "asymptote indistinguishable from R0 (no gain to fit)"
    if not reason and A_ci[1] > r_max + A_SLACK:
        reason = (f"asymptote's upper bound {A_ci[1]:.3g} above the observed maximum {r_max:.3g} + {A_SLACK:g}"
                  " (a ceiling the points did not reach)")
    if not reason and A_ci[1] - A_ci[0] > MAX_A_CI:
        reason = f"asymptote interval wider than {MAX_A_CI}"
    if not reason and 2 * z * se[2] / math.log(10) > MAX_MID_CI_DECADES:
        reason = f"midpoint interval wider than {MAX_MID_CI_DECADES:g} decades"
    if not reason and (B_ci[0] <= 0 or B_ci[1] / B_ci[0] > MAX_B_CI_RATIO):
        reason = "efficiency interval includes 0 or spans more than 20×"
    return SigmoidFit(A, B, mid, R0, A_ci, B_ci, mid_ci, not reason, reason, int(C.size), r_max)
