#include "kernels/cpu/tensor_io.h"

#include <gtest/gtest.h>

#include <cmath>

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

TEST(TensorIo, GatherOfBatchedTransposedMatricesMatchesElementwiseReads) {
  // [3, 37, 41] stored, read as [3, 41, 37]: the tiled transpose path, odd sizes.
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<float> v(3 * 37 * 41);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 251) - 125.0f;
    auto x = make({3, 37, 41}, v, dt);
    Tensor t = x.t.transpose(1, 2);
    std::vector<float> out(v.size());
    gather_f32(t, out.data());
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t r = 0; r < 41; ++r)
        for (int64_t c = 0; c < 37; ++c)
          ASSERT_EQ(out[static_cast<size_t>((b * 41 + r) * 37 + c)], v[static_cast<size_t>((b * 37 + c) * 41 + r)])
              << dtype_name(dt);
  }
}

TEST(TensorIo, BulkF16ConversionsMatchTheScalarOnesBitForBit) {
  // Every f16 value, every midpoint between neighbours (ties to even), values
  // just off the midpoints, overflow and subnormal edges.
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const float a = f16_to_f32(static_cast<uint16_t>(h | sign));
      const float b = f16_to_f32(static_cast<uint16_t>((h + 1) | sign));
      const float mid = 0.5f * (a + b);
      v.insert(v.end(), {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f * (sign ? -1.0f : 1.0f))});
    }
  }
  v.insert(v.end(), {65504.0f, 65519.0f, 65520.0f, 1e9f, -1e9f, 1e-10f, 2.9802322e-08f, 5.9604645e-08f});
  v.resize(v.size() / 8 * 8 + 5);  // a tail that is not a multiple of 8
  auto t = make({static_cast<int64_t>(v.size())}, {}, DType::kF16);
  scatter_f32(v.data(), t.t);
  const auto* bits = reinterpret_cast<const uint16_t*>(t.bytes.data());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(bits[i], f32_to_f16(v[i])) << "value " << v[i];
  std::vector<float> back(v.size());
  gather_f32(t.t, back.data());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(back[i], f16_to_f32(bits[i]));
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
