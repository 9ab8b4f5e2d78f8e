#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuLayerNorm, NormalisesEachRowWithBiasedVariance) {
  // Row [1, 2, 3, 4]: mean 2.5, var 1.25 -> (x - 2.5) / sqrt(1.25 + eps).
  auto x = make({2, 4}, {1, 2, 3, 4, 5, 5, 5, 5});
  auto y = zeros({2, 4});
  ASSERT_TRUE(cpu::layer_norm(x.t, nullptr, nullptr, y.t, 1e-5f).ok());
  const float s = 1.0f / std::sqrt(1.25f + 1e-5f);
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{-1.5f * s, -0.5f * s, 0.5f * s, 1.5f * s, 0, 0, 0, 0}), 1e-6);
}

TEST(CpuLayerNorm, ConstantRowWithZeroEpsIsNanLikeTorch) {
  auto x = make({1, 3}, {2, 2, 2});
  auto y = zeros({1, 3});
  ASSERT_TRUE(cpu::layer_norm(x.t, nullptr, nullptr, y.t, 0.0f).ok());
  EXPECT_TRUE(std::isnan(y.values()[0]));
}

TEST(CpuLayerNorm, GammaAndBetaApplyPerFeature) {
  auto x = make({1, 2}, {-1, 1});
  auto g = make({2}, {2, 3});
  auto b = make({2}, {10, 20});
  auto y = zeros({1, 2});
  ASSERT_TRUE(cpu::layer_norm(x.t, &g.t, &b.t, y.t, 0.0f).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{8, 23}), 1e-6);
}

TEST(CpuLayerNorm, GammaOfWrongLengthIsRejected) {
  auto x = make({1, 3}, {1});
  auto g = make({2}, {1});
  auto y = zeros({1, 3});
  Status s = cpu::layer_norm(x.t, &g.t, nullptr, y.t, 1e-5f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'gamma'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hipq::kernels
