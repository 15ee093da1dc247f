"""scripts/ablation_stats.py against independent computations: scipy 1.10 (binomtest and its
proportion_ci, fisher_exact, chi2, trim_mean, bootstrap), exact enumeration, and tables worked by
hand (Kaplan-Meier and the log-rank test, which scipy 1.10 does not have).

usage: /usr/bin/python3 tests/train/cli/test_ablation_stats.py SCRIPTS_DIR"""
import itertools
import math
import random
import sys
from collections import Counter
from fractions import Fraction

import numpy as np
import scipy.stats as st

sys.path.insert(0, sys.argv[1])
import ablation_stats as a  # noqa: E402


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))


def worst(pairs):
    """The largest |x − y| over pairs of numbers or of tuples."""
    out = 0.0
    for x, y in pairs:
        for u, v in zip(x if isinstance(x, tuple) else (x,), y if isinstance(y, tuple) else (y,)):
            out = max(out, abs(u - v))
    return out


# ---- intervals of a proportion: scipy.stats.binomtest(k, n).proportion_ci --------------------------
counts = [(k, n) for n in range(1, 31) for k in range(n + 1)] + [(37, 100), (0, 200), (200, 200), (150, 333)]
for confidence in (0.95, 0.8):
    got = [(a.wilson_interval(k, n, confidence), tuple(st.binomtest(k, n).proportion_ci(confidence, "wilson")))
           for k, n in counts]
    err = worst(got)
    check(f"Wilson interval = scipy's 'wilson', {len(counts)} (k, n), confidence {confidence}", err < 1e-12, err)
    got = [(a.clopper_pearson_interval(k, n, confidence), tuple(st.binomtest(k, n).proportion_ci(confidence, "exact")))
           for k, n in counts]
    err = worst(got)
    check(f"Clopper-Pearson interval = scipy's 'exact', {len(counts)} (k, n), confidence {confidence}", err < 1e-9, err)
check("n = 0: both intervals are [0, 1]", a.wilson_interval(0, 0) == (0.0, 1.0) == a.clopper_pearson_interval(0, 0))
# by hand: 5 of 10 at 95%, z = 1.959964: centre 0.5, half-width z/(1+z²/10)·√(0.025 + z²/400) = 0.26340
low, high = a.wilson_interval(5, 10)
check("Wilson 5 of 10 by hand: 0.5 ± 0.2634", abs(low - 0.2366) < 1e-4 and abs(high - 0.7634) < 1e-4, (low, high))

# ---- exact tests on paired successes: scipy.stats.binomtest(k, n, 0.5) ----------------------------
pairs = [(k, n) for n in range(0, 41) for k in range(n + 1)]
err = max(abs(a.binomial_test_half(k, n) - (st.binomtest(k, n).pvalue if n else 1.0)) for k, n in pairs)
check(f"two-sided binomial test at 1/2 = scipy binomtest, all k of n <= 40", err < 1e-12, err)
err = max(abs(a.mcnemar_exact(b, c) - st.binomtest(b, b + c).pvalue) for b in range(0, 15) for c in range(0, 15) if b + c)
check("exact McNemar(b, c) = binomtest(b, b + c), b, c < 15", err < 1e-12, err)
# the suite's pooled residual-attention pairs (docs/positions.md): 12 only with it, 31 only without
check("McNemar 12 / 31 discordant pairs: p = 0.0054 (docs/positions.md's 0.005)",
      abs(a.mcnemar_exact(12, 31) - 0.0054016) < 1e-6, a.mcnemar_exact(12, 31))
first = [True, True, False, False, True, False, True, True]
second = [True, False, True, False, False, False, False, True]
check("discordant pairs counted by position: b = 3 (first only), c = 1", a.paired_discordance(first, second) == (3, 1),
      a.paired_discordance(first, second))
