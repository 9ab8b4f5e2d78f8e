// dot2_f16: two f16 products added into an fp32 accumulator, the packed-half
// instruction of GPUs without matrix units (AMD RDNA2, gfx1030:
// v_dot2_f32_f16, one a lane a cycle, twice the fp32 FMA rate). Used by the
// packed-half kernels (gemm_dot2.h, attention_dot2.h).
//
// On targets without the instruction (NVIDIA, other AMD targets) it is two
// fmaf in the same order, so the kernels that use it run, and are checked,
// on any GPU (HIPQ_DOT2=1: kernels/hip/hip_ops.h). The instruction's own
// rounding of the sum may differ from the two fmaf by an ulp of fp32.
#pragma once

#include "kernels/hip/half_pairs.h"
#include "kernels/hip/hip_common.h"

namespace hipq::kernels::dev {

// acc + a.lo * b.lo + a.hi * b.hi for packed f16 pairs a, b (lo at the lower
// address).
__device__ __forceinline__ float dot2_f16(uint32_t a, uint32_t b, float acc) {
#if defined(__HIP_DEVICE_COMPILE__) && !HIPQ_VENDOR_NVIDIA &&                                        \
    (defined(__gfx1030__) || defined(__gfx1031__) || defined(__gfx1032__) || defined(__gfx1033__) || \
     defined(__gfx1034__) || defined(__gfx1035__) || defined(__gfx1036__))
  typedef __fp16 half2_t __attribute__((ext_vector_type(2)));
  return __builtin_amdgcn_fdot2(__builtin_bit_cast(half2_t, a), __builtin_bit_cast(half2_t, b), acc, false);
#else
  const float a0 = from_16bit(kDtF16, static_cast<uint16_t>(a)),
              a1 = from_16bit(kDtF16, static_cast<uint16_t>(a >> 16));
  const float b0 = from_16bit(kDtF16, static_cast<uint16_t>(b)),
              b1 = from_16bit(kDtF16, static_cast<uint16_t>(b >> 16));
  return fmaf(a1, b1, fmaf(a0, b0, acc));
#endif
}

// The pairs of two 16-byte pieces of f16 values (interleave_pairs: lo from
// one row, hi from the next) into dst[0 .. 7], 16-byte aligned shared memory.
__device__ __forceinline__ void store_pairs8(uint32_t* dst, const uint4& lo, const uint4& hi) {
  const uint32_t l[4] = {lo.x, lo.y, lo.z, lo.w}, h[4] = {hi.x, hi.y, hi.z, hi.w};
  uint32_t w[8];
  interleave_pairs(l, h, w);
  reinterpret_cast<uint4*>(dst)[0] = make_uint4(w[0], w[1], w[2], w[3]);
  reinterpret_cast<uint4*>(dst)[1] = make_uint4(w[4], w[5], w[6], w[7]);
}

}  // namespace hipq::kernels::dev
