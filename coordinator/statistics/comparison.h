// Comparison of two samples of timings: "did B get faster or slower than A?"
//
// A is the baseline, B the candidate. The effect is the ratio of medians
// r = median(B) / median(A) with its bootstrap interval (bootstrap.h); the
// significance test is Mann–Whitney U (mann_whitney.h). Verdict, criterion.rs
// style:
//   slower     p < alpha and the whole interval is above 1 + noise_threshold
//   faster     p < alpha and the whole interval is below 1 - noise_threshold
//   no change  otherwise (not significant, or significant but the interval
//              reaches into the noise band)
// Defaults: alpha 0.05, noise_threshold 0.02 (2%), 2000 resamples, level 0.95.
// Each sample needs at least kMinSamplesPerSide values: fewer cannot reach
// significance and is reported as FailedPrecondition.
//
// Errors: InvalidArgument for non-finite values or bad options;
// FailedPrecondition for too few samples.
// Thread safety: pure functions on values.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "coordinator/statistics/bootstrap.h"
#include "coordinator/statistics/mann_whitney.h"

namespace hipq::coordinator::statistics {

inline constexpr size_t kMinSamplesPerSide = 2;

enum class Verdict { kNoChange, kFaster, kSlower };
std::string_view verdict_name(Verdict v);  // "no change" | "faster" | "slower"

struct CompareOptions {
  double alpha = 0.05;
  double noise_threshold = 0.02;
  BootstrapOptions bootstrap;
};

struct Comparison {
  size_t n_a = 0, n_b = 0;
  double median_a = 0, median_b = 0;
  Interval ratio;        // median(B) / median(A) and its interval
  MannWhitney test;      // U of B against A (effect > 0.5: B tends to be larger)
  Verdict verdict = Verdict::kNoChange;
  std::string reason;    // one sentence explaining the verdict
};

Result<Comparison> compare_samples(std::span<const double> a, std::span<const double> b,
                                   const CompareOptions& options = {});

}  // namespace hipq::coordinator::statistics
