#include "kernels/cpu/ops.h"

#include <cmath>

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuMatmul, TwoByTwoTimesTwoByThreeByHand) {
  auto a = make({2, 2}, {1, 2, 3, 4});
  auto b = make({2, 3}, {5, 6, 7, 8, 9, 10});
  auto out = zeros({2, 3});
  ASSERT_TRUE(cpu::matmul(a.t, b.t, out.t, {}).ok());
  EXPECT_VALUES_NEAR(out.values(), (std::vector<float>{21, 24, 27, 47, 54, 61}), 0);
}

TEST(CpuMatmul, TransposedOperandsGiveTheSameProduct) {
  // a^T stored as [K, M], b^T as [N, K] (a Linear weight).
  auto at = make({2, 2}, {1, 3, 2, 4});
  auto bt = make({3, 2}, {5, 8, 6, 9, 7, 10});
  auto out = zeros({2, 3});
  MatmulOptions o;
  o.trans_a = o.trans_b = true;
  ASSERT_TRUE(cpu::matmul(at.t, bt.t, out.t, o).ok());
  EXPECT_VALUES_NEAR(out.values(), (std::vector<float>{21, 24, 27, 47, 54, 61}), 0);
}

TEST(CpuMatmul, EpilogueIsAlphaThenBiasThenActivationThenResidual) {
  auto a = make({1, 1}, {2});
  auto b = make({1, 2}, {1, -3});
  auto bias = make({2}, {0.5f, 1});
  auto res = make({1, 2}, {10, 20});
  auto out = zeros({1, 2});
  MatmulOptions o;
  o.alpha = 0.5f;
  o.bias = &bias.t;
  o.residual = &res.t;
  o.activation = Activation::kSilu;
  ASSERT_TRUE(cpu::matmul(a.t, b.t, out.t, o).ok());
  auto silu = [](double x) { return x / (1 + std::exp(-x)); };
  // 0.5*2*1 + 0.5 = 1.5 ; 0.5*2*-3 + 1 = -2
  EXPECT_NEAR(out.values()[0], silu(1.5) + 10, 1e-5);
  EXPECT_NEAR(out.values()[1], silu(-2.0) + 20, 1e-5);
}

TEST(CpuMatmul, GegluPairsGiveValueTimesGeluOfGateAndHalveTheColumns) {
  // Two rows, product columns (v0, g0, v1, g1) = a @ b + bias.
  auto a = make({2, 1}, {1, 2});
  auto b = make({1, 4}, {1, 0.5f, -2, 1});
  auto bias = make({4}, {0, 0.25f, 1, -1});
  auto out = zeros({2, 2});
  MatmulOptions o;
  o.bias = &bias.t;
  o.geglu_pairs = true;
  ASSERT_TRUE(cpu::matmul(a.t, b.t, out.t, o).ok());
  auto gelu = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
  EXPECT_VALUES_NEAR(out.values(),
                     (std::vector<float>{static_cast<float>(1 * gelu(0.75)), static_cast<float>(-1 * gelu(0)),
                                         static_cast<float>(2 * gelu(1.25)), static_cast<float>(-3 * gelu(1))}),
                     1e-6);
  // An odd N, a residual or an activation with the pairs is refused.
  auto odd = make({1, 3}, {1, 2, 3});
  auto out1 = zeros({2, 1});
  EXPECT_EQ(cpu::matmul(a.t, odd.t, out1.t, o).code(), StatusCode::kInvalidArgument);
  o.activation = Activation::kGelu;
  EXPECT_EQ(cpu::matmul(a.t, b.t, out.t, o).code(), StatusCode::kInvalidArgument);
  // The full-width out is the wrong shape with the pairs.
  o.activation = Activation::kNone;
  auto wide = zeros({2, 4});
  EXPECT_EQ(cpu::matmul(a.t, b.t, wide.t, o).code(), StatusCode::kInvalidArgument);
}

TEST(CpuMatmul, BatchOfOneBroadcastsAgainstBatchedOperand) {
  auto a = make({2, 1, 2}, {1, 2, 3, 4});
  auto b = make({2, 1}, {10, 1});
  auto out = zeros({2, 1, 1});
  ASSERT_TRUE(cpu::matmul(a.t, b.t, out.t, {}).ok());
  EXPECT_VALUES_NEAR(out.values(), (std::vector<float>{12, 34}), 0);
}

TEST(CpuMatmul, ResidualThatIsTheOutputItselfIsAddedOnce) {
  auto a = make({2, 2}, {1, 0, 0, 1});
  auto b = make({2, 2}, {1, 2, 3, 4});
  auto out = make({2, 2}, {100, 200, 300, 400});
  MatmulOptions o;
  o.residual = &out.t;
  ASSERT_TRUE(cpu::matmul(a.t, b.t, out.t, o).ok());
  EXPECT_VALUES_NEAR(out.values(), (std::vector<float>{101, 202, 303, 404}), 0);
}

TEST(CpuMatmul, Bf16StorageRoundsOnceOnStore) {
  auto a = make({1, 3}, {1, 1, 1}, DType::kBF16);
  auto b = make({3, 1}, {1, 0.00390625f, 0.00390625f}, DType::kBF16);  // 1 + 2^-8 + 2^-8
  auto out = zeros({1, 1}, DType::kBF16);
  ASSERT_TRUE(cpu::matmul(a.t, b.t, out.t, {}).ok());
  // fp32 accumulation keeps 1 + 2^-7, which bf16 represents exactly.
  EXPECT_EQ(out.values()[0], 1.0078125f);
}

TEST(CpuMatmul, MismatchedInnerDimsAreInvalidArgumentNamingShapes) {
  auto a = make({2, 5}, {1});
  auto b = make({3, 4}, {1});
  auto out = zeros({2, 4});
  Status s = cpu::matmul(a.t, b.t, out.t, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("matmul"), std::string::npos);
  EXPECT_NE(s.message().find("[3, 4]"), std::string::npos) << s.message();
}

TEST(CpuMatmul, WrongOutputShapeAndMixedDtypesAreRejected) {
  auto a = make({2, 3}, {1});
  auto b = make({3, 4}, {1});
  auto bad_out = zeros({4, 2});
  EXPECT_EQ(cpu::matmul(a.t, b.t, bad_out.t, {}).code(), StatusCode::kInvalidArgument);
  auto b16 = make({3, 4}, {1}, DType::kF16);
  auto out = zeros({2, 4});
  Status s = cpu::matmul(a.t, b16.t, out.t, {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'b'"), std::string::npos) << s.message();
}

TEST(CpuMatmul, DeviceTensorsAreRejected) {
  auto a = make({1, 1}, {1});
  Tensor dev = a.t;
  dev.location = Location::kDevice;
  auto out = zeros({1, 1});
  EXPECT_EQ(cpu::matmul(dev, a.t, out.t, {}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::kernels
