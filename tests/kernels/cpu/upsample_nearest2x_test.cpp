#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuUpsampleNearest2x, EachPixelBecomesATwoByTwoBlock) {
  auto x = make({1, 1, 2, 2}, {1, 2, 3, 4});
  auto y = zeros({1, 1, 4, 4});
  ASSERT_TRUE(cpu::upsample_nearest2x(x.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}), 0);
}

TEST(CpuUpsampleNearest2x, WrongOutputSizeIsRejected) {
  auto x = make({1, 1, 2, 2}, {1});
  auto y = zeros({1, 1, 4, 3});
  EXPECT_EQ(cpu::upsample_nearest2x(x.t, y.t).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::kernels
