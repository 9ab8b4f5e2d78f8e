#include "kernels/cpu/ops.h"

#include <limits>

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;

TEST(CpuParitySums, SumsByHand) {
  auto a = make({3}, {1, 2, 3});
  auto b = make({3}, {1, 0, 5});
  auto r = cpu::parity_sums(a.t, b.t);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->dot, 16);
  EXPECT_DOUBLE_EQ(r->norm_a2, 14);
  EXPECT_DOUBLE_EQ(r->norm_b2, 26);
  EXPECT_DOUBLE_EQ(r->sum_sq_diff, 8);
  EXPECT_DOUBLE_EQ(r->max_abs_diff, 2);
  EXPECT_EQ(r->count, 3);
  EXPECT_EQ(r->nonfinite_a, 0);
}

TEST(CpuParitySums, NonFiniteElementsAreCountedAndLeftOut) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto a = make({4}, {nan, 1, 2, 3});
  auto b = make({4}, {1, inf, 2, 4});
  auto r = cpu::parity_sums(a.t, b.t);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->nonfinite_a, 1);
  EXPECT_EQ(r->nonfinite_b, 1);
  EXPECT_DOUBLE_EQ(r->dot, 2 * 2 + 3 * 4);
  EXPECT_DOUBLE_EQ(r->max_abs_diff, 1);
  EXPECT_EQ(r->count, 4);
}

TEST(CpuParitySums, AccumulatesInDoublePrecision) {
  // 1e8 + many small values: fp32 accumulation would lose them.
  std::vector<float> v(1001, 1.0f);
  v[0] = 1e8f;
  auto a = make({1001}, v);
  auto ones = make({1001}, {1});
  auto r = cpu::parity_sums(a.t, ones.t);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->dot, 1e8 + 1000);
}

TEST(CpuParitySums, ShapeMismatchIsRejected) {
  auto a = make({3}, {1});
  auto b = make({4}, {1});
  EXPECT_EQ(cpu::parity_sums(a.t, b.t).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::kernels
