#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuConcat, ChannelConcatOfTwoFeatureMaps) {
  auto a = make({1, 1, 2}, {1, 2});
  auto b = make({1, 2, 2}, {3, 4, 5, 6});
  auto y = zeros({1, 3, 2});
  const Tensor xs[] = {a.t, b.t};
  ASSERT_TRUE(cpu::concat(xs, 1, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{1, 2, 3, 4, 5, 6}), 0);
}

TEST(CpuConcat, LastDimWithNegativeIndex) {
  auto a = make({2, 1}, {1, 2});
  auto b = make({2, 2}, {3, 4, 5, 6});
  auto y = zeros({2, 3});
  const Tensor xs[] = {a.t, b.t};
  ASSERT_TRUE(cpu::concat(xs, -1, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{1, 3, 4, 2, 5, 6}), 0);
}

TEST(CpuConcat, SizesThatDoNotAddUpAreRejected) {
  auto a = make({2, 1}, {1});
  auto y = zeros({2, 3});
  const Tensor xs[] = {a.t, a.t};
  EXPECT_EQ(cpu::concat(xs, 1, y.t).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::kernels
