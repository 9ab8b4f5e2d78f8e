// e4m3 codes of two and of eight products at once, for the kernels that
// quantize (quantize_fp8_rows.hip, conv2d_fp8.hip, layer_norm_fp8.hip).
#pragma once

#include <cstdint>

#include "kernels/fp8_e4m3.h"
#include "kernels/hip/hip_common.h"

namespace hipq::kernels::dev {

// Two products x * s as e4m3 codes, lo at the lower address: on sm_89 and
// later the hardware conversion (cvt.rn.satfinite: round to nearest even,
// saturating to +-448), which is fp8::e4m3_from_f32's rule for every value
// but NaN, which callers keep off this path (a NaN row takes the software
// form); elsewhere fp8::quantize.
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi, float s) {
#if HIPQ_VENDOR_NVIDIA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  const float a = hi * s, b = lo * s;
  uint16_t d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(a), "f"(b));
  return d;
#else
  return static_cast<uint32_t>(fp8::quantize(lo, s)) | (static_cast<uint32_t>(fp8::quantize(hi, s)) << 8);
#endif
}

// Eight products v[e] * s as e4m3 codes, v[0] at the lowest address, in one
// 8-byte word: by e4m3x2 where the values hold no NaN (`finite`), else by
// fp8::quantize one at a time (a NaN's code is NaN's).
__device__ __forceinline__ uint2 e4m3x8(const float (&v)[8], float s, bool finite) {
  uint32_t w[2] = {0u, 0u};
  if (finite) {
#pragma unroll
    for (int e = 0; e < 8; e += 2) w[e / 4] |= e4m3x2(v[e], v[e + 1], s) << (8 * (e % 4));
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) w[e / 4] |= static_cast<uint32_t>(fp8::quantize(v[e], s)) << (8 * (e % 4));
  }
  return make_uint2(w[0], w[1]);
}

}  // namespace hipq::kernels::dev
