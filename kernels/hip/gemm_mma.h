// Matrix-unit variant of the GEMM core for f16/bf16 operands on NVIDIA
// (sm_80+: warp-level mma through the WMMA API), used by launch_gemm in
// gemm_tile.h when both operands are stored in the same 16-bit type. Same
// loader/epilogue contract as gemm_tiled_kernel: operands are read through
// loaders (exact: f16/bf16 values convert to the fragment type without
// rounding), products accumulate in fp32, the epilogue sees fp32 sums.
// Block tile 128x128, BK = 32, 8 warps in a 2 x 4 grid, each 64x32 of C
// (4 x 2 fragments of 16x16). AMD builds never include this (gfx1030 has no
// matrix units; CDNA would use rocWMMA-style intrinsics, not in ROCm 5.2.3).
#pragma once

#include "kernels/hip/hip_common.h"

#if HIPQ_VENDOR_NVIDIA
#include <hip/hip_bf16.h>
#include <mma.h>  // CUDA's WMMA API (NVIDIA build only)

namespace hipq::kernels::dev {

template <typename TC>
__device__ __forceinline__ TC to_tc(float v);
template <>
__device__ __forceinline__ __half to_tc<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 to_tc<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename TC, class LoadA, class LoadB, class Epilogue>
__global__ void __launch_bounds__(256)
    gemm_mma_kernel(int M, int N, int K, LoadA la, bool a_k_fast, LoadB lb, bool b_k_fast, Epilogue ep) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  namespace wmma = nvcuda::wmma;
  constexpr int BM = 128, BN = 128, BK = 32, LDA = BK + 8, LDB = BN + 8;
  __shared__ __align__(128) TC As[BM * LDA];
  __shared__ __align__(128) TC Bs[BK * LDB];
  __shared__ __align__(128) float Cs[8][16 * 16];

  const int batch = blockIdx.z;
  const int m0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * BN;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int wm = warp / 4;  // 0..1: rows wm*64
  const int wn = warp % 4;  // 0..3: cols wn*32

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = tid; i < BM * BK; i += 256) {
      int mm, kk;
      if (a_k_fast) {
        kk = i % BK;
        mm = i / BK;
      } else {
        mm = i % BM;
        kk = i / BM;
      }
      const int m = m0 + mm, k = k0 + kk;
      As[mm * LDA + kk] = to_tc<TC>((m < M && k < K) ? la(batch, m, k) : 0.0f);
    }
    for (int i = tid; i < BN * BK; i += 256) {
      int nn, kk;
      if (b_k_fast) {
        kk = i % BK;
        nn = i / BK;
      } else {
        nn = i % BN;
        kk = i / BN;
      }
      const int n = n0 + nn, k = k0 + kk;
      Bs[kk * LDB + nn] = to_tc<TC>((n < N && k < K) ? lb(batch, k, n) : 0.0f);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, TC, wmma::row_major> fa[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, TC, wmma::row_major> fb[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(fa[i], As + (wm * 64 + i * 16) * LDA + kk, LDA);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], Bs + kk * LDB + wn * 32 + j * 16, LDB);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(Cs[warp], acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const int mb = m0 + wm * 64 + i * 16;
      const int nb = n0 + wn * 32 + j * 16;
#pragma unroll 1
      for (int e = lane; e < 256; e += 32) {
        const int m = mb + e / 16, n = nb + e % 16;
        if (m < M && n < N) ep(batch, m, n, Cs[warp][e]);
      }
      __syncwarp();
    }
  }
#else
  __trap();  // launch_gemm only selects this kernel on sm_80+
#endif
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
