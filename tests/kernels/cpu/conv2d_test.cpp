#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuConv2d, OnesKernelWithPaddingCountsNeighbours) {
  auto x = make({1, 1, 3, 3}, {1});
  auto w = make({1, 1, 3, 3}, {1});
  auto y = zeros({1, 1, 3, 3});
  Conv2dOptions o;
  o.padding = 1;
  ASSERT_TRUE(cpu::conv2d(x.t, w.t, y.t, o).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{4, 6, 4, 6, 9, 6, 4, 6, 4}), 0);
}

TEST(CpuConv2d, StrideTwoPicksEveryOtherWindowAndAddsBias) {
  // x = 0..15 on 4x4; 1x1 kernel weight 2, stride 2 -> x[0,0], x[0,2], x[2,0], x[2,2] doubled.
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  auto x = make({1, 1, 4, 4}, v);
  auto w = make({1, 1, 1, 1}, {2});
  auto bias = make({1}, {0.5f});
  auto y = zeros({1, 1, 2, 2});
  Conv2dOptions o;
  o.stride = 2;
  o.bias = &bias.t;
  ASSERT_TRUE(cpu::conv2d(x.t, w.t, y.t, o).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{0.5f, 4.5f, 16.5f, 20.5f}), 0);
}

TEST(CpuConv2d, ChannelsSumAndResidualIsAdded) {
  // Two input channels (1s and 2s), two filters: [1, 1] and [1, -1] per channel.
  auto x = make({1, 2, 2, 2}, {1, 1, 1, 1, 2, 2, 2, 2});
  auto w = make({2, 2, 1, 1}, {1, 1, 1, -1});
  auto res = make({1, 2, 2, 2}, {10, 10, 10, 10, 20, 20, 20, 20});
  auto y = zeros({1, 2, 2, 2});
  Conv2dOptions o;
  o.residual = &res.t;
  ASSERT_TRUE(cpu::conv2d(x.t, w.t, y.t, o).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{13, 13, 13, 13, 19, 19, 19, 19}), 0);
}

TEST(CpuConv2d, ChannelMismatchAndBadOutputShapeAreInvalidArgument) {
  auto x = make({1, 3, 4, 4}, {1});
  auto w = make({2, 2, 3, 3}, {1});
  auto y = zeros({1, 2, 2, 2});
  Status s = cpu::conv2d(x.t, w.t, y.t, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("conv2d"), std::string::npos);
  auto w_ok = make({2, 3, 3, 3}, {1});
  auto y_bad = zeros({1, 2, 4, 4});
  s = cpu::conv2d(x.t, w_ok.t, y_bad.t, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[1, 2, 2, 2]"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hipq::kernels
