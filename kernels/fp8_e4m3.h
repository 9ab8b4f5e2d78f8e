// The fp8 e4m3 format ("e4m3fn": 1 sign, 4 exponent bits of bias 7, 3
// mantissa bits, no infinities, one NaN pattern per sign S.1111.111, largest
// finite 448, subnormals m * 2^-9) and the row-wise scaling of the fp8
// precision (docs/kernels.md, "fp8"). Plain C++ marked HIPQ_HOST_DEVICE: the
// cpu backend, the hip kernels and the host tests run these very functions,
// so the GPU's codes are the CPU reference's bit for bit.
//
// Quantizing a row x[0..K) (torchao's dynamic row-wise float8 recipe,
// Float8LinearConfig rowwise / float8_dynamic_activation_float8_weight PerRow):
//   amax  = max |x[k]| (NaN if any element is NaN)
//   s     = f32(448 / max(amax, 1e-12)), the division in fp64 as torchao's
//           amax_to_scale does (f32 division rounds identically: 53 >= 2*24+2)
//   q[k]  = e4m3(x[k] * s): the product rounded to f32, then to e4m3 by round
//           to nearest even with saturation (|v| >= 448 and +-inf give +-448,
//           NaN gives S.1111.111), as clamp(-448, 448) then .to(float8_e4m3fn)
//   scale = f32(1 / s): the dequantization factor torch._scaled_mm takes as
//           scale_a / scale_b (torchao passes scale.reciprocal()).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/hip/host_device.h"
#if defined(__CUDACC__) || defined(__HIP__)
#include <hip/hip_runtime.h>  // __host__ __device__ and the bit casts (the kernels' include path)
#endif
#include "kernels/hip/tf32_split.h"  // dev::f32_bits, dev::f32_from_bits

namespace hipq::kernels::fp8 {

inline constexpr float kE4m3Max = 448.0f;
inline constexpr double kAmaxFloor = 1e-12;  // torchao's EPS

// f32 -> e4m3 code: round to nearest even, saturating to +-448; NaN keeps its
// sign (0x7F / 0xFF); -0 stays 0x80.
HIPQ_HOST_DEVICE inline uint8_t e4m3_from_f32(float x) {
  const uint32_t u = dev::f32_bits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Fu);  // NaN
  if (a >= 0x43E00000u) return static_cast<uint8_t>(sign | 0x7Eu);  // >= 448 (inf included): 448
  if (a >= 0x3C800000u) {
    // Normal in e4m3 (>= 2^-6): drop 20 mantissa bits, ties to even; a carry
    // moves into the exponent. Rebias 127 -> 7: (120 << 3) off the top bits.
    const uint32_t r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
    return static_cast<uint8_t>(sign | (r - (120u << 3)));
  }
  if ((a >> 23) == 0) return sign;  // zero or an f32 subnormal (< 2^-126): 0
  // e4m3 subnormal range: q = round_half_even(|x| * 2^9) in [0, 8] (8 is
  // 2^-6, the smallest normal, code 0x08 as it stands).
  const int e = static_cast<int>(a >> 23) - 127;  // <= -7
  const uint64_t m = (a & 0x7FFFFFu) | 0x800000u;  // |x| = m * 2^(e - 23)
  const int shift = 14 - e;                         // |x| * 2^9 = m >> shift
  if (shift > 40) return sign;
  uint64_t q = m >> shift;
  const uint64_t rem = m & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint8_t>(sign | static_cast<uint8_t>(q));
}

// e4m3 code -> its exact value as f32 (NaN for S.1111.111).
HIPQ_HOST_DEVICE inline float f32_from_e4m3(uint8_t c) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t e = (c >> 3) & 0xFu, m = c & 7u;
  if (e == 15 && m == 7) return dev::f32_from_bits(sign | 0x7FC00000u);
  if (e == 0) return dev::f32_from_bits(sign | dev::f32_bits(static_cast<float>(m) * (1.0f / 512.0f)));
  return dev::f32_from_bits(sign | ((e + 120u) << 23) | (m << 20));
}

// The quantization multiplier s of a row whose largest magnitude is amax
// (NaN stays NaN: the row's codes are then NaN, as in torch).
HIPQ_HOST_DEVICE inline float row_scale(float amax) {
  const double a = static_cast<double>(amax);
  const double floored = a < kAmaxFloor ? kAmaxFloor : a;  // NaN < floor is false: NaN stays
  return static_cast<float>(448.0 / floored);
}

// The dequantization factor stored beside the codes: f32(1 / s).
HIPQ_HOST_DEVICE inline float dequant_scale(float s) { return 1.0f / s; }

// One element of a row quantized with multiplier s.
HIPQ_HOST_DEVICE inline uint8_t quantize(float x, float s) { return e4m3_from_f32(x * s); }

}  // namespace hipq::kernels::fp8
