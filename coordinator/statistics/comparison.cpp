#include "coordinator/statistics/comparison.h"

#include <cstdio>
#include <string>

#include "coordinator/statistics/descriptive.h"

namespace hipq::coordinator::statistics {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kNoChange: return "no change";
    case Verdict::kFaster: return "faster";
    case Verdict::kSlower: return "slower";
  }
  return "no change";
}

namespace {
std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}
}  // namespace

Result<Comparison> compare_samples(std::span<const double> a, std::span<const double> b,
                                   const CompareOptions& options) {
  if (!(options.alpha > 0.0 && options.alpha < 1.0)) {
    return Status::InvalidArgument("compare: alpha " + std::to_string(options.alpha) + " is outside (0, 1)");
  }
  if (!(options.noise_threshold >= 0.0 && options.noise_threshold < 1.0)) {
    return Status::InvalidArgument("compare: noise threshold " + std::to_string(options.noise_threshold) +
                                   " is outside [0, 1); e.g. 0.02 for 2%");
  }
  if (a.size() < kMinSamplesPerSide || b.size() < kMinSamplesPerSide) {
    return Status::FailedPrecondition("compare: need at least " + std::to_string(kMinSamplesPerSide) +
                                      " samples on each side, have " + std::to_string(a.size()) + " (A) and " +
                                      std::to_string(b.size()) + " (B); run more repeats");
  }
  Comparison c;
  c.n_a = a.size();
  c.n_b = b.size();
  HIPQ_ASSIGN_OR_RETURN(c.ratio, bootstrap_ratio_of_medians_ci(a, b, options.bootstrap));
  HIPQ_ASSIGN_OR_RETURN(c.test, mann_whitney_u(b, a));
  HIPQ_ASSIGN_OR_RETURN(c.median_a, quantile(a, 0.5));
  HIPQ_ASSIGN_OR_RETURN(c.median_b, quantile(b, 0.5));

  const double thr = options.noise_threshold;
  const bool significant = c.test.p < options.alpha;
  if (significant && c.ratio.low > 1.0 + thr) {
    c.verdict = Verdict::kSlower;
    c.reason = fmt("B/A = %.4f [%.4f, %.4f] lies above 1 + %.3g", c.ratio.estimate, c.ratio.low, c.ratio.high,
                   thr);
  } else if (significant && c.ratio.high < 1.0 - thr) {
    c.verdict = Verdict::kFaster;
    c.reason = fmt("B/A = %.4f [%.4f, %.4f] lies below 1 - %.3g", c.ratio.estimate, c.ratio.low, c.ratio.high, thr);
  } else if (significant) {
    c.verdict = Verdict::kNoChange;
    c.reason = fmt("significant, but B/A = %.4f [%.4f, %.4f] reaches into the noise band +/- %.3g",
                   c.ratio.estimate, c.ratio.low, c.ratio.high, thr);
  } else {
    c.verdict = Verdict::kNoChange;
    c.reason = fmt("not significant (p = %.3g >= alpha %.3g); B/A = %.4f", c.test.p, options.alpha, c.ratio.estimate);
  }
  if (c.verdict != Verdict::kNoChange) c.reason += fmt(", p = %.3g", c.test.p);
  return c;
}

}  // namespace hipq::coordinator::statistics
