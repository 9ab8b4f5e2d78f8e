#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuCopy, NchwToNhwcThroughAPermutedView) {
  // [1, 2, 1, 3] channels c0 = 1 2 3, c1 = 4 5 6 -> NHWC [1, 1, 3, 2].
  auto x = make({1, 2, 1, 3}, {1, 2, 3, 4, 5, 6});
  auto y = zeros({1, 1, 3, 2});
  ASSERT_TRUE(cpu::copy(x.t.permute({0, 2, 3, 1}), y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{1, 4, 2, 5, 3, 6}), 0);
}

TEST(CpuCopy, CastsRoundToNearestEven) {
  auto x = make({2}, {1.0f / 3.0f, 65520.0f});
  auto h = zeros({2}, DType::kF16);
  auto b = zeros({2}, DType::kBF16);
  ASSERT_TRUE(cpu::copy(x.t, h.t).ok());
  ASSERT_TRUE(cpu::copy(x.t, b.t).ok());
  const auto* hv = reinterpret_cast<const uint16_t*>(h.bytes.data());
  const auto* bv = reinterpret_cast<const uint16_t*>(b.bytes.data());
  EXPECT_EQ(hv[0], 13653);   // numpy float16(1/3)
  EXPECT_EQ(hv[1], 0x7c00);  // 65520 rounds to +inf in f16
  EXPECT_EQ(bv[0], 16043);   // torch bfloat16(1/3)
}

TEST(CpuCopy, IntoAStridedSliceOfALargerTensor) {
  auto src = make({2, 2}, {1, 2, 3, 4});
  auto dst = zeros({2, 4});
  Tensor view = dst.t.slice(1, 1, 2);
  ASSERT_TRUE(cpu::copy(src.t, view).ok());
  EXPECT_VALUES_NEAR(dst.values(), (std::vector<float>{0, 1, 2, 0, 0, 3, 4, 0}), 0);
}

TEST(CpuCopy, SameDtypeIntegersCopyExactly) {
  auto src = make({2}, {0}, DType::kI64);
  reinterpret_cast<int64_t*>(src.bytes.data())[0] = (int64_t{1} << 60) + 1;
  auto dst = zeros({2}, DType::kI64);
  ASSERT_TRUE(cpu::copy(src.t, dst.t).ok());
  EXPECT_EQ(reinterpret_cast<const int64_t*>(dst.bytes.data())[0], (int64_t{1} << 60) + 1);
}

TEST(CpuCopy, ShapeMismatchIsRejected) {
  auto src = make({2, 3}, {0});
  auto dst = zeros({3, 2});
  EXPECT_EQ(cpu::copy(src.t, dst.t).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::kernels
