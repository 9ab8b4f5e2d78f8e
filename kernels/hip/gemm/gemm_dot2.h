// Packed-half GEMM core for f16 operands on GPUs without matrix units (AMD
// RDNA2, gfx1030: no WMMA/MFMA, but v_dot2_f32_f16: two f16 products added
// into an fp32 accumulator, one instruction a lane a cycle, twice the fp32
// FMA rate). Used for f16 x f16 products where HipContext::dot2_f16 holds:
// matmul's kDot2 route (gemm_route.h; through its loaders or plain
// operands) and conv2d's NHWC route (Dot2NhwcConvFill).
//
// Same blocking as gemm_tiled_kernel (a BM x BN tile a block, a TM x TN
// register micro-tile a thread, its rows / columns BM / TM resp. BN / TN
// apart), but shared memory holds the operands as f16 pairs along k: word
// As[kp][m] is (A(m, 2kp), A(m, 2kp + 1)), Bs[kp][n] likewise, so one 32-bit
// LDS read feeds one dot2 and a k-tile moves half the bytes of the fp32 core.
// How a tile is filled is a policy (below): 16-byte pieces where the operand
// allows, element loads otherwise; k past K reads as 0.
//
// Shapes for RDNA2 (wave32): 256 threads = 8 waves a block; 128 x 128 tiles
// with 8 x 8 a thread (64 fp32 accumulators + 16 packed operands) where the
// problem fills the device, else 64 x 64 with 4 x 4; BK = 32 (16 pairs): two
// 8.3 KB (resp. 4.2 KB) operand tiles, far inside the 64 KB LDS of a
// workgroup processor, one barrier pair per 16 pairs. A wave's 32 lanes are
// two rows of 16 threads along n: its A reads are two broadcast words, its
// B reads 16 consecutive words, so LDS reads are conflict-free.
//
// dot2 on other targets: two fmaf (dot2.h), which is how the tiling is
// checked on any GPU (HIPQ_DOT2=1: kernels/hip/hip_ops.h).
#pragma once

#include "kernels/hip/dot2.h"
#include "kernels/hip/gemm/gemm_mma.h"  // PlainOperand
#include "kernels/hip/gemm/micro_tile.h"
#include "kernels/hip/hip_common.h"

