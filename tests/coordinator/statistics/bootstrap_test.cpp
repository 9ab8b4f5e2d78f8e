#include "coordinator/statistics/bootstrap.h"

#include <gtest/gtest.h>

#include <cmath>

#include "coordinator/statistics/random.h"
#include "tests/coordinator/statistics/expected_data.h"

namespace hipq::coordinator::statistics {
namespace {

using testing::expect_close;
using testing::values_of;

TEST(SplitMix64Test, MatchesTheReferenceSequence) {
  // First outputs of SplitMix64 seeded with 0 (Vigna's reference splitmix64.c).
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(rng.next(), 0x06C45D188009454FULL);
}

TEST(BootstrapTest, MedianIntervalMatchesIndependentReimplementation) {
  const auto expected = testing::load_expected();
  ASSERT_EQ(expected["resamples"].get<int>(), kDefaultResamples);
  ASSERT_EQ(expected["seed"].get<uint64_t>(), kDefaultSeed);
  for (const auto& [name, set] : expected["datasets"].items()) {
    SCOPED_TRACE(name);
    auto iv = bootstrap_median_ci(values_of(set["values"]));
    ASSERT_TRUE(iv.ok()) << iv.status().ToString();
    const auto& e = set["median_ci"];
    expect_close(e["estimate"], iv->estimate, "estimate");
    expect_close(e["low"], iv->low, "low");
    expect_close(e["high"], iv->high, "high");
    EXPECT_LE(iv->low, iv->estimate);
    EXPECT_GE(iv->high, iv->estimate);
  }
}

TEST(BootstrapTest, RatioIntervalMatchesIndependentReimplementation) {
  const auto expected = testing::load_expected();
  for (const auto& r : expected["ratio"]) {
    SCOPED_TRACE(r["name"].get<std::string>());
    auto iv = bootstrap_ratio_of_medians_ci(values_of(r["a"]), values_of(r["b"]));
    ASSERT_TRUE(iv.ok()) << iv.status().ToString();
    expect_close(r["estimate"], iv->estimate, "estimate");
    expect_close(r["low"], iv->low, "low");
    expect_close(r["high"], iv->high, "high");
  }
}

TEST(BootstrapTest, SameSeedSameIntervalOtherSeedDifferent) {
  std::vector<double> xs;
  for (int i = 0; i < 25; ++i) xs.push_back(100.0 + std::sin(i) * 7.0);
  auto a = bootstrap_median_ci(xs, {.resamples = 500, .seed = 1});
  auto b = bootstrap_median_ci(xs, {.resamples = 500, .seed = 1});
  auto c = bootstrap_median_ci(xs, {.resamples = 500, .seed = 2});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->low, b->low);
  EXPECT_EQ(a->high, b->high);
  EXPECT_TRUE(a->low != c->low || a->high != c->high);
}

TEST(BootstrapTest, IntervalCoversTheTrueMedianAboutNinetyFivePercentOfTheTime) {
  // Uniform(0, 1) samples of 41: true median 0.5. The percentile bootstrap of
  // a median is known to cover close to its nominal level at this size.
  SplitMix64 data_rng(12345);
  int covered = 0;
  const int trials = 200;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> xs(41);
    for (double& x : xs) x = static_cast<double>(data_rng.next() >> 11) / 9007199254740992.0;
    auto iv = bootstrap_median_ci(xs, {.resamples = 400, .seed = static_cast<uint64_t>(t)});
    ASSERT_TRUE(iv.ok());
    covered += (iv->low <= 0.5 && 0.5 <= iv->high);
  }
  EXPECT_GE(covered, trials * 88 / 100);
  EXPECT_LE(covered, trials * 99 / 100);
}

TEST(BootstrapTest, RejectsBadOptionsAndZeroBaseline) {
  const std::vector<double> xs{1, 2, 3};
  EXPECT_EQ(bootstrap_median_ci(xs, {.resamples = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bootstrap_median_ci(xs, {.level = 1.0}).status().code(), StatusCode::kInvalidArgument);
  const std::vector<double> zeros{0, 0, 0};
  EXPECT_EQ(bootstrap_ratio_of_medians_ci(zeros, xs).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::coordinator::statistics

namespace hipq::coordinator::statistics {
namespace {

TEST(OrderStatisticCiTest, MatchesTheRankFormulaAndAgreesWithTheBootstrapOnLargeSamples) {
  // 0..99: n = 100, z = 1.959964, half width 9.80 → ranks floor(40.2) = 40 and
  // ceil(60.8) = 61 (1-based) → values 39 and 60.
  std::vector<double> xs(100);
  for (int i = 0; i < 100; ++i) xs[i] = 99 - i;
  auto iv = order_statistic_median_ci(xs);
  ASSERT_TRUE(iv.ok());
  EXPECT_DOUBLE_EQ(iv->low, 39.0);
  EXPECT_DOUBLE_EQ(iv->high, 60.0);
  EXPECT_DOUBLE_EQ(iv->estimate, 49.5);
  SplitMix64 rng(99);
  std::vector<double> big(5000);
  for (double& x : big) x = 100.0 + static_cast<double>(rng.next() >> 11) / 9007199254740992.0;
  auto os = order_statistic_median_ci(big);
  auto bs = bootstrap_median_ci(big, {.resamples = 500, .level = 0.95, .seed = 1});
  ASSERT_TRUE(os.ok() && bs.ok());
  EXPECT_NEAR(os->low, bs->low, 0.01);
  EXPECT_NEAR(os->high, bs->high, 0.01);
  const char* method = nullptr;
  std::vector<double> huge(kBootstrapMaxN + 1, 1.0);
  auto m = median_ci(huge, {}, &method);
  ASSERT_TRUE(m.ok());
  EXPECT_STREQ(method, "order statistic");
  auto small = median_ci(xs, {.resamples = 10, .level = 0.95, .seed = 1}, &method);
  ASSERT_TRUE(small.ok());
  EXPECT_STREQ(method, "bootstrap");
}

}  // namespace
}  // namespace hipq::coordinator::statistics
