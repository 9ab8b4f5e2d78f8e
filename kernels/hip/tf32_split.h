// The 3xTF32 split of an fp32 value for tensor-core products (gemm_3xtf32.h):
// x = big + small + r with big = tf32(x) and small = tf32(x - big), both
// rounded as cvt.rna.tf32.f32 rounds (to nearest, ties away from zero, to 10
// mantissa bits), so |r| <= 2^-22 |x|. A product x * y is then taken as
// big_x big_y + big_x small_y + small_x big_y (small_x small_y, below 2^-22 of
// it, is dropped, as CUTLASS's "fast accurate" 3xTF32 does); each tf32
// product is exact in the fp32 accumulator, so the sum keeps fp32's accuracy.
//
// Plain C++ with __host__ __device__ under a GPU compiler, so the host-side
// test (tests/kernels/hip/tf32_split_test.cpp) runs exactly the functions the
// kernel runs. Values are tf32 bit patterns in uint32_t (the low 13 bits
// zero), the form mma.sync takes its .tf32 operands in.
//
// Non-finite values: NaN stays NaN (canonical 0x7fffffff); +-inf stays inf,
// and its small part is not finite, so a product with an infinite operand is
// not finite either (NaN where fp32 FMA may give +-inf). Finite values at or
// above the largest tf32 value plus half an ulp (|x| >= 0x1.ffep+127) round to
// inf, as cvt.rna does.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/hip/host_device.h"

namespace hipq::kernels::dev {

HIPQ_HOST_DEVICE inline uint32_t f32_bits(float x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

HIPQ_HOST_DEVICE inline float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// tf32 bits of a finite x (or inf): half an ulp added to the magnitude, then
// the low 13 bits cleared. A NaN with a large payload would carry into the
// sign bit here; tf32_rna handles NaN.
HIPQ_HOST_DEVICE inline uint32_t tf32_rna_finite(float x) { return (f32_bits(x) + 0x1000u) & 0xffffe000u; }

// cvt.rna.tf32.f32: tf32 bits of any x.
HIPQ_HOST_DEVICE inline uint32_t tf32_rna(float x) {
  return (f32_bits(x) & 0x7fffffffu) > 0x7f800000u ? 0x7fffffffu : tf32_rna_finite(x);
}

struct Tf32Split {
  uint32_t big, small;
};

// One split per operand element (done when the element is loaded into a
// fragment, not per product). small needs no NaN test: x - big is finite
// whenever x is, and when x is not, big already makes every product of x
// non-finite.
HIPQ_HOST_DEVICE inline Tf32Split split_tf32(float x) {
  const uint32_t big = tf32_rna(x);
  return {big, tf32_rna_finite(x - f32_from_bits(big))};
}

// split_tf32 of every element of an mma fragment.
template <int N>
HIPQ_HOST_DEVICE inline void split_tf32_frag(const float (&v)[N], uint32_t (&big)[N], uint32_t (&small)[N]) {
  for (int e = 0; e < N; ++e) {
    const Tf32Split s = split_tf32(v[e]);
    big[e] = s.big;
    small[e] = s.small;
  }
}

}  // namespace hipq::kernels::dev
