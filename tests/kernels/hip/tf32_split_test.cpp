// The 3xTF32 split (kernels/hip/tf32_split.h) on the host: the functions the
// gemm_3xtf32 kernel runs per operand element, checked against an
// independent rounding (fp64 arithmetic) and in dot products of K = 4096
// against an fp64 reference, with the tensor core's arithmetic emulated
// (tf32 x tf32 products are exact in fp32; sums round to fp32).
#include "kernels/hip/tf32_split.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace hipq::kernels::dev {
namespace {

float as_float(uint32_t u) { return f32_from_bits(u); }

// cvt.rna.tf32.f32 by arithmetic: the nearest multiple of a tf32 ulp
// (2^(e - 10) for binade e, 2^-136 below the normal range), ties away from
// zero; inf past the largest tf32 value.
double reference_tf32(float x) {
  const double ax = std::fabs(static_cast<double>(x));
  if (ax == 0.0) return x;
  const int e = std::max(std::ilogb(x), -126);
  const double ulp = std::ldexp(1.0, e - 10);
  const double r = std::round(ax / ulp) * ulp;  // std::round: halves away from zero
  const double v = r >= std::ldexp(1.0, 128) ? std::numeric_limits<double>::infinity() : r;
  return std::signbit(x) ? -v : v;
}

TEST(Tf32Split, HalfwayValuesRoundAwayFromZero) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: to nearest even it would be 1.
  const float half_up = 1.0f + std::ldexp(1.0f, -11);
  EXPECT_EQ(as_float(tf32_rna(half_up)), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(as_float(tf32_rna(-half_up)), -(1.0f + std::ldexp(1.0f, -10)));
  // Just below halfway rounds down.
  EXPECT_EQ(as_float(tf32_rna(std::nextafter(half_up, 0.0f))), 1.0f);
}

TEST(Tf32Split, RoundingMatchesAnArithmeticReferenceOverEveryBinade) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = bits(rng);
    const float x = as_float(u);
    if (!std::isfinite(x)) continue;
    const uint32_t t = tf32_rna(x);
    ASSERT_EQ(t & 0x1fffu, 0u) << std::hexfloat << x;
    const double want = reference_tf32(x);
    ASSERT_EQ(static_cast<double>(as_float(t)), want) << std::hexfloat << x;
    ++checked;
  }
  EXPECT_GT(checked, 190000);
  // Subnormals and the top of the range.
  for (float x : {std::numeric_limits<float>::denorm_min(), 3.0f * std::numeric_limits<float>::denorm_min(),
                  std::ldexp(1.2345f, -140), std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                  std::ldexp(1.9990234f, 127)})
    EXPECT_EQ(static_cast<double>(as_float(tf32_rna(x))), reference_tf32(x)) << std::hexfloat << x;
  EXPECT_TRUE(std::isinf(as_float(tf32_rna(std::numeric_limits<float>::max()))));
}

TEST(Tf32Split, NonFiniteValuesStayNonFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(as_float(tf32_rna(inf)), inf);
  EXPECT_EQ(as_float(tf32_rna(-inf)), -inf);
  // A NaN whose payload would carry into the sign bit (CUDA's canonical NaN) stays NaN.
  EXPECT_EQ(tf32_rna(as_float(0x7fffffffu)), 0x7fffffffu);
  EXPECT_TRUE(std::isnan(as_float(tf32_rna(as_float(0xffffffffu)))));
  EXPECT_TRUE(std::isnan(as_float(tf32_rna(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(as_float(split_tf32(as_float(0x7fffffffu)).big)));
  EXPECT_TRUE(std::isinf(as_float(split_tf32(inf).big)));
  EXPECT_EQ(tf32_rna(0.0f), 0u);
  EXPECT_EQ(tf32_rna(-0.0f), 0x80000000u);
}

TEST(Tf32Split, BigPlusSmallIsWithinTwoToTheMinus22OfX) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-100, 100);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::ldexp(mant(rng), expo(rng)) * (i % 2 ? -1.0f : 1.0f);
    const Tf32Split s = split_tf32(x);
    ASSERT_EQ(s.big & 0x1fffu, 0u);
    ASSERT_EQ(s.small & 0x1fffu, 0u);
    const double sum = static_cast<double>(as_float(s.big)) + static_cast<double>(as_float(s.small));
    ASSERT_LE(std::fabs(sum - x), std::ldexp(std::fabs(static_cast<double>(x)), -22)) << std::hexfloat << x;
    ASSERT_LE(std::fabs(static_cast<double>(as_float(s.small))), std::ldexp(std::fabs(static_cast<double>(x)), -11));
  }
}

// Relative error (2-norm over `dots` dot products of length K) of three ways
// to compute them in fp32 arithmetic, against fp64.
struct DotErrors {
  double fma, three_tf32, one_tf32;
};

// Operand values: uniform in [-1, 1] times 2^e, e uniform in [-spread, spread].
DotErrors dot_errors(int dots, int K, int spread, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-spread, spread);
  auto draw = [&] { return std::ldexp(dist(rng), expo(rng)); };
  double e_fma = 0, e_3x = 0, e_1x = 0, ref2 = 0;
  std::vector<float> a(static_cast<size_t>(K)), b(static_cast<size_t>(K));
  for (int d = 0; d < dots; ++d) {
    for (int k = 0; k < K; ++k) {
      a[static_cast<size_t>(k)] = draw();
      b[static_cast<size_t>(k)] = draw();
    }
    double ref = 0;
    float fma = 0, acc3 = 0, acc1 = 0;
    for (int k = 0; k < K; ++k) {
      const float x = a[static_cast<size_t>(k)], y = b[static_cast<size_t>(k)];
      ref += static_cast<double>(x) * y;
      fma = std::fma(x, y, fma);
      const Tf32Split sx = split_tf32(x), sy = split_tf32(y);
      const float xb = as_float(sx.big), xs = as_float(sx.small), yb = as_float(sy.big), ys = as_float(sy.small);
      // Products of two tf32 values (11 significant bits each) are exact in
      // fp32; every sum is rounded to fp32 (the tensor core adds 8 products
      // before it rounds, so this is the pessimistic order), the kernel's
      // order: small_a big_b, big_a small_b, big_a big_b.
      acc3 += xs * yb;
      acc3 += xb * ys;
      acc3 += xb * yb;
      acc1 += xb * yb;
    }
    e_fma += (fma - ref) * (fma - ref);
    e_3x += (acc3 - ref) * (acc3 - ref);
    e_1x += (acc1 - ref) * (acc1 - ref);
    ref2 += ref * ref;
  }
  return {std::sqrt(e_fma / ref2), std::sqrt(e_3x / ref2), std::sqrt(e_1x / ref2)};
}

TEST(Tf32Split, ThreeTf32DotProductsOverK4096KeepFp32AccuracyAndTf32DoesNot) {
  for (int spread : {0, 6}) {
    const DotErrors e = dot_errors(64, 4096, spread, 5);
    std::printf("values in [-1, 1] x 2^[-%d, %d]: relative error fp32 FMA %.3g, 3xTF32 %.3g, tf32 %.3g\n", spread,
                spread, e.fma, e.three_tf32, e.one_tf32);
    SCOPED_TRACE(testing::Message() << "spread " << spread);
    EXPECT_LT(e.three_tf32, 4e-6);
    EXPECT_LT(e.three_tf32, 3 * e.fma + 1e-7);
    EXPECT_GT(e.one_tf32, 1e-4);
  }
}

}  // namespace
}  // namespace hipq::kernels::dev
