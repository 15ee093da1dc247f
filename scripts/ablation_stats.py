"""The statistics of an ablation protocol (docs/ablations.md): intervals for success rates, exact
tests on success counts, survival curves and the log-rank test on steps to learn, bootstrap
intervals. Standard library and numpy only (scipy is the tests' independent reference).

Notation: k successes of n runs, p̂ = k / n, α = 1 − confidence, z = Φ⁻¹(1 − α/2) (1.95996 at
95%). Every p-value is two-sided.

  wilson_interval(k, n)         (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)
  clopper_pearson_interval(k, n)
                                [p_L, p_U] with P(X ≥ k | p_L) = α/2 and P(X ≤ k | p_U) = α/2,
                                X ~ Binomial(n, p) (p_L = 0 at k = 0, p_U = 1 at k = n): the
                                exact interval, at least 1 − α coverage for every p
  binomial_test_half(k, n)      exact two-sided test of p = 1/2: the sum of P(X = i) over every i
                                with P(X = i) ≤ P(X = k) (the "minimum likelihood" p-value)
  mcnemar_exact(b, c)           paired successes: b pairs where only arm 1 succeeded, c where only
                                arm 2 did; binomial_test_half(b, b + c) (the concordant pairs carry
                                no information on the difference)
  sign_test(differences)        positive against negative differences, zeros dropped;
                                binomial_test_half(#positive, #nonzero)
  fisher_exact(a, b, c, d)      unpaired counts, table [[a, b], [c, d]] (rows: arms; columns:
                                success, failure): with the margins fixed, a is hypergeometric,
                                P(a = x) = C(a+b, x)·C(c+d, a+c−x) / C(n, a+c); the p-value sums
                                P(x) over every x with P(x) ≤ P(a)
  kaplan_meier(durations, learned)
                                S(t) = Π_{t_i ≤ t} (1 − d_i / n_i) over the distinct steps t_i at
                                which runs learned, d_i of them, n_i runs still at risk (not learned
                                and not censored before t_i; a run censored at t_i is at risk at
                                t_i); the share learned by step t is 1 − S(t). Band: exponential
                                Greenwood (log-log), V = Σ d_i / (n_i (n_i − d_i)) / (ln S)²,
                                S^{exp(± z √V)}
  logrank_test(group 1, group 2)
                                at each distinct learning step: O₁ = d₁ᵢ, E₁ = d_i n₁ᵢ / n_i,
                                V_i = n₁ᵢ n₂ᵢ d_i (n_i − d_i) / (n_i² (n_i − 1));
                                χ² = (Σ O₁ − E₁)² / Σ V_i with 1 degree of freedom,
                                p = P(χ²₁ ≥ χ²) = erfc(√(χ²/2))
  bootstrap_interval(values, statistic)
                                percentile bootstrap: draw n values with replacement (within each
                                stratum when strata are given), R times; the interval is the α/2
                                and 1 − α/2 percentiles (numpy's linear interpolation) of the R
                                statistics. Deterministic given the seed (numpy PCG64).

A survival duration is the step at which the run learned (learned = True) or, for a run that never
learned, the last step it ran (learned = False: censored there, what happens later is unknown).
Ties: runs censored at a step are still at risk at that step (the usual convention).
"""
import math
from fractions import Fraction
from statistics import NormalDist

import numpy as np


def z_value(confidence):
    """Φ⁻¹(1 − α/2), α = 1 − confidence."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def _check_counts(k, n):
    if not (isinstance(k, int) and isinstance(n, int) and 0 <= k <= n):
        raise ValueError(f"expected integer counts 0 <= k <= n, got k={k!r}, n={n!r}")


def wilson_interval(k, n, confidence=0.95):
    """Wilson score interval of a proportion k / n; (0, 1) when n = 0."""
    _check_counts(k, n)
    if n == 0:
        return 0.0, 1.0
    z = z_value(confidence)
    p = k / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (0.0 if k == 0 else centre - half), (1.0 if k == n else centre + half)


def binomial_cdf(k, n, p):
    """P(X ≤ k), X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return min(1.0, math.fsum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1)))


