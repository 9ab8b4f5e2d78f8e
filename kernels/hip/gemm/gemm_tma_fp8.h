// Hopper (sm_90a) GEMM of e4m3 codes (matmul_fp8) on the load pipeline of the
// fastest f16 route (gemm_tma.h): warp-specialised, the bulk tensor copy
// engine (TMA) filling a ring of shared-memory stages, mbarriers between the
// producer and the consumers, a persistent grid.
//
// Block tile 128 x BN x 128 codes (BN 160 by default: m64n160k32, 80
// accumulators and 80 temporaries a thread, the epilogue in two rounds of
// 80 columns; 128 with HIPQ_GEMM_TMA_FP8=128), 384 threads = 3
// warpgroups:
//  - warpgroup 0, the producer (setmaxnreg.dec 40): one thread waits for a
//    free stage, announces its bytes on the stage's "full" mbarrier and
//    issues two 3-D tensor copies (A and B: 128 codes x 128 rows of (k, row,
//    batch 1)), written in the 128-byte-swizzled K-major layout the wgmma
//    descriptors read (a k-tile is 128 bytes of K, as the 16-bit kernels':
//    the same stage layout as gemm_tma.h's 128 x 128 tile) and zero-filled
//    past M, N and K (code 0 is +0).
//  - warpgroups 1 and 2, the consumers (setmaxnreg.inc 232): 64 rows of C
//    each. Per k-tile they wait on the stage's full barrier, run its four
//    m64n128k32 e4m3 wgmma into a temporary accumulator (the first with
//    scale-d 0), wait for them, release the stage and add the temporary into
//    the fp32 main accumulator: the promotion of gemm_wgmma_fp8.h
//    (kFp8PromotionK = one k-tile), which the fp8 sum's precision needs
//    (docs/kernels.md "fp8"). The other consumer's wgmma run while one adds,
//    and the producer stays up to 4 k-tiles ahead.
// 4 stages of 32 KB (36 KB at BN 160) + 68 KB (45 KB) of epilogue staging
// (outside the ring, so the producer loads the next tile's k-tiles while the
// consumers run the epilogue): gemm_tma.h's tma_store_tile with
// the sums times scale_a[m] and scale_b[n] in registers first
// (scale_accumulators), then gemm_tma.h's tma_epilogue: the register
// epilogue for a RegisterEpilogue16 (matmul_fp8.hip's every 16-bit case),
// else Epilogue::row8 on 8 consecutive columns.
// Host side: the maps are encoded per call (gemm_tma.h's driver entry point);
// prepare_gemm_tma_fp8 says whether the problem takes this path, else the
// caller runs gemm_wgmma_fp8.h. The same kernel runs conv2d_fp8
// (prepare_conv_tma_fp8): B through TmaConvLoad's im2col boxes of an NHWC
// code image, the images as the batch, one column scale an image.
#pragma once

#include <type_traits>

#include "kernels/hip/gemm/gemm_tma.h"
#include "kernels/hip/gemm/gemm_wgmma_fp8.h"

