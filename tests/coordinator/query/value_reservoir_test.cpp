// The value reservoir behind bounded `hipq stats` and report: exact below its
// cap (the numbers of a small batch do not change), a deterministic uniform
// sample with exact moments past it.
#include "coordinator/query/value_reservoir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "coordinator/query/run_stats.h"

namespace hipq::coordinator::query {
namespace {

using nlohmann::json;

// 0.5, 1.5, … in a scrambled order (a fixed permutation of 0..n-1).
std::vector<double> stream(size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7919) % n) + 0.5;
  return v;
}

TEST(ValueReservoirTest, UpToTheCapItKeepsEveryValueInArrivalOrder) {
  ValueReservoir r(100);
  const auto v = stream(100);
  for (double x : v) r.add(x);
  EXPECT_TRUE(r.exact());
  EXPECT_EQ(r.values(), v);
  EXPECT_EQ(r.count(), 100u);
}

TEST(ValueReservoirTest, PastTheCapASampleOfCapValuesWithExactCountSumMinMaxMeanSd) {
  const size_t n = 50000;
  ValueReservoir r(1000);
  const auto v = stream(n);
  double sum = 0;
  for (double x : v) {
    r.add(x);
    sum += x;
  }
  EXPECT_FALSE(r.exact());
  ASSERT_EQ(r.values().size(), 1000u);
  EXPECT_EQ(r.count(), n);
  EXPECT_EQ(r.sum(), sum);
  EXPECT_EQ(r.min(), 0.5);
  EXPECT_EQ(r.max(), n - 0.5);
  EXPECT_NEAR(r.mean(), n / 2.0, 1e-6);
  EXPECT_NEAR(r.sd(), std::sqrt((static_cast<double>(n) * n - 1) / 12.0 * n / (n - 1)), 1e-3);
  // A sample of the whole stream, not its first values: late values are in it.
  const std::vector<double> first(v.begin(), v.begin() + 1000);
  EXPECT_NE(r.values(), first);
  std::vector<double> s = r.values();
  std::sort(s.begin(), s.end());
  EXPECT_NEAR(s[500], n / 2.0, n * 0.05) << "the sample's median is near the stream's";
}

TEST(ValueReservoirTest, TheSameStreamGivesTheSameSample) {
  ValueReservoir a(500), b(500), other_seed(500, 7);
  for (double x : stream(20000)) {
    a.add(x);
    b.add(x);
    other_seed.add(x);
  }
  EXPECT_EQ(a.values(), b.values());
  EXPECT_NE(a.values(), other_seed.values());
}

TEST(ValueReservoirTest, SummaryBelowTheCapIsTheExactOne) {
  StatsOptions o;
  o.resamples = 200;
  ValueReservoir r(1000);
  const auto v = stream(999);
  for (double x : v) r.add(x);
  auto from_reservoir = summary_json(r, o);
  auto exact = summary_json(std::span<const double>(v), o);
  ASSERT_TRUE(from_reservoir.ok() && exact.ok());
  EXPECT_EQ(*from_reservoir, *exact);
  EXPECT_FALSE(from_reservoir->contains("sample"));
}

TEST(ValueReservoirTest, SummaryPastTheCapSaysItIsASampleAndKeepsNMinMaxExact) {
  StatsOptions o;
  o.resamples = 200;
  ValueReservoir r(1000);
  for (double x : stream(30000)) r.add(x);
  auto s = summary_json(r, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)["n"], 30000);
  EXPECT_EQ((*s)["min"], 0.5);
  EXPECT_EQ((*s)["max"], 29999.5);
  EXPECT_EQ((*s)["sample"], (json{{"values", 1000}, {"of", 30000}}));
  EXPECT_NEAR((*s)["p50"].get<double>(), 15000, 1500);
}

}  // namespace
}  // namespace hipq::coordinator::query