def _solve_decreasing(f, target):
    """The p in [0, 1] where the decreasing f(p) crosses target (bisection to float precision)."""
    low, high = 0.0, 1.0
    for _ in range(200):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        if f(mid) > target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def clopper_pearson_interval(k, n, confidence=0.95):
    """Exact (Clopper-Pearson) interval of a proportion k / n; (0, 1) when n = 0."""
    _check_counts(k, n)
    if n == 0:
        return 0.0, 1.0
    tail = (1 - confidence) / 2
    # P(X ≥ k | p) = 1 − cdf(k − 1) rises with p; P(X ≤ k | p) falls with p
    lower = 0.0 if k == 0 else _solve_decreasing(lambda p: binomial_cdf(k - 1, n, p), 1 - tail)
    upper = 1.0 if k == n else _solve_decreasing(lambda p: binomial_cdf(k, n, p), tail)
    return lower, upper


def binomial_test_half(k, n):
    """Exact two-sided p-value of k successes of n under p = 1/2 (1 when n = 0), in exact integers."""
    _check_counts(k, n)
    if n == 0:
        return 1.0
    observed = math.comb(n, k)
    total = sum(math.comb(n, i) for i in range(n + 1) if math.comb(n, i) <= observed)
    return float(min(Fraction(1), Fraction(total, 2 ** n)))


def mcnemar_exact(b, c):
    """Exact McNemar test: b pairs where only the first arm succeeded, c where only the second did."""
    return binomial_test_half(b, b + c)


def paired_discordance(first, second):
    """(b, c) of two equally long lists of booleans paired by position: b = first only, c = second only."""
    if len(first) != len(second):
        raise ValueError(f"paired lists differ in length ({len(first)} and {len(second)})")
    b = sum(1 for x, y in zip(first, second) if x and not y)
    c = sum(1 for x, y in zip(first, second) if y and not x)
    return b, c


def sign_test(differences):
    """Exact sign test of paired differences: (positives, negatives, p); zeros carry no sign."""
    positive = sum(1 for d in differences if d > 0)
    negative = sum(1 for d in differences if d < 0)
    return positive, negative, binomial_test_half(positive, positive + negative)


def fisher_exact(a, b, c, d):
    """Two-sided Fisher exact p-value of [[a, b], [c, d]], in exact integers."""
    for x in (a, b, c, d):
        _check_counts(x, x)
    row1, row2, col1 = a + b, c + d, a + c
    n = row1 + row2
    weight = lambda x: math.comb(row1, x) * math.comb(row2, col1 - x)  # noqa: E731  ∝ P(a = x)
    observed = weight(a)
    support = range(max(0, col1 - row2), min(row1, col1) + 1)
    total = sum(weight(x) for x in support if weight(x) <= observed)
    return float(min(Fraction(1), Fraction(total, math.comb(n, col1))))


def _check_durations(durations, learned):
    if len(durations) != len(learned):
        raise ValueError(f"durations and learned differ in length ({len(durations)} and {len(learned)})")
    if any(t is None or t < 0 for t in durations):
        raise ValueError("every duration must be a step >= 0")


def kaplan_meier(durations, learned, confidence=0.95):
    """The Kaplan-Meier curve of steps to learn: one dict per distinct step at which a run learned,
    in step order: step, at_risk, learned (count), survival S, share_learned 1 − S, and band
    (low, high) of the share learned (exponential Greenwood; (1, 1) once S = 0)."""
    _check_durations(durations, learned)
    z = z_value(confidence)
    steps = sorted({t for t, e in zip(durations, learned) if e})
    survival, greenwood, curve = 1.0, 0.0, []
    for t in steps:
        at_risk = sum(1 for u in durations if u >= t)
        events = sum(1 for u, e in zip(durations, learned) if e and u == t)
        survival *= 1 - events / at_risk
        if at_risk > events:
            greenwood += events / (at_risk * (at_risk - events))
        if survival <= 0:
            survival, band = 0.0, (1.0, 1.0)
        else:
            spread = z * math.sqrt(greenwood) / abs(math.log(survival))
            s_low, s_high = survival ** math.exp(spread), survival ** math.exp(-spread)
            band = (1 - s_high, 1 - s_low)
        curve.append({"step": t, "at_risk": at_risk, "learned": events, "survival": survival,
                      "share_learned": 1 - survival, "band": band})
    return curve