namespace hipq::kernels::dev {

// ---- fills: tile[kp][rr] = the f16 pairs (k0 + 2 kp, k0 + 2 kp + 1) of row
// r0 + rr (rr < R) of an operand, 0 past its rows or K. The A operand's rows
// are m, the B operand's n. Each policy has
//   template <int R, int KP, int kThreads>
//   void fill(uint32_t (&tile)[KP][R + 4], int tid, int r0, int k0, int batch) const;

// Rows whose k runs are contiguous in 16-byte pieces: piece(batch, r, k)
// gives elements k .. k + 7 of row r (zeros where they are not in the
// operand; k is a multiple of 8), stored as 4 pairs.
template <int R, int KP, int kThreads, class Piece>
__device__ __forceinline__ void fill_k_pieces(uint32_t (&tile)[KP][R + 4], int tid, int r0, int k0, int batch,
                                              const Piece& piece) {
  constexpr int kPieces = KP / 4;  // 4 pairs a piece, pieces a row
  for (int i = tid; i < R * kPieces; i += kThreads) {
    const int rr = i / kPieces, q = i % kPieces;
    const uint4 v = piece(batch, r0 + rr, k0 + 8 * q);
    tile[4 * q][rr] = v.x;
    tile[4 * q + 1][rr] = v.y;
    tile[4 * q + 2][rr] = v.z;
    tile[4 * q + 3][rr] = v.w;
  }
}

// Any operand, element by element through its loader (matmul's MatLoader,
// conv2d's WeightLoader / Im2colLoader: B's loader is called (batch, k, n)),
// consecutive threads along the operand's contiguous index. The loader gives
// fp32 values of f16 elements, which pack back exactly.
template <class Load, bool kIsB>
struct Dot2LoaderFill {
  Load load;
  bool k_fast;  // k is the operand's contiguous index
  int rows, K;
  __device__ __forceinline__ float elem(int batch, int r, int k) const {
    if constexpr (kIsB)
      return load(batch, k, r);
    else
      return load(batch, r, k);
  }
  template <int R, int KP, int kThreads>
  __device__ __forceinline__ void fill(uint32_t (&tile)[KP][R + 4], int tid, int r0, int k0, int batch) const {
    for (int i = tid; i < R * KP; i += kThreads) {
      const int kp = k_fast ? i % KP : i / R;
      const int rr = k_fast ? i / KP : i % R;
      const int r = r0 + rr, k = k0 + 2 * kp;
      const float lo = r < rows && k < K ? elem(batch, r, k) : 0.0f;
      const float hi = r < rows && k + 1 < K ? elem(batch, r, k + 1) : 0.0f;
      tile[kp][rr] = pack2_16bit(kDtF16, lo, hi);
    }
  }
};

// A plain operand (PlainOperand, gemm_mma.h: 16-byte aligned pieces) with
// 16-byte loads: along k when k_fast (element (r, k) at p[r * ld + k]; K a
// multiple of 8), else along the rows, one piece at k and one at k + 1
// interleaved into pairs (element (r, k) at p[k * ld + r]; rows a multiple
// of 8).
struct Dot2PlainFill {
  PlainOperand plain;
  bool k_fast;
  int rows, K;
  template <int R, int KP, int kThreads>
  __device__ __forceinline__ void fill(uint32_t (&tile)[KP][R + 4], int tid, int r0, int k0, int batch) const {
    const uint16_t* p = static_cast<const uint16_t*>(plain.p) + static_cast<int64_t>(batch) * plain.sb;
    if (k_fast) {
      fill_k_pieces<R, KP, kThreads>(tile, tid, r0, k0, batch, [&](int, int r, int k) {
        return r < rows && k < K ? *reinterpret_cast<const uint4*>(p + static_cast<int64_t>(r) * plain.ld + k)
                                 : make_uint4(0u, 0u, 0u, 0u);
      });
      return;
    }
    constexpr int kPieces = R / 8;  // 8 rows a piece, pieces a k
    for (int i = tid; i < KP * kPieces; i += kThreads) {
      const int kp = i / kPieces, rr = (i % kPieces) * 8, r = r0 + rr, k = k0 + 2 * kp;
      uint4 lo = make_uint4(0u, 0u, 0u, 0u), hi = lo;
      if (r < rows && k < K) lo = *reinterpret_cast<const uint4*>(p + static_cast<int64_t>(k) * plain.ld + r);
      if (r < rows && k + 1 < K)
        hi = *reinterpret_cast<const uint4*>(p + static_cast<int64_t>(k + 1) * plain.ld + r);
      store_pairs8(&tile[kp][rr], lo, hi);  // rows rr .. rr + 7: (k, k + 1)
    }
  }
};

// The B operand of a convolution over an NHWC copy of its input (conv2d.hip:
// to_nhwc_input), weights taps-last: column n is output pixel n of image
// `batch`, k = (ky, kx, c), so with C a multiple of 8 a piece of 8 k is 8
// channels of one input pixel, one 16-byte load (zeros in the padding).
struct Dot2NhwcConvFill {
  const uint16_t* x;  // [images, H, W, C]
  int C, H, W, Wo, KW, stride, pad;
  int rows, K;  // output pixels Ho * Wo, K = KH * KW * C
  template <int R, int KP, int kThreads>
  __device__ __forceinline__ void fill(uint32_t (&tile)[KP][R + 4], int tid, int r0, int k0, int batch) const {
    fill_k_pieces<R, KP, kThreads>(tile, tid, r0, k0, batch, [&](int b, int n, int k) {
      if (n >= rows || k >= K) return make_uint4(0u, 0u, 0u, 0u);
      const int tap = k / C, c = k - tap * C;
      const int ky = tap / KW, kx = tap - ky * KW;
      const int y = n / Wo, xo = n - y * Wo;
      const int iy = y * stride + ky - pad, ix = xo * stride + kx - pad;
      if (iy < 0 || iy >= H || ix < 0 || ix >= W) return make_uint4(0u, 0u, 0u, 0u);
      return *reinterpret_cast<const uint4*>(x + ((static_cast<int64_t>(b) * H + iy) * W + ix) * C + c);
    });
  }
};

// A matmul operand: plain (Dot2PlainFill) where `plain` is set, else
// through its loader (Dot2LoaderFill), chosen per launch at run time so that
// one kernel serves every operand layout (fewer instantiations to compile).
template <class Load, bool kIsB>
struct Dot2OperandFill {
  Dot2LoaderFill<Load, kIsB> loader;
  PlainOperand plain;
  template <int R, int KP, int kThreads>
  __device__ __forceinline__ void fill(uint32_t (&tile)[KP][R + 4], int tid, int r0, int k0, int batch) const {
    if (plain.p)
      Dot2PlainFill{plain, loader.k_fast, loader.rows, loader.K}.template fill<R, KP, kThreads>(tile, tid, r0, k0,
                                                                                                 batch);
    else
      loader.template fill<R, KP, kThreads>(tile, tid, r0, k0, batch);
  }
};

// C[batch] = A B; FillA / FillB are the fills above.
template <int BM, int BN, int BK, int TM, int TN, class FillA, class FillB, class Epilogue>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    gemm_dot2_kernel(int M, int N, int K, FillA fa, FillB fb, Epilogue ep) {
  static_assert(BK % 8 == 0 && BM % 8 == 0 && BN % 8 == 0, "whole 16-byte pieces along k and along the rows");
  constexpr int KP = BK / 2;
  constexpr int kThreads = (BM / TM) * (BN / TN);
  constexpr int kColsT = BN / TN;  // threads along n
  constexpr int kRowsT = BM / TM;  // threads along m
  // Rows of BM + 4 words: 16-byte aligned (row-wise pieces are stored as
  // two uint4), and the k-wise fills' four stores of a piece fall in
  // different banks.
  __shared__ __align__(16) uint32_t As[KP][BM + 4];
  __shared__ __align__(16) uint32_t Bs[KP][BN + 4];

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
    fa.template fill<BM, KP, kThreads>(As, tid, m0, k0, batch);
    fb.template fill<BN, KP, kThreads>(Bs, tid, n0, k0, batch);
    __syncthreads();
    micro_tile_products<TM, TN, kRowsT, kColsT>(As, Bs, tr, tc, acc,
                                                [](uint32_t a, uint32_t b, float c) { return dot2_f16(a, b, c); });
    __syncthreads();
  }

