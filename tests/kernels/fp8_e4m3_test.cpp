// The e4m3 conversions and row scale of kernels/fp8_e4m3.h, the functions the
// cpu backend and the hip kernels both run: every code against its value
// computed from the format's definition, hand-computed roundings, and the
// encoder against a nearest-code search over all finite codes.
#include "kernels/fp8_e4m3.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace hipq::kernels {
namespace {

// The value of code c from the format: bias 7, subnormals m/8 * 2^-6, S.1111.111 NaN.
double value_of(int c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

// Round to nearest, ties to the even code, saturating: a search over 0x00..0x7E.
uint8_t nearest_code(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xFF : 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(x);
  if (a >= 448.0) return sign | 0x7E;
  int best = 0;
  double best_d = a;
  for (int c = 1; c <= 0x7E; ++c) {
    const double d = std::fabs(value_of(c) - a);
    if (d < best_d || (d == best_d && (c & 1) == 0 && (best & 1) == 1)) best = c, best_d = d;
  }
  return static_cast<uint8_t>(sign | best);
}

TEST(Fp8E4m3, EveryCodeDecodesToItsValueAndEncodesBackToItself) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const float v = fp8::f32_from_e4m3(static_cast<uint8_t>(c));
    const double want = value_of(c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(v)) << c;
      EXPECT_EQ(fp8::e4m3_from_f32(v) & 0x7F, 0x7F) << c;
      ++nans;
      continue;
    }
    EXPECT_EQ(static_cast<double>(v), want) << "code " << c;
    EXPECT_EQ(std::signbit(v), c >= 128) << c;
    EXPECT_EQ(fp8::e4m3_from_f32(v), c) << "code " << c << " value " << v;
  }
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(fp8::f32_from_e4m3(0x7E), 448.0f);
  EXPECT_EQ(fp8::f32_from_e4m3(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8::f32_from_e4m3(0x08), std::ldexp(1.0f, -6));
}

TEST(Fp8E4m3, HandComputedRoundings) {
  struct Case {
    float x;
    uint8_t code;
  };
  const Case cases[] = {
      {1.0f, 0x38},                      // 2^0: exponent 7, mantissa 0
      {0.1f, 0x1D},                      // 1.6 * 2^-4 -> 1.625 * 2^-4 (mantissa 4.8 -> 5)
      {1.0625f, 0x38},                   // halfway 1 and 1.125: to the even mantissa 0
      {1.1875f, 0x3A},                   // halfway 1.125 and 1.25: to the even mantissa 2
      {447.0f, 0x7E},                    // rounds up to 448
      {448.0f, 0x7E}, {449.0f, 0x7E}, {464.0f, 0x7E}, {1e30f, 0x7E},  // saturated
      {-500.0f, 0xFE},
      {std::numeric_limits<float>::infinity(), 0x7E},
      {-std::numeric_limits<float>::infinity(), 0xFE},
      {std::numeric_limits<float>::quiet_NaN(), 0x7F},
      {-0.0f, 0x80}, {0.0f, 0x00},
      {std::ldexp(1.0f, -6), 0x08},      // smallest normal
      {std::ldexp(1.0f, -9), 0x01},      // smallest subnormal
      {std::ldexp(1.0f, -10), 0x00},     // half the smallest subnormal: tie to even 0
      {std::ldexp(1.5f, -10), 0x01},     // above the tie
      {std::ldexp(3.0f, -10), 0x02},     // 1.5 subnormal steps: tie to even 2
      {std::ldexp(15.0f, -10), 0x08},    // 7.5 steps: tie, to 8 = the smallest normal
      {std::ldexp(-5.0f, -10), 0x82},    // -2.5 steps: tie to even 2, sign kept
      {1e-30f, 0x00}, {-1e-30f, 0x80},   // underflow to signed zero
      {std::numeric_limits<float>::denorm_min(), 0x00},
  };
  for (const Case& c : cases) EXPECT_EQ(fp8::e4m3_from_f32(c.x), c.code) << "x = " << c.x;
}

TEST(Fp8E4m3, EncoderMatchesTheNearestCodeSearchAtEveryMidpointAndAtRandom) {
  // Every midpoint between neighbouring finite codes, one f32 ulp either side and on it.
  for (int c = 0; c < 0x7E; ++c) {
    const float mid = static_cast<float>((value_of(c) + value_of(c + 1)) / 2);
    for (const float x : {std::nextafter(mid, 0.0f), mid, std::nextafter(mid, 1000.0f)}) {
      EXPECT_EQ(fp8::e4m3_from_f32(x), nearest_code(x)) << "x = " << x;
      EXPECT_EQ(fp8::e4m3_from_f32(-x), nearest_code(-x)) << "x = " << -x;
    }
  }
  std::mt19937_64 rng(35);
  std::uniform_real_distribution<double> exponent(-14.0, 10.0);
  for (int i = 0; i < 20000; ++i) {
    const float x = static_cast<float>(std::exp2(exponent(rng)) * ((rng() & 1) ? -1 : 1));
    ASSERT_EQ(fp8::e4m3_from_f32(x), nearest_code(x)) << "x = " << x;
  }
}

TEST(Fp8E4m3, RowScaleIs448OverAmaxWithTorchaosFloorAndItsReciprocal) {
  EXPECT_EQ(fp8::row_scale(448.0f), 1.0f);
  EXPECT_EQ(fp8::row_scale(2.0f), 224.0f);
  EXPECT_EQ(fp8::row_scale(3.0f), static_cast<float>(448.0 / 3.0));
  EXPECT_EQ(fp8::row_scale(0.0f), static_cast<float>(448.0 / 1e-12));  // an all-zero row
  EXPECT_TRUE(std::isnan(fp8::row_scale(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(fp8::row_scale(std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(fp8::dequant_scale(224.0f), 1.0f / 224.0f);
  // The largest element of a row always lands on +-448 exactly.
  for (const float amax : {0.3f, 1.7f, 123.456f, 1e-5f, 6e4f}) {
    EXPECT_EQ(fp8::quantize(amax, fp8::row_scale(amax)), 0x7E) << amax;
    EXPECT_EQ(fp8::quantize(-amax, fp8::row_scale(amax)), 0xFE) << amax;
  }
}

}  // namespace
}  // namespace hipq::kernels
