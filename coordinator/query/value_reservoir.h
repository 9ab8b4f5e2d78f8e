// Value reservoir: a bounded sample of a stream of values, so statistics over
// a million runs are computed in fixed memory.
//
// The first `cap` values are kept exactly, in arrival order: below the cap a
// quantile, a bootstrap interval or an outlier count over values() is the one
// computed over every value. Past the cap it is a uniform random sample of
// `cap` values (Vitter's algorithm R: value i, counted from 0, replaces slot
// below(i + 1) when that is under cap), drawn with SplitMix64 from a fixed
// seed, so the same stream gives the same sample on every run and platform.
// Count, sum, min, max, mean and standard deviation are exact over every
// value whatever the cap (sum added in arrival order; mean and sd by Welford's
// update past the cap).
//
// Thread safety: none (one reservoir per thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "coordinator/statistics/random.h"

namespace hipq::coordinator::query {

// Values kept per group and phase by `hipq stats` and the report
// (docs/statistics.md, "Bounded memory").
inline constexpr size_t kReservoirCap = 10000;
inline constexpr uint64_t kReservoirSeed = 0x6869707172657376ULL;  // "hipqresv"

class ValueReservoir {
 public:
  explicit ValueReservoir(size_t cap = kReservoirCap, uint64_t seed = kReservoirSeed) : cap_(cap), rng_(seed) {}

  void add(double v);

  // Every value seen so far (count, sum…), and whether values() holds them all.
  size_t count() const { return n_; }
  bool exact() const { return n_ <= cap_; }
  size_t cap() const { return cap_; }
  double sum() const { return sum_; }
  double min() const { return min_; }
  double max() const { return max_; }
  double mean() const { return mean_; }
  // Sample standard deviation (n - 1); NaN when count() < 2.
  double sd() const;
  // The kept values: every value in arrival order while exact(), else the sample.
  const std::vector<double>& values() const { return values_; }

 private:
  size_t cap_;
  statistics::SplitMix64 rng_;
  std::vector<double> values_;
  size_t n_ = 0;
  double sum_ = 0;
  double min_ = std::numeric_limits<double>::infinity();
  double max_ = -std::numeric_limits<double>::infinity();
  double mean_ = 0, m2_ = 0;  // Welford
};

}  // namespace hipq::coordinator::query