differences = [0.3, -0.1, 0.0, 0.2, 0.5, 0.0, 0.4, -0.2, 0.1, 0.6]
positive, negative, p = a.sign_test(differences)
check("sign test: zeros dropped, 6 + against 2 -, p = binomtest(6, 8)",
      (positive, negative) == (6, 2) and abs(p - st.binomtest(6, 8).pvalue) < 1e-12, (positive, negative, p))

# ---- Fisher exact: scipy.stats.fisher_exact -----------------------------------------------------
rng = random.Random(49)
tables = [tuple(rng.randint(0, 12) for _ in range(4)) for _ in range(400)] + [(38, 115, 57, 96), (0, 0, 0, 0),
                                                                              (10, 0, 0, 10), (0, 6, 40, 32)]
err = max(abs(a.fisher_exact(*t) - st.fisher_exact([[t[0], t[1]], [t[2], t[3]]])[1]) for t in tables)
check(f"Fisher exact two-sided = scipy fisher_exact, {len(tables)} tables", err < 1e-12, err)
check("Fisher 38 of 153 against 57 of 153: p = 0.026 (docs/positions.md)",
      abs(a.fisher_exact(38, 115, 57, 96) - 0.02588) < 1e-5, a.fisher_exact(38, 115, 57, 96))

# ---- Kaplan-Meier, by hand ----------------------------------------------------------------------
# Arm A, 6 runs: learned at steps 2, 3, 3, 6; never learned, censored at 3 (stopped) and 8 (budget).
#   step  at risk  learned  S                    share learned  Greenwood Σ d/(n(n−d))
#   2     6        1        5/6                  1/6            1/30
#   3     5        2        5/6 · 3/5 = 1/2      1/2            1/30 + 2/15 = 1/6   (the run censored at 3
#                                                                                  is at risk at 3)
#   6     2        1        1/2 · 1/2 = 1/4      3/4            1/6 + 1/2 = 2/3
# Median (first S <= 1/2): step 3. Exponential-Greenwood band at step 3: V = (1/6) / (ln 2)²,
# √V = 0.40825 / 0.69315 = 0.58898, S^{exp(±1.95996 · 0.58898)} = [0.5^3.1722, 0.5^0.31524]
# = [0.1111, 0.8037] for S, so [0.1963, 0.8889] for the share learned.
durations_a = [2, 3, 3, 3, 6, 8]
learned_a = [True, True, True, False, True, False]
curve = a.kaplan_meier(durations_a, learned_a)
table = [(p["step"], p["at_risk"], p["learned"], Fraction(p["survival"]).limit_denominator(100)) for p in curve]
check("Kaplan-Meier table by hand (steps 2, 3, 6; at risk 6, 5, 2; S = 5/6, 1/2, 1/4)",
      table == [(2, 6, 1, Fraction(5, 6)), (3, 5, 2, Fraction(1, 2)), (6, 2, 1, Fraction(1, 4))], table)
check("share learned by step: 0 at 1, 1/6 at 2, 1/2 at 5, 3/4 at 100",
      worst(zip([a.share_learned_by(curve, s) for s in (1, 2, 5, 100)], [0.0, 1 / 6, 0.5, 0.75])) < 1e-12,
      [a.share_learned_by(curve, s) for s in (1, 2, 5, 100)])
check("Kaplan-Meier median: step 3", a.median_steps(curve) == 3, a.median_steps(curve))
z = st.norm.ppf(0.975)
hand = (1 - 0.5 ** math.exp(-z * math.sqrt(1 / 6) / math.log(2)), 1 - 0.5 ** math.exp(z * math.sqrt(1 / 6) / math.log(2)))
band = curve[1]["band"]
check("exponential-Greenwood band at step 3 by hand: share learned in [0.1963, 0.8889]",
      worst([(band, hand)]) < 1e-12 and abs(band[0] - 0.1963) < 1e-4 and abs(band[1] - 0.8889) < 2e-4, (band, hand))
