#!/usr/bin/env python3
"""Expected values for hipq's statistics tests, computed independently of hipq.

Writes tests/data/statistics/expected.json: fixed data sets (with ties, n = 1,
n = 2, outliers, a large offset) and, for each, what hipq's statistics must
return. Computed with Python's `statistics` module and numpy:
  - mean, sd: statistics.mean, statistics.stdev (sample sd; null when n < 2)
  - quantiles: numpy.percentile with its default "linear" method (checked
    against statistics.quantiles(method="inclusive"))
  - outliers: Tukey fences on numpy quartiles, 1.5 / 3 IQR
  - Mann-Whitney U: U by counting pairs; exact p by enumerating every
    arrangement (small n) or from the Gaussian binomial coefficient's
    polynomial (larger n); asymptotic p from the tie-corrected normal
    approximation with continuity correction
  - bootstrap: the documented SplitMix64 procedure (coordinator/statistics/
    random.h, bootstrap.h) re-implemented here with numpy medians and
    numpy.percentile.
Run: python3 tools/stats/make_expected.py  (from the repository root)
"""
import itertools
import json
import math
import os
import statistics
import sys

import numpy as np

MASK = (1 << 64) - 1
DEFAULT_SEED = 0x6869707153544154
RESAMPLES = 2000
EXACT_MAX_TOTAL = 40


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return (self.next() * n) >> 64


def describe(xs):
    qs = np.percentile(np.array(xs, dtype=np.float64), [50, 90, 95, 99])
    if len(xs) >= 2:
        inclusive = statistics.quantiles(xs, n=100, method="inclusive")
        for got, pct in zip(qs, [50, 90, 95, 99]):
            assert math.isclose(got, inclusive[pct - 1], rel_tol=1e-12, abs_tol=1e-12), (got, inclusive[pct - 1])
    return {
        "n": len(xs),
        "mean": statistics.mean(xs),
        "sd": statistics.stdev(xs) if len(xs) >= 2 else None,
        "min": min(xs),
        "p50": float(qs[0]),
        "p90": float(qs[1]),
        "p95": float(qs[2]),
        "p99": float(qs[3]),
        "max": max(xs),
        "median_statistics": statistics.median(xs),
    }


def outliers(xs):
    q1, q3 = np.percentile(np.array(xs, dtype=np.float64), [25, 75])
    iqr = q3 - q1
    flags = []
    for x in xs:
        if x < q1 - 3 * iqr:
            flags.append("low severe")
        elif x < q1 - 1.5 * iqr:
            flags.append("low mild")
        elif x > q3 + 3 * iqr:
            flags.append("high severe")
        elif x > q3 + 1.5 * iqr:
            flags.append("high mild")
        else:
            flags.append("none")
    return {"q1": float(q1), "q3": float(q3), "iqr": float(iqr), "flags": flags}


