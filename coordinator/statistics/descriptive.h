// Descriptive statistics of one sample of timings (or any real values).
//
// Quantile definition: linear interpolation between closest ranks, the
// default of numpy.percentile / numpy.quantile ("linear", Hyndman & Fan type 7):
// for sorted x[0..n-1] and q in [0,1], h = (n-1)*q,
// Q(q) = x[floor(h)] + (h - floor(h)) * (x[floor(h)+1] - x[floor(h)]).
// With n = 1 every quantile is the single value.
// sd is the sample standard deviation (divisor n-1, as Python's
// statistics.stdev and numpy.std(ddof=1)); it is NaN when n < 2.
//
// Errors: InvalidArgument for an empty sample, a non-finite value, or q
// outside [0, 1].
// Thread safety: pure functions on values.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "base/result.h"

namespace hipq::coordinator::statistics {

struct Summary {
  size_t n = 0;
  double mean = 0;
  double sd = 0;  // NaN when n < 2
  double min = 0;
  double p50 = 0;
  double p90 = 0;
  double p95 = 0;
  double p99 = 0;
  double max = 0;
};

// Quantile q of an already sorted, non-empty sample (no checks; the caller
// guarantees sorted ascending and 0 <= q <= 1).
double quantile_sorted(std::span<const double> sorted, double q);

// Quantile q of any sample (copies and sorts).
Result<double> quantile(std::span<const double> values, double q);

// The median (quantile 0.5) computed in O(n) on a scratch copy the caller
// owns; `scratch` is reordered. Non-empty input required (no checks).
double median_in_place(std::vector<double>& scratch);

// n, mean, sample sd, min, p50/p90/p95/p99, max.
Result<Summary> summarize(std::span<const double> values);

// InvalidArgument naming `what` when values is empty or holds NaN/Inf.
Status check_sample(std::span<const double> values, const char* what);

}  // namespace hipq::coordinator::statistics
