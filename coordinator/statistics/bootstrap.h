// Bootstrap confidence intervals (percentile method) for the median of one
// sample and for the ratio of medians of two samples.
//
// Procedure (reproducible; tools/stats/make_expected.py mirrors it):
//   rng = SplitMix64(seed)  (coordinator/statistics/random.h)
//   repeat `resamples` times:
//     one sample:  draw n indices with rng.below(n); statistic = median.
//     two samples: draw n_a indices into A, then n_b indices into B;
//                  statistic = median(B*) / median(A*).
//   interval = the (1-level)/2 and (1+level)/2 quantiles (numpy-linear, see
//   descriptive.h) of the resampled statistics.
// Defaults: 2000 resamples, level 0.95, seed kDefaultSeed. With n = 1 the
// median interval is [x, x].
//
// Errors: InvalidArgument for an empty or non-finite sample, resamples < 1,
// level outside (0, 1), or a baseline median of zero (ratio undefined).
// Thread safety: pure functions on values.
#pragma once

#include <cstdint>
#include <span>

#include "base/result.h"

namespace hipq::coordinator::statistics {

inline constexpr uint64_t kDefaultSeed = 0x6869707153544154ULL;  // "hipqSTAT"
inline constexpr int kDefaultResamples = 2000;

struct BootstrapOptions {
  int resamples = kDefaultResamples;
  double level = 0.95;
  uint64_t seed = kDefaultSeed;
};

struct Interval {
  double estimate = 0;  // the statistic on the original sample(s)
  double low = 0;
  double high = 0;
};

// Median of `values` with its bootstrap interval.
Result<Interval> bootstrap_median_ci(std::span<const double> values, const BootstrapOptions& options = {});

// Samples above this size get the order-statistic interval instead of the
// bootstrap (median_ci): the bootstrap costs resamples × n draws, and at this
// size the two agree closely.
inline constexpr size_t kBootstrapMaxN = 20000;

// Distribution-free interval of the median from order statistics: with
// z the two-sided normal quantile of `level`, the sorted values at 1-based
// ranks floor(n/2 - z sqrt(n)/2) and ceil(1 + n/2 + z sqrt(n)/2), clamped
// to [1, n] (the normal approximation of the binomial, Conover 1999).
Result<Interval> order_statistic_median_ci(std::span<const double> values, double level = 0.95);

// The median interval hipq reports: bootstrap_median_ci for n <= kBootstrapMaxN,
// else order_statistic_median_ci. `method` is set to "bootstrap" or "order statistic".
Result<Interval> median_ci(std::span<const double> values, const BootstrapOptions& options, const char** method);

// median(b) / median(a) with its bootstrap interval: > 1 means b is larger
// (for timings: slower) than the baseline a.
Result<Interval> bootstrap_ratio_of_medians_ci(std::span<const double> a, std::span<const double> b,
                                               const BootstrapOptions& options = {});

}  // namespace hipq::coordinator::statistics
