#include <cmath>
#include <vector>

#include "cpu_test_util.h"
#include "kernels/cpu/ops.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

// The op's definition: layer_norm's output rounded to x's dtype, then
// quantize_fp8_rows of it. A bf16 row whose normalised values round
// differently in bf16 than in f32 shows that the rounding comes first.
TEST(CpuLayerNormFp8, CodesAndScalesAreThoseOfTheRoundedNormThenQuantized) {
  std::vector<float> xv, gv, bv;
  for (int i = 0; i < 3 * 40; ++i) xv.push_back(std::sin(0.37f * static_cast<float>(i)) * 3.0f + 0.25f);
  for (int i = 0; i < 40; ++i) {
    gv.push_back(0.5f + 0.03f * static_cast<float>(i));
    bv.push_back(0.1f * std::cos(static_cast<float>(i)));
  }
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    auto x = make({3, 40}, xv, dt);
    auto g = make({40}, gv, dt);
    auto b = make({40}, bv, dt);
    auto codes = zeros({3, 40}, DType::kU8);
    auto scales = zeros({3});
    ASSERT_TRUE(cpu::layer_norm_fp8(x.t, &g.t, &b.t, 1e-5f, codes.t, scales.t).ok());
    auto y = zeros({3, 40}, dt);
    auto codes2 = zeros({3, 40}, DType::kU8);
    auto scales2 = zeros({3});
    ASSERT_TRUE(cpu::layer_norm(x.t, &g.t, &b.t, y.t, 1e-5f).ok());
    ASSERT_TRUE(cpu::quantize_fp8_rows(y.t, codes2.t, scales2.t).ok());
    EXPECT_EQ(codes.bytes, codes2.bytes);
    EXPECT_EQ(scales.values(), scales2.values());
    // Against the f32 norm quantized without the rounding: bf16 changes a
    // row's amax, and so its scale.
    if (dt == DType::kBF16) {
      auto x32 = make({3, 40}, x.values());
      auto g32 = make({40}, g.values());
      auto b32 = make({40}, b.values());
      auto y32 = zeros({3, 40});
      auto codes32 = zeros({3, 40}, DType::kU8);
      auto scales32 = zeros({3});
      ASSERT_TRUE(cpu::layer_norm(x32.t, &g32.t, &b32.t, y32.t, 1e-5f).ok());
      ASSERT_TRUE(cpu::quantize_fp8_rows(y32.t, codes32.t, scales32.t).ok());
      EXPECT_NE(scales.values(), scales32.values());
    }
  }
}

TEST(CpuLayerNormFp8, ShapesThatDoNotFitAreRefusedWithTheOperands) {
  auto x = make({2, 8}, std::vector<float>(16, 1.0f), DType::kBF16);
  auto codes = zeros({2, 7}, DType::kU8);
  auto scales = zeros({2});
  Status s = cpu::layer_norm_fp8(x.t, nullptr, nullptr, 1e-5f, codes.t, scales.t);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("layer_norm_fp8"), std::string::npos) << s.message();
  // A strided x (every other row of a wider tensor) is refused: contiguous only.
  auto wide = make({4, 8}, std::vector<float>(32, 1.0f), DType::kBF16);
  Tensor every_other = wide.t;
  every_other.shape[0] = 2;
  every_other.stride[0] = 16;
  auto codes2 = zeros({2, 8}, DType::kU8);
  s = cpu::layer_norm_fp8(every_other, nullptr, nullptr, 1e-5f, codes2.t, scales.t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("contiguous"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hipq::kernels
