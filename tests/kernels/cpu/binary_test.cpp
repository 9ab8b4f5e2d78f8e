#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuBinary, SameShapeAddSubMulDiv) {
  auto a = make({3}, {6, 8, 10});
  auto b = make({3}, {2, 4, 5});
  auto y = zeros({3});
  ASSERT_TRUE(cpu::binary(BinaryOp::kAdd, a.t, b.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{8, 12, 15}), 0);
  ASSERT_TRUE(cpu::binary(BinaryOp::kSub, a.t, b.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{4, 4, 5}), 0);
  ASSERT_TRUE(cpu::binary(BinaryOp::kMul, a.t, b.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{12, 32, 50}), 0);
  ASSERT_TRUE(cpu::binary(BinaryOp::kDiv, a.t, b.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{3, 2, 2}), 0);
}

TEST(CpuBinary, PerChannelBiasBroadcastsOverSpatialDims) {
  // a [1, 2, 2, 1], b [2, 1, 1] right-aligned: channel 0 + 10, channel 1 + 20.
  auto a = make({1, 2, 2, 1}, {1, 2, 3, 4});
  auto b = make({2, 1, 1}, {10, 20});
  auto y = zeros({1, 2, 2, 1});
  ASSERT_TRUE(cpu::binary(BinaryOp::kAdd, a.t, b.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{11, 12, 23, 24}), 0);
}

TEST(CpuBinary, LastDimVectorBroadcastsOverRows) {
  auto a = make({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = make({3}, {1, 10, 100});
  auto y = zeros({2, 3});
  ASSERT_TRUE(cpu::binary(BinaryOp::kMul, a.t, b.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{1, 20, 300, 4, 50, 600}), 0);
}

TEST(CpuBinary, NonBroadcastableShapesAreRejected) {
  auto a = make({2, 3}, {1});
  auto b = make({2}, {1});
  auto y = zeros({2, 3});
  Status s = cpu::binary(BinaryOp::kAdd, a.t, b.t, y.t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("broadcast"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hipq::kernels