def share_learned_by(curve, step):
    """1 − S(step) of a kaplan_meier curve (0 before its first learning step)."""
    share = 0.0
    for point in curve:
        if point["step"] > step:
            break
        share = point["share_learned"]
    return share


def median_steps(curve):
    """The Kaplan-Meier median steps to learn: the first step with S ≤ 1/2, None if S stays above."""
    return next((p["step"] for p in curve if p["survival"] <= 0.5), None)


def logrank_test(durations1, learned1, durations2, learned2):
    """Two-sample log-rank test of steps to learn: (observed₁, expected₁, χ², p)."""
    _check_durations(durations1, learned1)
    _check_durations(durations2, learned2)
    runs = [(t, e, 1) for t, e in zip(durations1, learned1)] + [(t, e, 2) for t, e in zip(durations2, learned2)]
    observed = expected = variance = 0.0
    for t in sorted({t for t, e, _ in runs if e}):
        n1 = sum(1 for u, _, g in runs if g == 1 and u >= t)
        n = sum(1 for u, _, _ in runs if u >= t)
        d1 = sum(1 for u, e, g in runs if g == 1 and e and u == t)
        d = sum(1 for u, e, _ in runs if e and u == t)
        observed += d1
        expected += d * n1 / n
        if n > 1:
            variance += n1 * (n - n1) * d * (n - d) / (n * n * (n - 1))
    if variance == 0:
        return observed, expected, 0.0, 1.0
    chi2 = (observed - expected) ** 2 / variance
    return observed, expected, chi2, math.erfc(math.sqrt(chi2 / 2))


def interquartile_mean(values, axis=-1):
    """The mean of the middle half: sorted, ⌊n/4⌋ values cut from each end (scipy's trim_mean(x, 0.25),
    the IQM of rliable)."""
    x = np.sort(np.asarray(values, dtype=float), axis=axis)
    n = x.shape[axis]
    cut = int(0.25 * n)
    return np.take(x, range(cut, n - cut), axis=axis).mean(axis=axis)


STATISTICS = {"median": lambda x, axis=-1: np.median(x, axis=axis),
              "mean": lambda x, axis=-1: np.mean(x, axis=axis),
              "iqm": interquartile_mean}


def bootstrap_distribution(values, statistic="median", resamples=10000, seed=0, strata=None):
    """The statistic ('median', 'mean' or 'iqm') of each of R resamples (numpy array of R values)."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or len(x) == 0:
        raise ValueError("bootstrap needs a non-empty list of numbers")
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic '{statistic}'; expected {', '.join(STATISTICS)}")
    rng = np.random.Generator(np.random.PCG64(seed))
    if strata is None:
        samples = x[rng.integers(0, len(x), size=(resamples, len(x)))]
    else:
        if len(strata) != len(x):
            raise ValueError(f"strata and values differ in length ({len(strata)} and {len(x)})")
        groups = [np.flatnonzero(np.asarray([s == label for s in strata])) for label in sorted(set(strata))]
        samples = np.concatenate([x[g[rng.integers(0, len(g), size=(resamples, len(g)))]] for g in groups], axis=1)
    return STATISTICS[statistic](samples, axis=1)


def bootstrap_interval(values, statistic="median", confidence=0.95, resamples=10000, seed=0, strata=None):
    """(estimate on the values, low, high): percentile bootstrap interval of the statistic."""
    z_value(confidence)
    replicates = bootstrap_distribution(values, statistic, resamples, seed, strata)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(replicates, [tail, 100 - tail])
    return float(STATISTICS[statistic](np.asarray(values, dtype=float))), float(low), float(high)
