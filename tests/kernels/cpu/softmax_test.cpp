#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuSoftmax, EqualLogitsGiveUniformRowsAndScaleApplies) {
  auto x = make({2, 4}, {3, 3, 3, 3, 0, 0, 0, std::log(3.0f) * 2});
  auto y = zeros({2, 4});
  ASSERT_TRUE(cpu::softmax(x.t, y.t, 0.5f, false).ok());
  // Row 2 with scale 0.5: exps [1, 1, 1, 3] -> [1/6, 1/6, 1/6, 1/2].
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{0.25f, 0.25f, 0.25f, 0.25f, 1 / 6.f, 1 / 6.f, 1 / 6.f, 0.5f}), 1e-6);
}

TEST(CpuSoftmax, CausalMaskKeepsTheLowerTriangle) {
  auto x = make({3, 3}, {0});
  auto y = zeros({3, 3});
  ASSERT_TRUE(cpu::softmax(x.t, y.t, 1.0f, true).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{1, 0, 0, 0.5f, 0.5f, 0, 1 / 3.f, 1 / 3.f, 1 / 3.f}), 1e-6);
}

TEST(CpuSoftmax, CausalWithMoreRowsThanColumnsZeroesFullyMaskedRows) {
  // R = 3, C = 2: row r keeps j <= r - 1, so row 0 keeps nothing.
  auto x = make({3, 2}, {0});
  auto y = zeros({3, 2});
  ASSERT_TRUE(cpu::softmax(x.t, y.t, 1.0f, true).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{0, 0, 1, 0, 0.5f, 0.5f}), 1e-6);
}

TEST(CpuSoftmax, LargeLogitsDoNotOverflow) {
  auto x = make({1, 2}, {1000, 1000});
  auto y = zeros({1, 2});
  ASSERT_TRUE(cpu::softmax(x.t, y.t, 1.0f, false).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{0.5f, 0.5f}), 1e-6);
}

}  // namespace
}  // namespace hipq::kernels
