// Mann–Whitney U test (Wilcoxon rank-sum), two-sided.
//
// U is the statistic of the first sample a: U = R_a - n_a (n_a + 1) / 2, with
// R_a the sum of a's ranks in the pooled sample (ties get their average
// rank). U counts the pairs (x in a, y in b) with x > y, plus 1/2 per tie.
// p-value:
//   exact        when there are no ties and n_a + n_b <= kExactMaxTotal: the
//                null distribution of U is counted (all C(n_a+n_b, n_a)
//                arrangements equally likely); p = min(1, 2 P(U >= max(U, U'))),
//                U' = n_a n_b - U.
//   asymptotic   otherwise: normal approximation with tie correction and a
//                continuity correction of 1/2 (scipy.stats.mannwhitneyu's
//                default): sigma^2 = n_a n_b / 12 ((n + 1) - sum(t^3 - t) / (n (n - 1))),
//                z = (max(U, U') - n_a n_b / 2 - 1/2) / sigma, p = min(1, 2 (1 - Phi(z))).
//                When every value is tied (sigma = 0) p = 1.
// effect = U / (n_a n_b): the probability that a value of a exceeds one of b
// (ties count half); 0.5 means no shift.
//
// Errors: InvalidArgument for an empty or non-finite sample.
// Thread safety: pure functions on values.
#pragma once

#include <span>
#include <string_view>

#include "base/result.h"

namespace hipq::coordinator::statistics {

inline constexpr size_t kExactMaxTotal = 40;

struct MannWhitney {
  double u = 0;
  double p = 1;
  double z = 0;        // 0 for the exact method
  double effect = 0.5; // U / (n_a n_b)
  bool exact = false;
  bool ties = false;
  std::string_view method() const { return exact ? "exact" : "asymptotic"; }
};

Result<MannWhitney> mann_whitney_u(std::span<const double> a, std::span<const double> b);

}  // namespace hipq::coordinator::statistics