#if HIPQ_VENDOR_NVIDIA
namespace hipq::kernels::dev {

template <int BN_>
struct TmaFp8Shape {
  static_assert(BN_ == 128 || BN_ == 160, "an n the e4m3 wgmma wrappers have");
  static constexpr int BM = 128, BN = BN_, BK = 128;  // BK in codes = bytes
  static_assert(BK == kFp8PromotionK, "one promotion a k-tile");
  static constexpr int kStages = 4;  // 5 measured slower (docs/benchmarks.md)
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kAccum = BN / 2;  // fp32 accumulators a consumer thread (and as many temporaries)
  static constexpr int kATileBytes = BM * BK;
  static constexpr int kBTileBytes = BN * BK;
  static constexpr int kStageBytes = kATileBytes + kBTileBytes;
  // Epilogue staging per consumer warpgroup: 64 rows x kEpiCols fp32
  // columns, BN / kEpiCols rounds a tile (as gemm_tma.h's TmaShape).
  static constexpr int kEpiCols = BN == 160 ? 80 : 128, kLdc = kEpiCols + 8;
  static_assert(BN % kEpiCols == 0 && kEpiCols % 8 == 0, "whole rounds of 8-column groups");
  static constexpr int kEpiBytes = kConsumers * 64 * kLdc * 4;
  static constexpr int kSmemBytes = kStages * kStageBytes + kEpiBytes + 1024;
  static_assert(kSmemBytes + 256 <= 227 * 1024, "fits the opt-in shared memory of an SM");
  static_assert(kATileBytes % 1024 == 0 && kBTileBytes % 1024 == 0, "stages keep the 1 KB swizzle alignment");
};

// A consumer warpgroup's 64 x BN sums (rows m0 .., columns n0 ..; the wgmma
// accumulator layout of wgmma_staging.h) times scale_a[m] and then
// scale_b[n * sb_n] ((v * sa) * sb; sb_n 0: one scale for every column, as a
// convolution's image); 0 past M or N (never stored).
// Each thread loads its two rows' scales and its 2 x BN / 8 columns' once a
// tile (a wrapper of row8 that loaded nine a group of 8 columns cost the
// kernel 15-23 %: docs/benchmarks.md).
template <int BN>
__device__ __forceinline__ void scale_accumulators(float (&acc)[BN / 2], int ct, int m0, int n0, int M, int N,
                                                   const float* scale_a, const float* scale_b, int sb_n) {
  const int r = m0 + wgmma_acc_row(ct);
  const float sa0 = r < M ? scale_a[r] : 0.0f, sa1 = r + 8 < M ? scale_a[r + 8] : 0.0f;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int n = n0 + wgmma_acc_col(ct, j);
    const float sb0 = n < N ? scale_b[n * sb_n] : 0.0f, sb1 = n + 1 < N ? scale_b[(n + 1) * sb_n] : 0.0f;
    acc[4 * j] = acc[4 * j] * sa0 * sb0;
    acc[4 * j + 1] = acc[4 * j + 1] * sa0 * sb1;
    acc[4 * j + 2] = acc[4 * j + 2] * sa1 * sb0;
    acc[4 * j + 3] = acc[4 * j + 3] * sa1 * sb1;
  }
}

// The GEMM (BLoad TmaRowsLoad, B through tb (k, n, 1)): out = ep(scale_a[m]
// * scale_b[n] * sum_k A(m, k) B(n, k)) over codes, A through the map ta
// (k, m, 1). The convolution (TmaConvLoad: the implicit im2col of an NHWC
// code image, 128 channels of one tap a k-tile): out[batch] with A broadcast
// over the batch and one column scale a batch entry, scale_b[batch]; tiles
// run n fastest, then m, then batch. The GEMM is compiled with the batch
// fixed at 0: the same instructions as before the convolution was added,
// whose run-time batch in the epilogue's addresses cost the SDXL fp8 step
// 2 ms (docs/benchmarks.md).
template <int BN, class BLoad, class Epilogue>
__global__ void __launch_bounds__(384, 1)
    gemm_tma_fp8_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, int M,
                        int N, int K, int batches, BLoad bl, const float* scale_a, const float* scale_b,
                        Epilogue ep) {
#if HIPQ_WGMMA_DEVICE
  using S = TmaFp8Shape<BN>;
  static_assert(S::kThreads == 384, "__launch_bounds__ above");
  extern __shared__ unsigned char tma_fp8_smem[];
  __shared__ uint64_t full_bar[S::kStages], empty_bar[S::kStages];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(tma_fp8_smem));
  const uint32_t base = (raw + 1023u) & ~1023u;
  auto a_tile = [&](int s) { return base + static_cast<uint32_t>(s * S::kStageBytes); };
  auto b_tile = [&](int s) { return base + static_cast<uint32_t>(s * S::kStageBytes + S::kATileBytes); };
  auto full = [&](int s) { return static_cast<uint32_t>(__cvta_generic_to_shared(&full_bar[s])); };
  auto empty = [&](int s) { return static_cast<uint32_t>(__cvta_generic_to_shared(&empty_bar[s])); };

  const int m_tiles = (M + S::BM - 1) / S::BM;
  const int n_tiles = (N + S::BN - 1) / S::BN;
  constexpr bool kBatched = !std::is_same_v<BLoad, TmaRowsLoad>;
  const int tiles = (kBatched ? batches : 1) * m_tiles * n_tiles;
  const int k_tiles = (K + S::BK - 1) / S::BK;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), S::kConsumers * 128);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    // Producer.
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      tma_prefetch_map(&ta);
      tma_prefetch_map(&tb);
      int it = 0;
