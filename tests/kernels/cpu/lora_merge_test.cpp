#include <cstring>

#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

// out = base + sum_l c_l * up_l @ down_l, by hand: base f16 [2, 3], a rank-2
// and a rank-1 delta.
TEST(CpuLoraMerge, BasePlusTheDeltasInOrder) {
  auto base = make({2, 3}, {1, 2, 3, -1, 0, 0.5f}, DType::kF16);
  auto up0 = make({2, 2}, {1, 0, 0, 2});
  auto down0 = make({2, 3}, {1, 2, 3, 0.5f, -1, 0});
  auto up1 = make({2, 1}, {1, -1});
  auto down1 = make({1, 3}, {4, 0, -4});
  auto out = zeros({2, 3});
  const LoraFactors deltas[] = {{up0.t, down0.t, 0.5f}, {up1.t, down1.t, 0.25f}};
  ASSERT_TRUE(cpu::lora_merge(base.t, deltas, out.t).ok());
  // Row 0: base + 0.5 * [1, 2, 3] + 0.25 * [4, 0, -4]; row 1: base + 0.5 * 2 * [0.5, -1, 0] - 0.25 * [4, 0, -4].
  EXPECT_VALUES_NEAR(out.values(), (std::vector<float>{2.5f, 3, 3.5f, -1.5f, -1, 1.5f}), 0);
}

// The bits of the op's order: (c * up) * down added one by one, then the base;
// not c * (up @ down) (this case tells them apart).
TEST(CpuLoraMerge, EachProductAndSumIsRoundedOnItsOwn) {
  const float c = 0.30000001192092896f, u0 = 0.31331300735473633f, u1 = 0.2964056134223938f,
              d0 = -0.4110144376754761f, d1 = 0.4052511155605316f, b = -0.007012688089162111f;
  auto base = make({1, 1}, {b});
  auto up = make({1, 2}, {u0, u1});
  auto down = make({2, 1}, {d0, d1});
  auto out = zeros({1, 1});
  const LoraFactors deltas[] = {{up.t, down.t, c}};
  ASSERT_TRUE(cpu::lora_merge(base.t, deltas, out.t).ok());
  volatile float a0 = c * u0, a1 = c * u1;
  volatile float p0 = a0 * d0, p1 = a1 * d1;
  volatile float acc = 0.0f;
  acc = acc + p0;
  acc = acc + p1;
  const float want = b + acc;
  float got = 0;
  std::memcpy(&got, out.bytes.data(), sizeof(float));
  EXPECT_EQ(got, want);
  EXPECT_EQ(want, -0.009609930217266083f);
  EXPECT_NE(want, -0.009609924629330635f);  // b + c * (u0 * d0 + u1 * d1)
  EXPECT_NE(want, -0.009609929285943508f);  // the second product fused into the sum (FMA)
}

TEST(CpuLoraMerge, NoDeltasIsTheBaseAsF32) {
  auto base = make({2, 2}, {1.5f, -2, 0.25f, 8}, DType::kBF16);
  auto out = zeros({2, 2});
  ASSERT_TRUE(cpu::lora_merge(base.t, {}, out.t).ok());
  EXPECT_VALUES_NEAR(out.values(), (std::vector<float>{1.5f, -2, 0.25f, 8}), 0);
}

TEST(CpuLoraMerge, RefusesShapesDtypesAndLayoutsNamingTheOperand) {
  auto base = make({4, 6}, std::vector<float>(24, 1.0f));
  auto up = make({4, 2}, std::vector<float>(8, 1.0f));
  auto down = make({2, 6}, std::vector<float>(12, 1.0f));
  auto out = zeros({4, 6});
  auto out16 = zeros({4, 6}, DType::kF16);
  auto up16 = make({4, 2}, std::vector<float>(8, 1.0f), DType::kF16);
  auto short_down = make({2, 5}, std::vector<float>(10, 1.0f));
  auto wrong_rank = make({3, 6}, std::vector<float>(18, 1.0f));
  auto cube = make({4, 3, 2}, std::vector<float>(24, 1.0f));
  auto refused = [](const Status& st, const char* what) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << what;
    EXPECT_NE(st.message().find("lora_merge"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  };
  const LoraFactors ok[] = {{up.t, down.t, 1.0f}};
  refused(cpu::lora_merge(base.t, ok, out16.t), "out");
  refused(cpu::lora_merge(cube.t, ok, out.t), "base");
  auto wide = make({4, 12}, std::vector<float>(48, 1.0f));
  refused(cpu::lora_merge(wide.t.slice(1, 0, 6), ok, out.t), "base");
  const LoraFactors half_up[] = {{up16.t, down.t, 1.0f}};
  refused(cpu::lora_merge(base.t, half_up, out.t), "up");
  const LoraFactors short_cols[] = {{up.t, short_down.t, 1.0f}};
  refused(cpu::lora_merge(base.t, short_cols, out.t), "down");
  const LoraFactors ranks_differ[] = {{up.t, wrong_rank.t, 1.0f}};
  refused(cpu::lora_merge(base.t, ranks_differ, out.t), "down");
  const LoraFactors second_bad[] = {{up.t, down.t, 1.0f}, {up.t, short_down.t, 1.0f}};
  refused(cpu::lora_merge(base.t, second_bad, out.t), "delta 1");
}

}  // namespace
}  // namespace hipq::kernels
