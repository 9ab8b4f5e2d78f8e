#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

// Values from torch.nn.GroupNorm(2, 4, eps=1e-5) with weight [1, 2, 1, .5], bias [0, 1, 0, -1].
TEST(CpuGroupNorm, MatchesTorchGroupNormByHand) {
  auto x = make({1, 4, 2}, {1, 2, 3, 4, 0, 0, 2, -2});
  auto g = make({4}, {1, 2, 1, 0.5f});
  auto b = make({4}, {0, 1, 0, -1});
  auto y = zeros({1, 4, 2});
  GroupNormOptions o;
  o.groups = 2;
  ASSERT_TRUE(cpu::group_norm(x.t, g.t, b.t, y.t, o).ok());
  EXPECT_VALUES_NEAR(y.values(),
                     (std::vector<float>{-1.3416354656f, -0.4472118616f, 1.8944236040f, 3.6832709312f, 0.0f, 0.0f,
                                         -0.2928950190f, -1.7071049213f}),
                     1e-5);
}

TEST(CpuGroupNorm, FusedSiluAppliesAfterTheAffine) {
  auto x = make({1, 2, 2}, {-1, 1, 3, 5});
  auto g = make({2}, {1});
  auto b = make({2}, {0});
  auto plain = zeros({1, 2, 2}), fused = zeros({1, 2, 2});
  GroupNormOptions o;
  o.groups = 1;
  ASSERT_TRUE(cpu::group_norm(x.t, g.t, b.t, plain.t, o).ok());
  o.fuse_silu = true;
  ASSERT_TRUE(cpu::group_norm(x.t, g.t, b.t, fused.t, o).ok());
  for (size_t i = 0; i < 4; ++i) {
    const double v = plain.values()[i];
    EXPECT_NEAR(fused.values()[i], v / (1 + std::exp(-v)), 1e-6);
  }
}

TEST(CpuGroupNorm, GroupsThatDoNotDivideChannelsAreRejected) {
  auto x = make({1, 6, 2}, {1});
  auto g = make({6}, {1});
  auto y = zeros({1, 6, 2});
  GroupNormOptions o;
  o.groups = 4;
  Status s = cpu::group_norm(x.t, g.t, g.t, y.t, o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("group_norm"), std::string::npos);
}

}  // namespace
}  // namespace hipq::kernels
