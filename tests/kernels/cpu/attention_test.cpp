#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuAttention, SingleKeyReturnsItsValue) {
  auto q = make({1, 2, 2}, {1, 2, 3, 4});
  auto k = make({1, 1, 2}, {5, 6});
  auto v = make({1, 1, 2}, {7, -8});
  auto out = zeros({1, 2, 2});
  AttentionOptions o;
  ASSERT_TRUE(cpu::attention(q.t, k.t, v.t, out.t, o).ok());
  EXPECT_VALUES_NEAR(out.values(), (std::vector<float>{7, -8, 7, -8}), 1e-6);
}

TEST(CpuAttention, ZeroQueryAveragesValuesPerHead) {
  // Two heads of dim 1: head 0 values [1, 3], head 1 values [10, 30].
  auto q = make({1, 1, 2}, {0, 0});
  auto k = make({1, 2, 2}, {1, 2, 3, 4});
  auto v = make({1, 2, 2}, {1, 10, 3, 30});
  auto out = zeros({1, 1, 2});
  AttentionOptions o;
  o.heads = 2;
  ASSERT_TRUE(cpu::attention(q.t, k.t, v.t, out.t, o).ok());
  EXPECT_VALUES_NEAR(out.values(), (std::vector<float>{2, 20}), 1e-6);
}

TEST(CpuAttention, ScaleWeightsKeysBySoftmaxOfScaledDots) {
  // D = 1, q = 1, keys [0, ln 3 / 0.5]: scale 0.5 gives weights [1/4, 3/4].
  auto q = make({1, 1, 1}, {1});
  auto k = make({1, 2, 1}, {0, 2 * std::log(3.0f)});
  auto v = make({1, 2, 1}, {4, 8});
  auto out = zeros({1, 1, 1});
  AttentionOptions o;
  o.scale = 0.5f;
  ASSERT_TRUE(cpu::attention(q.t, k.t, v.t, out.t, o).ok());
  EXPECT_NEAR(out.values()[0], 4 * 0.25 + 8 * 0.75, 1e-5);
}

TEST(CpuAttention, CausalFirstQuerySeesOnlyTheFirstKey) {
  auto q = make({1, 3, 1}, {0});
  auto k = make({1, 3, 1}, {0});
  auto v = make({1, 3, 1}, {3, 6, 9});
  auto out = zeros({1, 3, 1});
  AttentionOptions o;
  o.causal = true;
  ASSERT_TRUE(cpu::attention(q.t, k.t, v.t, out.t, o).ok());
  EXPECT_VALUES_NEAR(out.values(), (std::vector<float>{3, 4.5f, 6}), 1e-6);
}

TEST(CpuAttention, HeadsMustDivideTheModelDim) {
  auto q = make({1, 1, 6}, {0});
  auto out = zeros({1, 1, 6});
  AttentionOptions o;
  o.heads = 4;
  Status s = cpu::attention(q.t, q.t, q.t, out.t, o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("heads"), std::string::npos);
}

}  // namespace
}  // namespace hipq::kernels
