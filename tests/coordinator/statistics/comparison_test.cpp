#include "coordinator/statistics/comparison.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "coordinator/statistics/random.h"

namespace hipq::coordinator::statistics {
namespace {

// Synthetic timings: base * (1 + shift) with ~3% multiplicative noise
// (sum of uniforms, roughly normal) and an occasional slow outlier, as GPU
// step timings look.
std::vector<double> synthetic(uint64_t seed, int n, double base, double shift) {
  SplitMix64 rng(seed);
  std::vector<double> xs;
  for (int i = 0; i < n; ++i) {
    double u = 0;
    for (int k = 0; k < 4; ++k) u += static_cast<double>(rng.next() >> 11) / 9007199254740992.0;
    double x = base * (1.0 + shift) * (1.0 + 0.03 * (u - 2.0) * 1.7);
    if (rng.below(20) == 0) x *= 1.25;
    xs.push_back(x);
  }
  return xs;
}

TEST(ComparisonTest, TenPercentSlowerIsSlower) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE(seed);
    auto a = synthetic(seed, 30, 1000.0, 0.0);
    auto b = synthetic(seed + 100, 30, 1000.0, 0.10);
    auto c = compare_samples(a, b);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->verdict, Verdict::kSlower) << c->reason;
    EXPECT_NEAR(c->ratio.estimate, 1.10, 0.03);
    EXPECT_LT(c->ratio.low, 1.10);
    EXPECT_GT(c->ratio.high, 1.10);
    EXPECT_LT(c->test.p, 1e-4);
  }
}

TEST(ComparisonTest, TenPercentFasterIsFaster) {
  auto a = synthetic(7, 30, 1000.0, 0.0);
  auto b = synthetic(8, 30, 1000.0, -0.10);
  auto c = compare_samples(a, b);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->verdict, Verdict::kFaster) << c->reason;
  EXPECT_NEAR(c->ratio.estimate, 0.90, 0.03);
}

TEST(ComparisonTest, NoShiftIsNoChange) {
  int no_change = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto a = synthetic(seed, 30, 1000.0, 0.0);
    auto b = synthetic(seed + 1000, 30, 1000.0, 0.0);
    auto c = compare_samples(a, b);
    ASSERT_TRUE(c.ok());
    no_change += c->verdict == Verdict::kNoChange;
  }
  // The noise band makes a false alarm much rarer than alpha: expect none.
  EXPECT_EQ(no_change, 20);
}

TEST(ComparisonTest, ShiftInsideNoiseBandIsNoChange) {
  auto a = synthetic(3, 200, 1000.0, 0.0);
  auto b = synthetic(4, 200, 1000.0, 0.01);
  CompareOptions wide;
  wide.noise_threshold = 0.05;
  auto c = compare_samples(a, b, wide);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->verdict, Verdict::kNoChange) << c->reason;
}

TEST(ComparisonTest, TooFewSamplesIsFailedPrecondition) {
  const std::vector<double> a{1.0}, b{1.0, 2.0};
  auto c = compare_samples(a, b);
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("run more repeats"), std::string::npos);
}

TEST(ComparisonTest, RejectsBadOptions) {
  const std::vector<double> a{1.0, 2.0}, b{1.0, 2.0};
  CompareOptions zero_alpha;
  zero_alpha.alpha = 0.0;
  EXPECT_EQ(compare_samples(a, b, zero_alpha).status().code(), StatusCode::kInvalidArgument);
  CompareOptions negative_noise;
  negative_noise.noise_threshold = -0.1;
  EXPECT_EQ(compare_samples(a, b, negative_noise).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::coordinator::statistics