check("a band contains its estimate", all(p["band"][0] <= p["share_learned"] <= p["band"][1] for p in curve))
# without censoring, 1 − S(t) is the share of runs learned by t
steps = [5, 1, 4, 4, 9, 2, 7, 4]
curve = a.kaplan_meier(steps, [True] * len(steps))
check("no censoring: share learned = empirical distribution function",
      all(abs(a.share_learned_by(curve, t) - sum(s <= t for s in steps) / len(steps)) < 1e-12 for t in range(11)))
check("no run learned: an empty curve, no median", a.kaplan_meier([10, 10], [False, False]) == [] and
      a.median_steps(a.kaplan_meier([10, 10], [False, False])) is None)

# ---- log-rank, by hand --------------------------------------------------------------------------
# Arm A as above; arm B, 6 runs: learned at 4, 6, 7; censored at 5, 9, 9.
#   step  n_A  n_B  n   d_A  d   E_A = d·n_A/n  V = n_A·n_B·d·(n−d) / (n²(n−1))
#   2     6    6    12  1    1   1/2            6·6·1·11/(144·11) = 1/4
#   3     5    6    11  2    2   10/11          5·6·2·9/(121·10)  = 54/121
#   4     2    6    8   0    1   1/4            2·6·1·7/(64·7)    = 3/16
#   6     2    4    6   1    2   2/3            2·4·2·4/(36·5)    = 16/45
#   7     1    3    4   0    1   1/4            1·3·1·3/(16·3)    = 3/16
# O_A = 4, E_A = 85/33, O − E = 47/33, V = 62153/43560, χ² = (47/33)² / V = 88360/62153 = 1.42165
rows = [(6, 6, 1, 1), (5, 6, 2, 2), (2, 6, 0, 1), (2, 4, 1, 2), (1, 3, 0, 1)]
expected_a = sum(Fraction(d * na, na + nb) for na, nb, _, d in rows)
variance = sum(Fraction(na * nb * d * (na + nb - d), (na + nb) ** 2 * (na + nb - 1)) for na, nb, _, d in rows)
chi2_hand = (4 - expected_a) ** 2 / variance
assert expected_a == Fraction(85, 33) and variance == Fraction(62153, 43560) and chi2_hand == Fraction(88360, 62153)
durations_b = [4, 6, 7, 5, 9, 9]
learned_b = [True, True, True, False, False, False]
observed, expected, chi2, p = a.logrank_test(durations_a, learned_a, durations_b, learned_b)
check("log-rank by hand: O_A = 4, E_A = 85/33, χ² = 88360/62153",
      observed == 4 and abs(expected - 85 / 33) < 1e-12 and abs(chi2 - 88360 / 62153) < 1e-12, (observed, expected, chi2))
check("log-rank p = P(χ²₁ ≥ 1.42165) (scipy chi2.sf)", abs(p - st.chi2.sf(88360 / 62153, 1)) < 1e-12, p)
swapped = a.logrank_test(durations_b, learned_b, durations_a, learned_a)
check("log-rank: the same χ² with the arms swapped", abs(swapped[2] - chi2) < 1e-12, swapped)
check("log-rank: identical arms give χ² = 0, p = 1",
      a.logrank_test(durations_a, learned_a, durations_a, learned_a)[2:] == (0.0, 1.0))

# ---- bootstrap ----------------------------------------------------------------------------------
values = [0.1, 0.9, 0.4, 1.0]
sample_for_seed = np.linspace(0, 1, 30)
estimate, low, high = a.bootstrap_interval(values, "mean", resamples=20000, seed=7)
check("bootstrap: the same seed gives the same draws and interval", (estimate, low, high) ==
      a.bootstrap_interval(values, "mean", resamples=20000, seed=7) and
      np.array_equal(a.bootstrap_distribution(sample_for_seed, "mean", 50, seed=7),
                     a.bootstrap_distribution(sample_for_seed, "mean", 50, seed=7)))
check("bootstrap: another seed gives another draw",
      not np.array_equal(a.bootstrap_distribution(values, "mean", 200, seed=8),
                         a.bootstrap_distribution(values, "mean", 200, seed=7)))
