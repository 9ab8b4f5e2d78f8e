#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuScale, AlphaTimesXPlusBeta) {
  auto x = make({4}, {0, 1, -2, 4});
  auto y = zeros({4});
  ASSERT_TRUE(cpu::scale(x.t, y.t, 0.5f, 1.0f).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{1, 1.5f, 0, 3}), 0);
}

TEST(CpuScale, F16OutputRoundsToNearestHalf) {
  auto y = zeros({1}, DType::kF16);
  auto x16 = make({1}, {1.0f}, DType::kF16);
  ASSERT_TRUE(cpu::scale(x16.t, y.t, 1.0f / 3.0f, 0.0f).ok());
  EXPECT_EQ(reinterpret_cast<const uint16_t*>(y.bytes.data())[0], 13653);  // numpy float16(1/3)
}

}  // namespace
}  // namespace hipq::kernels
