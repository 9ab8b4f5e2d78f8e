// The shared-memory tiled GEMM core (fp32 SIMT) used by matmul.hip and
// conv2d.hip, and launch_gemm: conv2d's choice among it, the packed-half
// and the mma.sync kernels (matmul's is choose_gemm_route, gemm_route.h).
//
// C[batch](m, n) = sum_k A(batch, m, k) * B(batch, k, n), accumulated in fp32,
// then handed to an epilogue functor (bias, activation, residual, store).
// Operands are read through loader functors, so the same core serves strided
// or transposed matrices (matmul) and implicit im2col (conv2d: no im2col
// buffer). Each block computes a BM x BN tile; each thread a TM x TN
// register micro-tile whose rows/columns are spread BM/TM resp. BN/TN apart,
// so shared-memory reads are conflict-free and epilogue stores coalesce.
// Loaders tell whether k is their fastest-varying index (a_k_fast,
// b_k_fast) so that global loads go along contiguous memory.
#pragma once

#include "kernels/hip/gemm/gemm_dot2.h"
#include "kernels/hip/gemm/gemm_mma.h"
#include "kernels/hip/gemm/micro_tile.h"
#include "kernels/hip/hip_common.h"

namespace hipq::kernels::dev {

template <int BM, int BN, int BK, int TM, int TN, class LoadA, class LoadB, class Epilogue>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    gemm_tiled_kernel(int M, int N, int K, LoadA la, bool a_k_fast, LoadB lb, bool b_k_fast, Epilogue ep) {
  constexpr int kThreads = (BM / TM) * (BN / TN);
  constexpr int kColsT = BN / TN;  // threads along n
  constexpr int kRowsT = BM / TM;  // threads along m
  __shared__ float As[BK][BM + 4];
  __shared__ float Bs[BK][BN + 4];

  const int batch = blockIdx.z;
  const int m0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * BN;
  const int tid = threadIdx.x;
  const int tr = tid / kColsT;
  const int tc = tid % kColsT;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = tid; i < BM * BK; i += kThreads) {
      int mm, kk;
      if (a_k_fast) {
        kk = i % BK;
        mm = i / BK;
      } else {
        mm = i % BM;
        kk = i / BM;
      }
      const int m = m0 + mm, k = k0 + kk;
      As[kk][mm] = (m < M && k < K) ? la(batch, m, k) : 0.0f;
    }
    for (int i = tid; i < BN * BK; i += kThreads) {
      int nn, kk;
      if (b_k_fast) {
        kk = i % BK;
        nn = i / BK;
      } else {
        nn = i % BN;
        kk = i / BN;
      }
      const int n = n0 + nn, k = k0 + kk;
      Bs[kk][nn] = (n < N && k < K) ? lb(batch, k, n) : 0.0f;
    }
    __syncthreads();
    micro_tile_products<TM, TN, kRowsT, kColsT>(As, Bs, tr, tc, acc,
                                                [](float a, float b, float c) { return fmaf(a, b, c); });
    __syncthreads();
  }

  store_micro_tile<TM, TN, kRowsT, kColsT>(acc, batch, m0 + tr, n0 + tc, M, N, ep);
}

// The fp32 SIMT core alone: the big (128x128, 8x8 per thread) tile when
// `big` (choose_gemm_route: the problem's big tiles fill the device), else the
// small one (64x64, 4x4). Check hipGetLastError() after it.
template <class LoadA, class LoadB, class Epilogue>
void launch_gemm_simt(hipStream_t stream, bool big, int batch, int M, int N, int K, const LoadA& la, bool a_k_fast,
                      const LoadB& lb, bool b_k_fast, const Epilogue& ep) {
  if (big) {
    dim3 grid((N + 127) / 128, (M + 127) / 128, batch);
    gemm_tiled_kernel<128, 128, 8, 8, 8><<<grid, 256, 0, stream>>>(M, N, K, la, a_k_fast, lb, b_k_fast, ep);
  } else {
    dim3 grid((N + 63) / 64, (M + 63) / 64, batch);
    gemm_tiled_kernel<64, 64, 8, 4, 4><<<grid, 256, 0, stream>>>(M, N, K, la, a_k_fast, lb, b_k_fast, ep);
  }
}

// Launches the GEMM: with both operands f16 and dot2_ok (HipContext::
// dot2_f16, HIPQ_DOT2=1: meant for AMD GPUs), the packed-half kernel
// (gemm_dot2.h); on NVIDIA with both operands in the same 16-bit type
// (mma_dtype = kDtF16 / kDtBF16) and a device of compute capability >= 8.0
// (mma_ok), the matrix-unit kernel (gemm_mma.h), which copies plain operands
// (pa / pb set) straight to shared memory; otherwise the fp32 SIMT core with
// the big (128x128, 8x8 per thread) tile when the problem fills the device,
// else the small one (64x64, 4x4). Pass mma_dtype = -1 for fp32.
// kAllowMma / kAllowDot2 = false: a call site with its own matrix-unit /
// packed-half launch (conv2d) compiles no such kernel here.
template <bool kAllowMma = true, bool kAllowDot2 = true, class LoadA, class LoadB, class Epilogue>
hipError_t launch_gemm(hipStream_t stream, int multiprocessors, bool mma_ok, bool dot2_ok, int mma_dtype, int batch,
                       int M, int N, int K, const LoadA& la, bool a_k_fast, const LoadB& lb, bool b_k_fast,
                       const Epilogue& ep, const PlainOperand& pa = {}, const PlainOperand& pb = {}) {
  if constexpr (kAllowDot2) {
    if (dot2_ok && mma_dtype == kDtF16) {
      launch_gemm_dot2(stream, multiprocessors, batch, M, N, K, la, a_k_fast, lb, b_k_fast, ep, pa, pb);
      return hipGetLastError();
    }
  } else {
    (void)dot2_ok;
  }
#if HIPQ_VENDOR_NVIDIA
  if constexpr (kAllowMma) {
    if (mma_ok && (mma_dtype == kDtF16 || mma_dtype == kDtBF16)) {
      if (mma_dtype == kDtF16)
        launch_gemm_mma<__half>(stream, batch, M, N, K, la, a_k_fast, pa, lb, b_k_fast, pb, ep);
      else
        launch_gemm_mma<__nv_bfloat16>(stream, batch, M, N, K, la, a_k_fast, pa, lb, b_k_fast, pb, ep);
      return hipGetLastError();
    }
  }
#else
  (void)mma_ok;
  (void)mma_dtype;
  (void)pa;
  (void)pb;
#endif
  const int64_t big_blocks = static_cast<int64_t>((M + 127) / 128) * ((N + 127) / 128) * batch;
  launch_gemm_simt(stream, big_blocks >= multiprocessors, batch, M, N, K, la, a_k_fast, lb, b_k_fast, ep);
  return hipGetLastError();
}

}  // namespace hipq::kernels::dev
