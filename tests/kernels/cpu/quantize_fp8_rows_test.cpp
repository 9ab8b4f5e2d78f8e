#include <cmath>
#include <limits>

#include "cpu_test_util.h"
#include "kernels/cpu/ops.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

std::vector<int> codes_of(const testing::Owned& o) {
  std::vector<int> v;
  for (uint8_t b : o.bytes) v.push_back(b);
  return v;
}

TEST(CpuQuantizeFp8Rows, EachRowScaledSoItsLargestMagnitudeIs448) {
  // Row 0: amax 2 -> s = 224: 224 = 1.75 * 2^7 (0x76), -448 (0xFE), 112 (0x6E), 0.
  // Row 1: amax 448 -> s = 1: codes as the values; 0.1 -> 0x1D.
  auto x = make({2, 4}, {1, -2, 0.5f, 0, 448, 1, 0.1f, -1});
  auto codes = zeros({2, 4}, DType::kU8);
  auto scales = zeros({2});
  ASSERT_TRUE(cpu::quantize_fp8_rows(x.t, codes.t, scales.t).ok());
  EXPECT_EQ(codes_of(codes), (std::vector<int>{0x76, 0xFE, 0x6E, 0x00, 0x7E, 0x38, 0x1D, 0xB8}));
  EXPECT_EQ(scales.values(), (std::vector<float>{1.0f / 224.0f, 1.0f}));
}

TEST(CpuQuantizeFp8Rows, ZeroRowGetsTheFlooredScaleAndNanRowIsNan) {
  auto x = make({2, 3}, {0, 0, 0, 1, std::numeric_limits<float>::quiet_NaN(), 2});
  auto codes = zeros({2, 3}, DType::kU8);
  auto scales = zeros({2});
  ASSERT_TRUE(cpu::quantize_fp8_rows(x.t, codes.t, scales.t).ok());
  EXPECT_EQ(codes.bytes[0], 0);
  EXPECT_EQ(scales.values()[0], 1.0f / static_cast<float>(448.0 / 1e-12));
  for (int k = 3; k < 6; ++k) EXPECT_EQ(codes.bytes[static_cast<size_t>(k)] & 0x7F, 0x7F) << k;
  EXPECT_TRUE(std::isnan(scales.values()[1]));
}

TEST(CpuQuantizeFp8Rows, Bf16RowsOfAStridedViewQuantizeAsTheirValues) {
  auto wide = make({2, 5}, {9, 1, -2, 0.5f, 9, 9, 448, 1, 0.1f, 9}, DType::kBF16);
  Tensor x = wide.t.slice(1, 1, 3);
  auto codes = zeros({2, 3}, DType::kU8);
  auto scales = zeros({2});
  ASSERT_TRUE(cpu::quantize_fp8_rows(x, codes.t, scales.t).ok());
  // bf16(0.1) = 0.10009765625 -> still 0x1D at s = 1.
  EXPECT_EQ(codes_of(codes), (std::vector<int>{0x76, 0xFE, 0x6E, 0x7E, 0x38, 0x1D}));
}

TEST(CpuQuantizeFp8Rows, RefusesWrongShapesAndDtypes) {
  auto x = make({2, 4}, {1});
  auto codes = zeros({2, 4}, DType::kU8);
  auto scales = zeros({2});
  auto bad_codes = zeros({2, 3}, DType::kU8);
  auto f32_codes = zeros({2, 4});
  auto bad_scales = zeros({3});
  Status s = cpu::quantize_fp8_rows(x.t, bad_codes.t, scales.t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("quantize_fp8_rows"), std::string::npos) << s.message();
  EXPECT_EQ(cpu::quantize_fp8_rows(x.t, f32_codes.t, scales.t).code(), StatusCode::kInvalidArgument);
  s = cpu::quantize_fp8_rows(x.t, codes.t, bad_scales.t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("scales"), std::string::npos) << s.message();
  EXPECT_EQ(cpu::quantize_fp8_rows(x.t.transpose(0, 1), codes.t, scales.t).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::kernels
