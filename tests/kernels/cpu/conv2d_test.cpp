#include "kernels/cpu/ops.h"

#include <cmath>

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

TEST(CpuConv2d, UpsampledInputIsBitwiseTheConvOfTheUpsampledTensor) {
  // An odd-sized input with values that do not sum exactly in any order.
  const int64_t C = 5, H = 7, W = 9, O = 6;
  std::vector<float> xv(static_cast<size_t>(2 * C * H * W)), wv(static_cast<size_t>(O * C * 9)), bv(O);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.37f * static_cast<float>(i)) * 1.7f;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = std::cos(0.91f * static_cast<float>(i)) / 3.1f;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = 0.1f * static_cast<float>(i) - 0.2f;
  auto x = make({2, C, H, W}, xv);
  auto w = make({O, C, 3, 3}, wv);
  auto bias = make({O}, bv);
  auto res = make({2, O, 2 * H, 2 * W}, {0.25f, -1.5f, 3.0f});
  auto xu = zeros({2, C, 2 * H, 2 * W});
  ASSERT_TRUE(cpu::upsample_nearest2x(x.t, xu.t).ok());
  Conv2dOptions o;
  o.padding = 1;
  o.bias = &bias.t;
  o.residual = &res.t;
  auto want = zeros({2, O, 2 * H, 2 * W});
  ASSERT_TRUE(cpu::conv2d(xu.t, w.t, want.t, o).ok());
  o.upsample_x2 = true;
  auto got = zeros({2, O, 2 * H, 2 * W});
  ASSERT_TRUE(cpu::conv2d(x.t, w.t, got.t, o).ok());
  EXPECT_EQ(got.values(), want.values());
  // The output is the upsampled input's: the half size is refused.
  auto half = zeros({2, O, H, W});
  EXPECT_EQ(cpu::conv2d(x.t, w.t, half.t, o).code(), StatusCode::kInvalidArgument);
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
