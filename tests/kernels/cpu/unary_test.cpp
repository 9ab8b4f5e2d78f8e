#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

// Expected values from torch 1.13: F.gelu, F.gelu(approximate="tanh"), F.silu, x*sigmoid(1.702x).
TEST(CpuUnary, ActivationsMatchTorchDefinitions) {
  auto x = make({3}, {1.0f, -0.5f, 2.0f});
  auto y = zeros({3});
  ASSERT_TRUE(cpu::unary(UnaryOp::kGelu, x.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{0.8413447142f, -0.1542687863f, 1.9544999600f}), 1e-6);
  ASSERT_TRUE(cpu::unary(UnaryOp::kGeluTanh, x.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{0.8411920071f, -0.1542859972f, 1.9545977116f}), 1e-6);
  ASSERT_TRUE(cpu::unary(UnaryOp::kSilu, x.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{0.7310585976f, -0.1887703389f, 1.7615940571f}), 1e-6);
  ASSERT_TRUE(cpu::unary(UnaryOp::kQuickGelu, x.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{0.8457957506f, -0.1496115625f, 1.9356585741f}), 1e-6);
  ASSERT_TRUE(cpu::unary(UnaryOp::kNeg, x.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{-1.0f, 0.5f, -2.0f}), 0);
  ASSERT_TRUE(cpu::unary(UnaryOp::kExp, x.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{std::exp(1.0f), std::exp(-0.5f), std::exp(2.0f)}), 1e-6);
}

TEST(CpuUnary, TransposedViewIsReadThroughItsStrides) {
  auto x = make({2, 3}, {1, 2, 3, 4, 5, 6});
  auto y = zeros({3, 2});
  ASSERT_TRUE(cpu::unary(UnaryOp::kNeg, x.t.transpose(0, 1), y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{-1, -4, -2, -5, -3, -6}), 0);
}

TEST(CpuUnary, InPlaceOnTheSameTensorWorks) {
  auto x = make({2}, {1, -2});
  ASSERT_TRUE(cpu::unary(UnaryOp::kNeg, x.t, x.t).ok());
  EXPECT_VALUES_NEAR(x.values(), (std::vector<float>{-1, 2}), 0);
}

TEST(CpuUnary, InPlaceThroughATransposedViewReadsTheOldValues) {
  auto x = make({2, 2}, {1, 2, 3, 4});
  ASSERT_TRUE(cpu::unary(UnaryOp::kNeg, x.t.transpose(0, 1), x.t).ok());
  EXPECT_VALUES_NEAR(x.values(), (std::vector<float>{-1, -3, -2, -4}), 0);
}

TEST(CpuUnary, LargeStridedInputSpansManyChunks) {
  std::vector<float> v(300 * 301);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 1000);
  auto x = make({300, 301}, v, DType::kF16);
  auto y = zeros({301, 300}, DType::kF16);
  ASSERT_TRUE(cpu::unary(UnaryOp::kNeg, x.t.transpose(0, 1), y.t).ok());
  const auto out = y.values();
  for (int64_t r = 0; r < 301; ++r)
    for (int64_t c = 0; c < 300; ++c)
      ASSERT_EQ(out[static_cast<size_t>(r * 300 + c)], -v[static_cast<size_t>(c * 301 + r)]);
}

TEST(CpuUnary, OutputShapeMismatchIsRejected) {
  auto x = make({2, 3}, {1});
  auto y = zeros({3, 2});
  Status s = cpu::unary(UnaryOp::kExp, x.t, y.t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unary"), std::string::npos);
}

}  // namespace
}  // namespace hipq::kernels