# exact bootstrap distribution of the mean and the median: all 4⁴ = 256 equally likely resamples
for statistic, function in (("mean", np.mean), ("median", np.median)):
    exact = Counter(float(function([values[i] for i in idx])) for idx in itertools.product(range(4), repeat=4))
    drawn = Counter(a.bootstrap_distribution(values, statistic, resamples=20000, seed=7).tolist())
    gaps = [abs(drawn[v] / 20000 - c / 256) / math.sqrt((c / 256) * (1 - c / 256) / 20000) for v, c in exact.items()]
    atoms = [round(v, 12) for v in exact]
    check(f"bootstrap of the {statistic}: each value's share within 4 sd of the exact enumeration (256 resamples)",
          max(gaps) < 4 and set(round(v, 12) for v in drawn) <= set(atoms), max(gaps))
    # the interval's ends are the exact distribution's 2.5% and 97.5% points (linear interpolation)
    ordered = sorted(exact)
    cdf = np.cumsum([exact[v] / 256 for v in ordered])
    _, low, high = a.bootstrap_interval(values, statistic, resamples=20000, seed=7)
    lo_atom = ordered[int(np.searchsorted(cdf, 0.025))]
    hi_atom = ordered[int(np.searchsorted(cdf, 0.975))]
    check(f"bootstrap interval of the {statistic} at the exact distribution's 2.5% / 97.5% points",
          abs(low - lo_atom) < 0.05 and abs(high - hi_atom) < 0.05, ((low, high), (lo_atom, hi_atom)))
sample = np.random.default_rng(3).beta(2, 5, size=25)
for statistic, function in (("median", np.median), ("mean", np.mean)):
    ref = st.bootstrap((sample,), function, method="percentile", n_resamples=20000, random_state=1).confidence_interval
    _, low, high = a.bootstrap_interval(sample, statistic, resamples=20000, seed=1)
    check(f"bootstrap interval of the {statistic} within 0.02 of scipy.stats.bootstrap (percentile, 25 values)",
          abs(low - ref.low) < 0.02 and abs(high - ref.high) < 0.02, ((low, high), (ref.low, ref.high)))
iqm_values = [np.random.default_rng(s).random(n) for s, n in ((1, 4), (2, 7), (3, 10), (4, 13))]
err = max(abs(a.interquartile_mean(v) - st.trim_mean(v, 0.25)) for v in iqm_values)
check("interquartile mean = scipy trim_mean(x, 0.25), n = 4, 7, 10, 13", err < 1e-12, err)
strata = ["reverse"] * 3 + ["mqar"] * 3
_, low, high = a.bootstrap_interval([0, 0, 0, 1, 1, 1], "mean", strata=strata)
_, plain_low, plain_high = a.bootstrap_interval([0, 0, 0, 1, 1, 1], "mean")
check("stratified bootstrap keeps each stratum's size: constant strata give the point 0.5",
      (low, high) == (0.5, 0.5) and plain_low < 0.5 < plain_high, ((low, high), (plain_low, plain_high)))

# ---- bad input --------------------------------------------------------------------------------
for name, call, says in (("k > n", lambda: a.wilson_interval(3, 2), "0 <= k <= n, got k=3, n=2"),
                         ("negative count", lambda: a.fisher_exact(-1, 2, 3, 4), "got k=-1"),
                         ("durations and learned of different lengths", lambda: a.kaplan_meier([1, 2], [True]),
                          "differ in length (2 and 1)"),
                         ("an empty bootstrap sample", lambda: a.bootstrap_interval([]), "non-empty"),
                         ("an unknown statistic", lambda: a.bootstrap_interval([1.0], "mode"), "unknown statistic 'mode'")):
    try:
        call()
        check(f"{name} is refused", False, "no error")
    except ValueError as e:
        check(f"{name} is refused with a message saying what was expected", says in str(e), str(e))
