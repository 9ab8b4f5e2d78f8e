#include "coordinator/statistics/descriptive.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace hipq::coordinator::statistics {

Status check_sample(std::span<const double> values, const char* what) {
  if (values.empty()) {
    return Status::InvalidArgument(std::string(what) + ": no values (a statistic needs at least one sample)");
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return Status::InvalidArgument(std::string(what) + ": value " + std::to_string(i) +
                                     " is not finite; drop or fix that sample");
    }
  }
  return Status::Ok();
}

double quantile_sorted(std::span<const double> sorted, double q) {
  const size_t n = sorted.size();
  if (n == 1) return sorted[0];
  const double h = static_cast<double>(n - 1) * q;
  const double lo_f = std::floor(h);
  const size_t lo = static_cast<size_t>(lo_f);
  if (lo + 1 >= n) return sorted[n - 1];
  const double frac = h - lo_f;
  // numpy's "linear" lerp; written as a + frac*(b-a) like numpy to match its
  // rounding on equal neighbours.
  return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

Result<double> quantile(std::span<const double> values, double q) {
  HIPQ_RETURN_IF_ERROR(check_sample(values, "quantile"));
  if (!(q >= 0.0 && q <= 1.0)) {
    return Status::InvalidArgument("quantile: q = " + std::to_string(q) + " is outside [0, 1]");
  }
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  return quantile_sorted(sorted, q);
}

double median_in_place(std::vector<double>& v) {
  const size_t n = v.size();
  const size_t hi = n / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(hi), v.end());
  const double upper = v[hi];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(hi));
  return lower + 0.5 * (upper - lower);
}

Result<Summary> summarize(std::span<const double> values) {
  HIPQ_RETURN_IF_ERROR(check_sample(values, "summary"));
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  Summary s;
  s.n = sorted.size();
  // Two-pass mean and variance: timings share a large offset, and the naive
  // sum-of-squares formula loses digits to it.
  double sum = 0;
  for (double x : sorted) sum += x;
  s.mean = sum / static_cast<double>(s.n);
  if (s.n >= 2) {
    double ss = 0;
    for (double x : sorted) ss += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(ss / static_cast<double>(s.n - 1));
  } else {
    s.sd = std::numeric_limits<double>::quiet_NaN();
  }
  s.min = sorted.front();
  s.max = sorted.back();
  s.p50 = quantile_sorted(sorted, 0.50);
  s.p90 = quantile_sorted(sorted, 0.90);
  s.p95 = quantile_sorted(sorted, 0.95);
  s.p99 = quantile_sorted(sorted, 0.99);
  return s;
}

}  // namespace hipq::coordinator::statistics
