#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuGeglu, FirstHalfTimesGeluOfSecondHalf) {
  // Rows [a0, a1 | g0, g1]: y = a * gelu(g); gelu(1) = 0.8413447, gelu(0) = 0.
  auto x = make({2, 4}, {2, 3, 1, 0, -1, 4, 2, 1});
  auto y = zeros({2, 2});
  ASSERT_TRUE(cpu::geglu(x.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{2 * 0.8413447142f, 0, -1 * 1.9544999600f, 4 * 0.8413447142f}), 1e-5);
}

TEST(CpuGeglu, OddLastDimIsRejected) {
  auto x = make({2, 3}, {1});
  auto y = zeros({2, 1});
  EXPECT_EQ(cpu::geglu(x.t, y.t).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::kernels
