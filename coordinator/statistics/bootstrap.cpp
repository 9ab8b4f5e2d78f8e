#include "coordinator/statistics/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "coordinator/statistics/descriptive.h"
#include "coordinator/statistics/random.h"

namespace hipq::coordinator::statistics {
namespace {

Status check_options(const BootstrapOptions& o) {
  if (o.resamples < 1) {
    return Status::InvalidArgument("bootstrap: resamples = " + std::to_string(o.resamples) + "; use at least 1");
  }
  if (!(o.level > 0.0 && o.level < 1.0)) {
    return Status::InvalidArgument("bootstrap: confidence level " + std::to_string(o.level) +
                                   " is outside (0, 1); e.g. 0.95");
  }
  return Status::Ok();
}

double resampled_median(std::span<const double> values, SplitMix64& rng, std::vector<double>& scratch) {
  scratch.resize(values.size());
  for (double& x : scratch) x = values[rng.below(values.size())];
  return median_in_place(scratch);
}

Interval percentile_interval(double estimate, std::vector<double>& stats, double level) {
  std::sort(stats.begin(), stats.end());
  Interval iv;
  iv.estimate = estimate;
  iv.low = quantile_sorted(stats, (1.0 - level) / 2.0);
  iv.high = quantile_sorted(stats, (1.0 + level) / 2.0);
  return iv;
}

}  // namespace

Result<Interval> bootstrap_median_ci(std::span<const double> values, const BootstrapOptions& options) {
  HIPQ_RETURN_IF_ERROR(check_sample(values, "bootstrap median"));
  HIPQ_RETURN_IF_ERROR(check_options(options));
  std::vector<double> scratch(values.begin(), values.end());
  const double estimate = median_in_place(scratch);
  SplitMix64 rng(options.seed);
  std::vector<double> stats;
  stats.reserve(static_cast<size_t>(options.resamples));
  for (int r = 0; r < options.resamples; ++r) stats.push_back(resampled_median(values, rng, scratch));
  return percentile_interval(estimate, stats, options.level);
}

namespace {
// The z with P(|N(0,1)| <= z) = level, by bisection on erf (monotone).
double two_sided_z(double level) {
  double lo = 0.0, hi = 40.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (std::erf(mid / std::sqrt(2.0)) < level) lo = mid; else hi = mid;
  }
  return 0.5 * (lo + hi);
}
}  // namespace

Result<Interval> order_statistic_median_ci(std::span<const double> values, double level) {
  HIPQ_RETURN_IF_ERROR(check_sample(values, "median interval"));
  if (!(level > 0.0 && level < 1.0)) {
    return Status::InvalidArgument("median interval: confidence level " + std::to_string(level) + " is outside (0, 1)");
  }
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const double n = static_cast<double>(sorted.size());
  const double half_width = two_sided_z(level) * std::sqrt(n) / 2.0;
  const double j = std::clamp(std::floor(n / 2.0 - half_width), 1.0, n);
  const double k = std::clamp(std::ceil(1.0 + n / 2.0 + half_width), 1.0, n);
  Interval iv;
  iv.estimate = quantile_sorted(sorted, 0.5);
  iv.low = sorted[static_cast<size_t>(j) - 1];
  iv.high = sorted[static_cast<size_t>(k) - 1];
  return iv;
}

Result<Interval> median_ci(std::span<const double> values, const BootstrapOptions& options, const char** method) {
  if (values.size() > kBootstrapMaxN) {
    if (method) *method = "order statistic";
    return order_statistic_median_ci(values, options.level);
  }
  if (method) *method = "bootstrap";
  return bootstrap_median_ci(values, options);
}

Result<Interval> bootstrap_ratio_of_medians_ci(std::span<const double> a, std::span<const double> b,
                                               const BootstrapOptions& options) {
  HIPQ_RETURN_IF_ERROR(check_sample(a, "ratio of medians (baseline)"));
  HIPQ_RETURN_IF_ERROR(check_sample(b, "ratio of medians (candidate)"));
  HIPQ_RETURN_IF_ERROR(check_options(options));
  std::vector<double> scratch_a(a.begin(), a.end());
  std::vector<double> scratch_b(b.begin(), b.end());
  const double med_a = median_in_place(scratch_a);
  const double med_b = median_in_place(scratch_b);
  if (med_a == 0.0) {
    return Status::InvalidArgument("ratio of medians: the baseline median is 0, so the ratio is undefined");
  }
  SplitMix64 rng(options.seed);
  std::vector<double> stats;
  stats.reserve(static_cast<size_t>(options.resamples));
  for (int r = 0; r < options.resamples; ++r) {
    const double ma = resampled_median(a, rng, scratch_a);
    const double mb = resampled_median(b, rng, scratch_b);
    // A resample of a baseline holding zeros can have median 0; such a draw
    // has no finite ratio, and dropping it is the least biased choice.
    if (ma != 0.0) stats.push_back(mb / ma);
  }
  if (stats.empty()) {
    return Status::InvalidArgument("ratio of medians: every resampled baseline median was 0");
  }
  return percentile_interval(med_b / med_a, stats, options.level);
}

}  // namespace hipq::coordinator::statistics
