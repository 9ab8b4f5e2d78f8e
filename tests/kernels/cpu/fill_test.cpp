#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuFill, SetsEveryElementOfAView) {
  auto y = make({2, 3}, {7});
  Tensor col = y.t.slice(1, 1, 1);
  ASSERT_TRUE(cpu::fill(col, -1.5f).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{7, -1.5f, 7, 7, -1.5f, 7}), 0);
  auto h = zeros({3}, DType::kBF16);
  ASSERT_TRUE(cpu::fill(h.t, 0.25f).ok());
  EXPECT_VALUES_NEAR(h.values(), (std::vector<float>{0.25f, 0.25f, 0.25f}), 0);
}

}  // namespace
}  // namespace hipq::kernels
