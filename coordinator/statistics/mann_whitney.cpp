#include "coordinator/statistics/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "coordinator/statistics/descriptive.h"

namespace hipq::coordinator::statistics {
namespace {

// P(U >= u) under the null for sample sizes m, n and no ties. counts[k] is
// the number of arrangements with U = k, built with the recurrence
// f(m, n, k) = f(m - 1, n, k - n) + f(m, n - 1, k), over n for each m.
// Doubles hold the counts exactly: C(40, 20) < 2^53.
double exact_upper_tail(size_t m, size_t n, double u) {
  const size_t max_u = m * n;
  // row[j][k]: arrangements of i a-values and j b-values with U = k; we keep
  // one i at a time.
  std::vector<std::vector<double>> prev(n + 1, std::vector<double>(max_u + 1, 0.0));
  for (size_t j = 0; j <= n; ++j) prev[j][0] = 1.0;  // i = 0: U = 0, one way
  for (size_t i = 1; i <= m; ++i) {
    std::vector<std::vector<double>> cur(n + 1, std::vector<double>(max_u + 1, 0.0));
    cur[0][0] = 1.0;
    for (size_t j = 1; j <= n; ++j) {
      for (size_t k = 0; k <= i * j; ++k) {
        // The largest value is either an a (it beats all j b-values) or a b.
        double v = cur[j - 1][k];
        if (k >= j) v += prev[j][k - j];
        cur[j][k] = v;
      }
    }
    prev = std::move(cur);
  }
  const std::vector<double>& counts = prev[n];
  double total = 0, tail = 0;
  const auto u_int = static_cast<size_t>(std::llround(u));
  for (size_t k = 0; k <= max_u; ++k) {
    total += counts[k];
    if (k >= u_int) tail += counts[k];
  }
  return tail / total;
}

}  // namespace

Result<MannWhitney> mann_whitney_u(std::span<const double> a, std::span<const double> b) {
  HIPQ_RETURN_IF_ERROR(check_sample(a, "Mann-Whitney (first sample)"));
  HIPQ_RETURN_IF_ERROR(check_sample(b, "Mann-Whitney (second sample)"));
  const size_t na = a.size(), nb = b.size(), n = na + nb;
  std::vector<std::pair<double, int>> pooled;
  pooled.reserve(n);
  for (double x : a) pooled.emplace_back(x, 0);
  for (double x : b) pooled.emplace_back(x, 1);
  std::sort(pooled.begin(), pooled.end(), [](const auto& l, const auto& r) { return l.first < r.first; });

  double rank_sum_a = 0, tie_term = 0;
  bool ties = false;
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && pooled[j].first == pooled[i].first) ++j;
    const double t = static_cast<double>(j - i);
    const double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (size_t k = i; k < j; ++k) {
      if (pooled[k].second == 0) rank_sum_a += avg_rank;
    }
    if (j - i > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    i = j;
  }
  MannWhitney r;
  const double dna = static_cast<double>(na), dnb = static_cast<double>(nb), dn = static_cast<double>(n);
  r.u = rank_sum_a - dna * (dna + 1.0) / 2.0;
  r.effect = r.u / (dna * dnb);
  r.ties = ties;
  const double u_big = std::max(r.u, dna * dnb - r.u);
  if (!ties && n <= kExactMaxTotal) {
    r.exact = true;
    r.p = std::min(1.0, 2.0 * exact_upper_tail(na, nb, u_big));
    return r;
  }
  const double var = dna * dnb / 12.0 * ((dn + 1.0) - tie_term / (dn * (dn - 1.0)));
  if (!(var > 0.0)) {
    r.p = 1.0;
    return r;
  }
  r.z = (u_big - dna * dnb / 2.0 - 0.5) / std::sqrt(var);
  // 2 (1 - Phi(z)) = erfc(z / sqrt 2), accurate in the far tail.
  r.p = std::min(1.0, std::erfc(r.z / std::sqrt(2.0)));
  return r;
}

}  // namespace hipq::coordinator::statistics