def bootstrap_median(xs, seed=DEFAULT_SEED, resamples=RESAMPLES, level=0.95):
    rng = SplitMix64(seed)
    n = len(xs)
    meds = []
    for _ in range(resamples):
        meds.append(float(np.median([xs[rng.below(n)] for _ in range(n)])))
    lo, hi = np.percentile(meds, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return {"estimate": float(np.median(xs)), "low": float(lo), "high": float(hi)}


def bootstrap_ratio(a, b, seed=DEFAULT_SEED, resamples=RESAMPLES, level=0.95):
    rng = SplitMix64(seed)
    ratios = []
    for _ in range(resamples):
        ma = float(np.median([a[rng.below(len(a))] for _ in range(len(a))]))
        mb = float(np.median([b[rng.below(len(b))] for _ in range(len(b))]))
        if ma != 0:
            ratios.append(mb / ma)
    lo, hi = np.percentile(ratios, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return {"estimate": float(np.median(b) / np.median(a)), "low": float(lo), "high": float(hi)}


def u_by_pairs(a, b):
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)


def exact_tail_enumerate(m, n, u):
    """P(U >= u) by listing every placement of the m first-sample ranks."""
    total = hits = 0
    for ranks in itertools.combinations(range(1, m + n + 1), m):
        uu = sum(ranks) - m * (m + 1) // 2
        total += 1
        hits += uu >= u
    return hits / total


def exact_tail_gaussian_binomial(m, n, u):
    """P(U >= u) from the coefficients of the Gaussian binomial [m+n choose m]_q."""
    poly = [1]
    for i in range(1, m + 1):
        # multiply by (1 - q^(n+i)) then divide by (1 - q^i), exactly.
        k = n + i
        mult = poly + [0] * k
        for j in range(len(poly)):
            mult[j + k] -= poly[j]
        quot = [0] * (len(mult) - i)
        rem = list(mult)
        for j in range(len(quot)):
            quot[j] = rem[j]
            rem[j + i] += rem[j]
            rem[j] = 0
        poly = quot
    total = sum(poly)
    assert total == math.comb(m + n, m)
    return sum(poly[int(u):]) / total


def mann_whitney(a, b):
    na, nb = len(a), len(b)
    u = u_by_pairs(a, b)
    pooled = sorted(a + b)
    counts = {}
    for x in pooled:
        counts[x] = counts.get(x, 0) + 1
    ties = any(c > 1 for c in counts.values())
    u_big = max(u, na * nb - u)
    if not ties and na + nb <= EXACT_MAX_TOTAL:
        if na + nb <= 16:
            tail = exact_tail_enumerate(na, nb, u_big)
            assert math.isclose(tail, exact_tail_gaussian_binomial(na, nb, u_big), rel_tol=1e-12)
        else:
            tail = exact_tail_gaussian_binomial(na, nb, u_big)
        return {"u": u, "p": min(1.0, 2 * tail), "exact": True, "effect": u / (na * nb)}
    n = na + nb
    tie_term = sum(c ** 3 - c for c in counts.values())
    var = na * nb / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0:
        return {"u": u, "p": 1.0, "exact": False, "effect": u / (na * nb)}
    z = (u_big - na * nb / 2 - 0.5) / math.sqrt(var)
    p = min(1.0, 2 * (1 - statistics.NormalDist().cdf(z)) if z < 5 else math.erfc(z / math.sqrt(2)))
    return {"u": u, "p": p, "exact": False, "z": z, "effect": u / (na * nb)}


def main():
    rng = np.random.default_rng(20261130)
    timings30 = [round(float(x), 3) for x in rng.lognormal(mean=math.log(850.0), sigma=0.04, size=30)]
    timings30_slow = [round(float(x), 3) for x in rng.lognormal(mean=math.log(850.0 * 1.1), sigma=0.04, size=30)]
    twenty_a = [round(float(x), 4) for x in rng.normal(100.0, 3.0, size=20)]
    twenty_b = [round(float(x), 4) for x in rng.normal(104.0, 3.0, size=20)]
    sets = {
        "n1": [42.5],
        "n2": [10.0, 12.0],
        "ties": [5.0, 5.0, 5.0, 6.0, 6.0, 7.0, 7.0, 7.0, 7.0, 8.0, 9.0, 9.0, 12.0],
        "all_equal": [3.0, 3.0, 3.0, 3.0],
        "outliers": [10.1, 10.2, 9.9, 10.0, 10.3, 9.8, 10.05, 10.15, 9.95, 10.7, 25.0, 1.0, 10.9],
        "large_offset": [1e9 + x for x in [0.125, 0.25, 0.5, 0.375, 0.0625, 1.0]],
        "timings30": timings30,
        "timings30_slow": timings30_slow,
    }
    out = {"generator": "tools/stats/make_expected.py", "seed": DEFAULT_SEED, "resamples": RESAMPLES,
           "datasets": {}, "mann_whitney": [], "ratio": []}
    for name, xs in sets.items():
        out["datasets"][name] = {
            "values": xs,
            "summary": describe(xs),
            "outliers": outliers(xs),
            "median_ci": bootstrap_median(xs),
        }
    pairs = [
        ("n1_vs_n1", [1.0], [2.0]),
        ("three_vs_two_exact", [1.1, 2.2, 3.3], [4.4, 5.5]),
        ("five_vs_six_exact", [12.1, 11.8, 12.6, 13.0, 12.2], [11.0, 11.5, 11.9, 12.05, 11.2, 11.7]),
        ("twenty_vs_twenty_exact", twenty_a, twenty_b),
        ("ties_asymptotic", sets["ties"], [x + 1.0 for x in sets["ties"]][:10]),
        ("all_equal", [3.0, 3.0, 3.0], [3.0, 3.0]),
        ("thirty_asymptotic", timings30, timings30_slow),
        ("thirty_same", timings30, timings30[::-1]),
    ]
    for name, a, b in pairs:
        out["mann_whitney"].append({"name": name, "a": a, "b": b, **mann_whitney(a, b)})
    for name, a, b in [("ten_percent", timings30, timings30_slow), ("same", timings30, timings30[5:] + timings30[:5]),
                       ("n2", [10.0, 12.0], [11.0, 13.0])]:
        out["ratio"].append({"name": name, "a": a, "b": b, **bootstrap_ratio(a, b)})
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "tests", "data", "statistics", "expected.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", os.path.relpath(path, root), file=sys.stderr)


if __name__ == "__main__":
    main()
