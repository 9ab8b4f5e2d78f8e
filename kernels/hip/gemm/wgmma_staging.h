// The shared-memory staging that the Hopper wgmma GEMMs of 16-bit elements
// (gemm_wgmma.h) and of e4m3 codes (gemm_wgmma_fp8.h) have in common:
//  - the 128-byte-swizzled K-major tile: 128 rows of 128 bytes, 16-byte chunk
//    c of row r at swizzle128(r, c), written by 16-byte cp.async copies;
//  - KMajorRowsFill<T>: the copies of a plain K-major operand into such a
//    tile, 256 threads each copying chunk tid % 8 of rows tid / 8 + 32 j (a
//    chunk is 16 / sizeof(T) elements: 8 halves or 16 codes);
//  - stage_wgmma_acc: an m64n128 fp32 accumulator (one warpgroup's 64 x 128
//    piece) written to a row-major fp32 tile in shared memory for the
//    epilogue.
// A chunk is 128 bytes of K / 8 either way, which is why one k-tile of either
// kernel has the same shared layout and descriptors.
#pragma once

#include <cstdint>

#include "kernels/hip/gemm/gemm_mma.h"

#if HIPQ_VENDOR_NVIDIA
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HIPQ_WGMMA_DEVICE 1
#else
#define HIPQ_WGMMA_DEVICE 0
#endif

namespace hipq::kernels::dev {

// Byte offset of 16-byte chunk `chunk` (0..7) of row `row` in a 128-byte-
// swizzled K-major tile: the chunk index is XORed with the row's index mod 8.
__device__ __forceinline__ uint32_t swizzle128(int row, int chunk) {
  return static_cast<uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4));
}

__device__ __forceinline__ void cp_async16_shared(uint32_t dst, const void* src, bool valid) {
#if HIPQ_WGMMA_DEVICE
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
#endif
}

// A plain K-major matrix of T: rows [0, rows), row r at p + batch * sb + r * ld
// (elements); ld, sb multiples of a chunk, p 16-byte aligned, K a multiple of
// a chunk. Copies past rows or K are zero-filled.
template <typename T>
struct KMajorRowsFill {
  static constexpr int kChunk = 16 / static_cast<int>(sizeof(T));  // elements a 16-byte copy
  const T* p = nullptr;
  int64_t sb = 0, ld = 0;
  int rows = 0, K = 0;
  const T* row[4];
  bool ok[4];
  __device__ __forceinline__ void begin(int batch, int row0, int tid) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + tid / 8 + 32 * j;
      ok[j] = r < rows;
      row[j] = p + static_cast<int64_t>(batch) * sb + static_cast<int64_t>(ok[j] ? r : 0) * ld + (tid % 8) * kChunk;
    }
  }
  __device__ __forceinline__ void issue(uint32_t tile, int k0, int tid) const {
    const bool k_ok = k0 + (tid % 8) * kChunk < K;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const bool v = ok[j] && k_ok;
      cp_async16_shared(tile + swizzle128(tid / 8 + 32 * j, tid % 8), v ? row[j] + k0 : p, v);
    }
  }
};

// Accumulator layout of an m64nN wgmma (per warp of the warpgroup, 16
// rows): for each 8-column group j, d[4j + 0/1] at (row lane/4, cols
// 8j + 2(lane%4) + 0/1), d[4j + 2/3] eight rows below. For thread t (0..127)
// of a warpgroup: its first row of the warpgroup's 64, and the first column
// of its pair in group j.
__device__ __forceinline__ int wgmma_acc_row(int t) { return (t / 32) * 16 + (t % 32) / 4; }
__device__ __forceinline__ int wgmma_acc_col(int t, int j) { return j * 8 + (t % 4) * 2; }

// Writes an m64n128 wgmma's accumulators of warpgroup wg = tid / 128 to its
// rows wg * 64 .. + 63 of cs (row stride ldc floats).
__device__ __forceinline__ void stage_wgmma_acc(float* cs, int ldc, const float (&d)[64], int tid) {
  const int r = (tid / 128) * 64 + wgmma_acc_row(tid % 128);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int c = wgmma_acc_col(tid, j);
    *reinterpret_cast<float2*>(cs + r * ldc + c) = make_float2(d[4 * j], d[4 * j + 1]);
    *reinterpret_cast<float2*>(cs + (r + 8) * ldc + c) = make_float2(d[4 * j + 2], d[4 * j + 3]);
  }
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