#pragma unroll 1
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int n0 = (t % n_tiles) * S::BN;
        const int m0 = (kBatched ? (t / n_tiles) % m_tiles : t / n_tiles) * S::BM;
        const int batch = kBatched ? t / (n_tiles * m_tiles) : 0;
#pragma unroll 1
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % S::kStages;
          if (it >= S::kStages) mbar_wait(empty(s), ((it / S::kStages) - 1) & 1);
          mbar_arrive_expect_tx(full(s), S::kStageBytes);
          tma_load_3d(a_tile(s), &ta, full(s), kt * S::BK, m0, 0);
          if constexpr (kBatched)
            bl.load(b_tile(s), &tb, full(s), kt, n0, batch);
          else
            tma_load_3d(b_tile(s), &tb, full(s), kt * S::BK, n0, 0);
        }
      }
    }
    return;
  }

  // Consumers: warpgroup cw owns rows cw * 64 .. + 63 of each tile.
  setmaxnreg_inc<232>();
  const int cw = wg - 1;
  const int ct = threadIdx.x % 128;
  const int epi_bar = 2 + cw;  // named barrier of this warpgroup (0 is __syncthreads)
  float* cs = reinterpret_cast<float*>(tma_fp8_smem + (base - raw) + S::kStages * S::kStageBytes) + cw * 64 * S::kLdc;
  int it = 0;
  float acc[S::kAccum];  // fp32 main accumulator
  float d[S::kAccum];    // one k-tile's partial sum from the matrix units
#pragma unroll
  for (int i = 0; i < S::kAccum; ++i) d[i] = 0.0f;
#pragma unroll 1
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int n0 = (t % n_tiles) * S::BN;
    const int m0 = (kBatched ? (t / n_tiles) % m_tiles : t / n_tiles) * S::BM;
    const int batch = kBatched ? t / (n_tiles * m_tiles) : 0;
#pragma unroll
    for (int i = 0; i < S::kAccum; ++i) acc[i] = 0.0f;
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
      const int s = it % S::kStages;
      mbar_wait(full(s), (it / S::kStages) & 1);
#pragma unroll
      for (int i = 0; i < S::kAccum; ++i) wgmma_fence_operand(d[i]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < S::BK / 32; ++kk) {
        const uint64_t da = wgmma_desc(a_tile(s) + static_cast<uint32_t>(cw * 64 * 128 + kk * 32));
        const uint64_t db = wgmma_desc(b_tile(s) + static_cast<uint32_t>(kk * 32));
        wgmma_m64nNk32_e4m3<S::BN>(d, da, db, kk == 0 ? 0 : 1);  // the first one starts d from zero
      }
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < S::kAccum; ++i) wgmma_fence_operand(d[i]);
      mbar_arrive(empty(s));  // the stage is read: the producer may refill it
