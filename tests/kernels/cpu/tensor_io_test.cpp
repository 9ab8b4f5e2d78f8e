#include "kernels/cpu/tensor_io.h"

#include <gtest/gtest.h>

#include "cpu_test_util.h"

namespace hipq::kernels::cpu {
namespace {
using hipq::kernels::testing::make;
using hipq::kernels::testing::zeros;

TEST(TensorIo, GatherReadsAPermutedF16ViewInLogicalOrder) {
  auto x = make({2, 3}, {1, 2, 3, 4, 5, 6}, DType::kF16);
  float out[6];
  gather_f32(x.t.transpose(0, 1), out);
  const float want[] = {1, 4, 2, 5, 3, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], want[i]);
}

TEST(TensorIo, ScatterWritesOnlyTheElementsOfAStridedView) {
  auto y = make({3, 3}, {9}, DType::kBF16);
  const float src[] = {1, 2, 3};
  scatter_f32(src, y.t.slice(1, 1, 1));
  const auto v = y.values();
  const float want[] = {9, 1, 9, 9, 2, 9, 9, 3, 9};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(v[static_cast<size_t>(i)], want[i]);
}

TEST(TensorIo, OverlapDetectsSharedMemoryOnly) {
  auto a = zeros({4, 4});
  EXPECT_TRUE(overlaps(a.t, a.t.slice(0, 1, 2)));
  EXPECT_FALSE(overlaps(a.t.slice(0, 0, 2), a.t.slice(0, 2, 2)));
  auto b = zeros({4});
  EXPECT_FALSE(overlaps(a.t, b.t));
}

TEST(TensorIo, ForEachOffsetVisitsABroadcastViewWithZeroStrides) {
  int64_t shape[] = {2, 3};
  int64_t stride[] = {0, 1};
  std::vector<int64_t> offs;
  for_each_offset(2, shape, stride, [&](int64_t, int64_t off) { offs.push_back(off); });
  EXPECT_EQ(offs, (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
}

}  // namespace
}  // namespace hipq::kernels::cpu
