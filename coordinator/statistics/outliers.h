// Outlier classification with Tukey's fences, as criterion.rs and hyperfine
// report it.
//
// q1, q3 = the 0.25 and 0.75 quantiles (numpy-linear, descriptive.h);
// iqr = q3 - q1. A value is
//   severe low   if x < q1 - 3.0 * iqr
//   mild low     if q1 - 3.0 * iqr <= x < q1 - 1.5 * iqr
//   mild high    if q3 + 1.5 * iqr < x <= q3 + 3.0 * iqr
//   severe high  if x > q3 + 3.0 * iqr
// and not an outlier otherwise. Outliers are flagged, never dropped: the
// statistics are computed on every sample.
//
// Errors: InvalidArgument for an empty or non-finite sample.
// Thread safety: pure functions on values.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hipq::coordinator::statistics {

enum class OutlierClass { kNone, kLowSevere, kLowMild, kHighMild, kHighSevere };

// "none" | "low severe" | "low mild" | "high mild" | "high severe".
std::string_view outlier_class_name(OutlierClass c);

struct Fences {
  double q1 = 0, q3 = 0, iqr = 0;
  double low_severe = 0, low_mild = 0, high_mild = 0, high_severe = 0;
};

struct OutlierReport {
  Fences fences;
  std::vector<OutlierClass> flags;  // one per input value, in input order
  size_t low_severe = 0, low_mild = 0, high_mild = 0, high_severe = 0;
  size_t total() const { return low_severe + low_mild + high_mild + high_severe; }
};

Result<OutlierReport> classify_outliers(std::span<const double> values);

}  // namespace hipq::coordinator::statistics