#pragma unroll
      for (int i = 0; i < S::kAccum; ++i) acc[i] += d[i];  // promotion: fp32 adds
    }

    // Epilogue: each sum times its row's and column's scales in registers
    // (scale_accumulators), then this warpgroup's 64 x BN piece through its
    // staging buffer, kEpiCols columns a round (gemm_tma.h's).
    if constexpr (kBatched)
      scale_accumulators<S::BN>(acc, ct, m0 + cw * 64, n0, M, N, scale_a, scale_b + batch, 0);
    else
      scale_accumulators<S::BN>(acc, ct, m0 + cw * 64, n0, M, N, scale_a, scale_b, 1);
    tma_epilogue<S::BN, S::kEpiCols, S::kLdc>(acc, cs, epi_bar, ct, m0 + cw * 64, n0, M, N, batch, ep);
  }
#else
  __trap();  // launched only where HipContext::fp8 and wgmma hold
#endif
}

// The 3-D map (k, row, 1) of a K-major code matrix (rows x K, row stride ld
// bytes) with boxes of 128 codes x box_rows rows, 128-byte swizzle, zero fill
// past the edges. False when TMA cannot describe it.
inline bool encode_code_rows_map(CUtensorMap& map, const CodeRowsFill& f, int box_rows) {
  const TensorMapEncodeTiled encode = tensor_map_encoder();
  if (!encode || f.p == nullptr || f.K <= 0 || f.rows <= 0 || f.ld < f.K) return false;
  constexpr uint64_t kMaxStride = uint64_t{1} << 40;
  const uint64_t row_bytes = static_cast<uint64_t>(f.ld);
  const uint64_t all_bytes = row_bytes * static_cast<uint64_t>(f.rows);
  if (reinterpret_cast<uintptr_t>(f.p) % 16 != 0 || row_bytes % 16 != 0 || row_bytes >= kMaxStride ||
      all_bytes >= kMaxStride)
    return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(f.K), static_cast<cuuint64_t>(f.rows), 1};
  const cuuint64_t strides[2] = {row_bytes, all_bytes};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(kFp8PromotionK), static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  std::memset(&map, 0, sizeof map);
  return encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<uint8_t*>(f.p), dims, strides, box,
                elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

struct GemmTmaFp8Plan {
  CUtensorMap a, b;
  int bn = 128;    // the tile's width: 128, or 160 (RouteSwitches::gemm_tma_fp8_n)
  int blocks = 1;  // persistent grid: min(tiles, multiprocessors)
};

// Whether the TMA kernel takes out = A B^T for these code operands (fa.rows
// == M, fb.rows == N, both K wide) in tiles bn wide; fills `plan` when it does.
inline bool prepare_gemm_tma_fp8(GemmTmaFp8Plan& plan, const CodeRowsFill& fa, const CodeRowsFill& fb, int M, int N,
                                 int K, int multiprocessors, int bn) {
  if (M <= 0 || N <= 0 || K <= 0 || (bn != 128 && bn != 160)) return false;
  plan.bn = bn;
  return tma_grid_blocks(1, M, N, bn, multiprocessors, plan.blocks) &&
         encode_code_rows_map(plan.a, fa, TmaFp8Shape<128>::BM) && encode_code_rows_map(plan.b, fb, bn);
}

