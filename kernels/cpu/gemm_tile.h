// micro_4x16: the register-tile inner kernel shared by the cpu matmul and
// conv2d: C[4 x 16] += A[4 x kb] @ B[kb x 16] with the C tile held in eight
// 8-float vectors for the whole depth block. Worth it only with 16 vector
// registers (AVX2); callers check tile_kernel_available() and fall back to
// their i-k-j loops otherwise.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "kernels/cpu/simd.h"

namespace hipq::kernels::cpu {
namespace {

inline bool tile_kernel_available() {
  static const bool avx2 = HIPQ_CPU_HAS_AVX2();
  return avx2;
}

// GCC/Clang vector of 8 floats: one AVX register under the AVX2 clone,
// two SSE registers in the baseline build.
typedef float v8f __attribute__((vector_size(32), aligned(4)));

// C[4 x 16] += A[4 x kb] @ B[kb x 16] with the C tile in eight vector
// registers for the whole depth block.
HIPQ_CPU_HOT void micro_4x16(const float* __restrict a, int64_t lda, const float* __restrict b, int64_t ldb,
                             float* __restrict c, int64_t ldc, int64_t kb) {
  v8f c00 = {}, c01 = {}, c10 = {}, c11 = {}, c20 = {}, c21 = {}, c30 = {}, c31 = {};
  const float* a1 = a + lda;
  const float* a2 = a + 2 * lda;
  const float* a3 = a + 3 * lda;
  for (int64_t k = 0; k < kb; ++k) {
    const v8f b0 = *reinterpret_cast<const v8f*>(b + k * ldb);
    const v8f b1 = *reinterpret_cast<const v8f*>(b + k * ldb + 8);
    const float x0 = a[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
    c00 += x0 * b0;
    c01 += x0 * b1;
    c10 += x1 * b0;
    c11 += x1 * b1;
    c20 += x2 * b0;
    c21 += x2 * b1;
    c30 += x3 * b0;
    c31 += x3 * b1;
  }
  v8f* c0 = reinterpret_cast<v8f*>(c);
  v8f* c1 = reinterpret_cast<v8f*>(c + ldc);
  v8f* c2 = reinterpret_cast<v8f*>(c + 2 * ldc);
  v8f* c3 = reinterpret_cast<v8f*>(c + 3 * ldc);
  c0[0] += c00;
  *reinterpret_cast<v8f*>(c + 8) += c01;
  c1[0] += c10;
  *reinterpret_cast<v8f*>(c + ldc + 8) += c11;
  c2[0] += c20;
  *reinterpret_cast<v8f*>(c + 2 * ldc + 8) += c21;
  c3[0] += c30;
  *reinterpret_cast<v8f*>(c + 3 * ldc + 8) += c31;
}

}  // namespace
}  // namespace hipq::kernels::cpu