  store_micro_tile<TM, TN, kRowsT, kColsT>(acc, batch, m0 + tr, n0 + tc, M, N, ep);
}

// C[batch] = A B through the packed-half kernel: the 128 x 128 tile when its
// blocks fill the device, else 64 x 64 (as the fp32 core chooses).
template <class FillA, class FillB, class Epilogue>
void launch_gemm_dot2(hipStream_t stream, int multiprocessors, int batch, int M, int N, int K, const FillA& fa,
                      const FillB& fb, const Epilogue& ep) {
  const int64_t big_blocks = static_cast<int64_t>((M + 127) / 128) * ((N + 127) / 128) * batch;
  if (big_blocks >= multiprocessors) {
    dim3 grid((N + 127) / 128, (M + 127) / 128, batch);
    gemm_dot2_kernel<128, 128, 32, 8, 8><<<grid, 256, 0, stream>>>(M, N, K, fa, fb, ep);
  } else {
    dim3 grid((N + 63) / 64, (M + 63) / 64, batch);
    gemm_dot2_kernel<64, 64, 32, 4, 4><<<grid, 256, 0, stream>>>(M, N, K, fa, fb, ep);
  }
}

// The loader-based entry (matmul's kDot2 route): plain operands (pa /
// pb set, as for the matrix-unit kernel) with 16-byte loads, others through
// their loaders (Dot2OperandFill).
template <class LoadA, class LoadB, class Epilogue>
void launch_gemm_dot2(hipStream_t stream, int multiprocessors, int batch, int M, int N, int K, const LoadA& la,
                      bool a_k_fast, const LoadB& lb, bool b_k_fast, const Epilogue& ep, const PlainOperand& pa,
                      const PlainOperand& pb) {
  const Dot2OperandFill<LoadA, false> fa{{la, a_k_fast, M, K}, pa};
  const Dot2OperandFill<LoadB, true> fb{{lb, b_k_fast, N, K}, pb};
  launch_gemm_dot2(stream, multiprocessors, batch, M, N, K, fa, fb, ep);
}

}  // namespace hipq::kernels::dev