// Whether the TMA kernel takes a stride-1 convolution over e4m3 codes as
// out[image] = W X^T: the weights fa ([O, T * Cp] code rows, taps before
// channels, each tap's channels padded to Cp = a multiple of 128; broadcast
// over the images) and the NHWC code image x [images, H, W, C] (C % 16 == 0:
// its rows 16-byte multiples; the channels from C to Cp read as the copy
// engine's zeros), output Ho x Wo (Ho * Wo % 8 == 0), `pad` zeros on each
// side, KW taps a row. A tile of 160 or 128 pixels, whole output rows or one
// piece of a row (conv_tile_fits), the one of fewer waves times its width;
// fills `plan` and `bl` when it can.
inline bool prepare_conv_tma_fp8(GemmTmaFp8Plan& plan, TmaConvLoad& bl, const CodeRowsFill& fa,
                                 const uint8_t* x, int images, int H, int W, int C, int Cp, int Ho, int Wo,
                                 int KW, int pad, int multiprocessors) {
  const TensorMapEncodeTiled encode = tensor_map_encoder();
  if (!encode || x == nullptr || images <= 0 || images > 65535 || C <= 0 || C % 16 != 0 ||
      Cp % kFp8PromotionK != 0 || Cp < C || Ho <= 0 || Wo <= 0 || (static_cast<int64_t>(Ho) * Wo) % 8 != 0 ||
      fa.rows <= 0 || KW <= 0 || pad < 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0)
    return false;
  const int P = Ho * Wo;
  plan.bn = gemm_tma_tile_n(images, fa.rows, P, multiprocessors,
                            [Wo](int bn) { return (bn == 160 || bn == 128) && conv_tile_fits(bn, Wo); });
  if (plan.bn == 0 || !tma_grid_blocks(images, fa.rows, P, plan.bn, multiprocessors, plan.blocks) ||
      !encode_code_rows_map(plan.a, fa, TmaFp8Shape<128>::BM))
    return false;
  const int bw = std::min(plan.bn, Wo), bh = plan.bn / bw;
  const uint64_t row = static_cast<uint64_t>(C);
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(C), static_cast<cuuint64_t>(W),
                              static_cast<cuuint64_t>(H), static_cast<cuuint64_t>(images)};
  const cuuint64_t strides[3] = {row, row * W, row * W * H};  // bytes between x, y and image neighbours
  constexpr uint64_t kMaxStride = uint64_t{1} << 40;
  if (strides[2] >= kMaxStride) return false;
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(kFp8PromotionK), static_cast<cuuint32_t>(bw),
                             static_cast<cuuint32_t>(bh), 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  std::memset(&plan.b, 0, sizeof plan.b);
  if (encode(&plan.b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, const_cast<uint8_t*>(x), dims, strides, box,
             elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
    return false;
  bl.cblocks = Cp / kFp8PromotionK;
  bl.bk = kFp8PromotionK;
  bl.KW = KW;
  bl.pad = pad;
  bl.pad_y = pad;
  bl.Wo = Wo;
  return true;
}

template <int BN, class BLoad, class Epilogue>
hipError_t launch_gemm_tma_fp8_bn(hipStream_t stream, const GemmTmaFp8Plan& plan, int batches, int M, int N,
                                  int K, const BLoad& bl, const float* scale_a, const float* scale_b,
                                  const Epilogue& ep) {
  using S = TmaFp8Shape<BN>;
  auto* kernel = gemm_tma_fp8_kernel<BN, BLoad, Epilogue>;
  if (hipError_t e = hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
      e != hipSuccess)
    return e;
  kernel<<<plan.blocks, S::kThreads, S::kSmemBytes, stream>>>(plan.a, plan.b, M, N, K, batches, bl, scale_a,
                                                              scale_b, ep);
  return hipGetLastError();
}

// out[batch] for `batches` entries, B as `bl` loads it (gemm_tma_fp8_kernel).
template <class BLoad, class Epilogue>
hipError_t launch_gemm_tma_fp8(hipStream_t stream, const GemmTmaFp8Plan& plan, int batches, int M, int N,
                               int K, const BLoad& bl, const float* scale_a, const float* scale_b,
                               const Epilogue& ep) {
  return plan.bn == 160
             ? launch_gemm_tma_fp8_bn<160>(stream, plan, batches, M, N, K, bl, scale_a, scale_b, ep)
             : launch_gemm_tma_fp8_bn<128>(stream, plan, batches, M, N, K, bl, scale_a, scale_b, ep);
}

// The GEMM of prepare_gemm_tma_fp8: one batch entry, a scale a column.
template <class Epilogue>
hipError_t launch_gemm_tma_fp8(hipStream_t stream, const GemmTmaFp8Plan& plan, int M, int N, int K,
                               const float* scale_a, const float* scale_b, const Epilogue& ep) {
  return launch_gemm_tma_fp8(stream, plan, 1, M, N, K, TmaRowsLoad{}, scale_a, scale_b, ep);
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
