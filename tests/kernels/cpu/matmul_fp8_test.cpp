#include <cmath>

#include "cpu_test_util.h"
#include "kernels/cpu/ops.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

testing::Owned codes(const std::vector<int64_t>& shape, const std::vector<int>& bytes) {
  auto o = zeros(shape, DType::kU8);
  for (size_t i = 0; i < bytes.size(); ++i) o.bytes[i] = static_cast<uint8_t>(bytes[i]);
  return o;
}

TEST(CpuMatmulFp8, ScaledProductOfCodesThenTheEpilogueByHand) {
  // a = [[1, 2]] (0x38, 0x40) scale 0.5; b rows [1, 1], [2, -1] (0x40, 0xB8) scales 1, 0.25.
  // sums 3 and 0 -> 3 * 0.5 * 1 = 1.5 and 0; alpha 2 -> 3, 0; bias 1, -1 -> 4, -1; residual 10 -> 14, 9.
  auto ac = codes({1, 2}, {0x38, 0x40});
  auto as = make({1}, {0.5f});
  auto bc = codes({2, 2}, {0x38, 0x38, 0x40, 0xB8});
  auto bs = make({2}, {1.0f, 0.25f});
  auto bias = make({2}, {1, -1}, DType::kBF16);
  auto res = make({1, 2}, {10, 10}, DType::kBF16);
  auto out = zeros({1, 2}, DType::kBF16);
  MatmulOptions o;
  o.trans_b = true;
  o.alpha = 2.0f;
  o.bias = &bias.t;
  o.residual = &res.t;
  ASSERT_TRUE(cpu::matmul_fp8({ac.t, as.t}, {bc.t, bs.t}, out.t, o).ok());
  EXPECT_VALUES_NEAR(out.values(), (std::vector<float>{14, 9}), 0);
}

TEST(CpuMatmulFp8, GegluPairsTakeValueTimesGeluOfGate) {
  // Product columns (value, gate) = (2, 1) after scales: out = 2 * gelu(1).
  auto ac = codes({1, 1}, {0x38});
  auto as = make({1}, {1.0f});
  auto bc = codes({2, 1}, {0x40, 0x38});
  auto bs = make({2}, {1.0f, 1.0f});
  auto out = zeros({1, 1});
  MatmulOptions o;
  o.trans_b = true;
  o.geglu_pairs = true;
  ASSERT_TRUE(cpu::matmul_fp8({ac.t, as.t}, {bc.t, bs.t}, out.t, o).ok());
  EXPECT_NEAR(out.values()[0], 2.0 * 0.5 * (1.0 + std::erf(1.0 / std::sqrt(2.0))), 1e-6);
}

TEST(CpuMatmulFp8, QuantizedLinearIsCloseToTheBf16One) {
  // x [3, 64] and W [5, 64] through quantize_fp8_rows and matmul_fp8, against
  // the plain product: e4m3 keeps 2^-4 relative per element at worst (NMSE
  // 2.5e-3 here, where the sums cancel); a wrong scale would give ~1.
  std::vector<float> xv, wv;
  for (int i = 0; i < 3 * 64; ++i) xv.push_back(std::sin(0.37f * i));
  for (int i = 0; i < 5 * 64; ++i) wv.push_back(std::cos(0.11f * i) * 0.05f);
  auto x = make({3, 64}, xv), w = make({5, 64}, wv);
  auto xc = zeros({3, 64}, DType::kU8), wc = zeros({5, 64}, DType::kU8);
  auto xs = zeros({3}), ws = zeros({5});
  ASSERT_TRUE(cpu::quantize_fp8_rows(x.t, xc.t, xs.t).ok());
  ASSERT_TRUE(cpu::quantize_fp8_rows(w.t, wc.t, ws.t).ok());
  auto out = zeros({3, 5}), ref = zeros({3, 5});
  MatmulOptions o;
  o.trans_b = true;
  ASSERT_TRUE(cpu::matmul_fp8({xc.t, xs.t}, {wc.t, ws.t}, out.t, o).ok());
  ASSERT_TRUE(cpu::matmul(x.t, w.t, ref.t, o).ok());
  double num = 0, den = 0;
  for (size_t i = 0; i < 15; ++i) {
    num += std::pow(out.values()[i] - ref.values()[i], 2);
    den += std::pow(ref.values()[i], 2);
  }
  EXPECT_LT(num / den, 1e-2);
  EXPECT_GT(num, 0.0);  // it did quantize
}

TEST(CpuMatmulFp8, RefusesLayoutsShapesAndDtypesItDoesNotTake) {
  auto ac = codes({2, 4}, {});
  auto as = make({2}, {1});
  auto bc = codes({3, 4}, {});
  auto bs = make({3}, {1});
  auto out = zeros({2, 3});
  MatmulOptions o;
  o.trans_b = true;
  ASSERT_TRUE(cpu::matmul_fp8({ac.t, as.t}, {bc.t, bs.t}, out.t, o).ok());
  MatmulOptions no_tb;
  Status s = cpu::matmul_fp8({ac.t, as.t}, {bc.t, bs.t}, out.t, no_tb);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("trans_b"), std::string::npos) << s.message();
  auto bk = codes({3, 5}, {});
  s = cpu::matmul_fp8({ac.t, as.t}, {bk.t, bs.t}, out.t, o);
  EXPECT_NE(s.message().find("inner dims differ"), std::string::npos) << s.message();
  auto wrong_out = zeros({2, 4});
  EXPECT_EQ(cpu::matmul_fp8({ac.t, as.t}, {bc.t, bs.t}, wrong_out.t, o).code(), StatusCode::kInvalidArgument);
  auto short_scales = make({2}, {1});
  s = cpu::matmul_fp8({ac.t, as.t}, {bc.t, short_scales.t}, out.t, o);
  EXPECT_NE(s.message().find("b.scales"), std::string::npos) << s.message();
  auto f16_bias = make({3}, {1}, DType::kF16);
  o.bias = &f16_bias.t;
  EXPECT_EQ(cpu::matmul_fp8({ac.t, as.t}, {bc.t, bs.t}, out.t, o).code(), StatusCode::kInvalidArgument);
  o.bias = nullptr;
  auto f32_codes = zeros({2, 4});
  EXPECT_EQ(cpu::matmul_fp8({f32_codes.t, as.t}, {bc.t, bs.t}, out.t, o).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::kernels
