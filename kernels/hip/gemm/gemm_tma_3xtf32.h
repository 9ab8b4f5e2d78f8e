// Hopper (sm_90a) fp32 GEMM as 3xTF32 on the warpgroup matrix instructions:
// the numerics of gemm_3xtf32.h (each fp32 element x split into big =
// tf32(x) and small = tf32(x - big); per 8-wide k step small_a big_b +
// big_a small_b + big_a big_b into a zeroed partial sum, which a rounding
// fp32 add takes into the running sum) on the pipeline of gemm_tma.h.
//
// The split is done once per operand element before the GEMM, by
// split_tf32_rows_kernel: each operand becomes two K-major fp32 arrays (big,
// small) of rows x ldk (ldk = K rounded up to 4, zero-padded), whatever its
// strides were. The kernel then reads four tiles a k-tile through the copy
// engine: A big / small (128 rows) and B big / small (128 rows), each 32 fp32
// = 128 bytes a row in the 128-byte-swizzled K-major layout that
// wgmma.m64n128k8.tf32 reads (same descriptors as the 16-bit kernels: the
// atom is 8 rows of 128 bytes).
//
// Block tile 128 x 128 x 32, 384 threads: the producer warpgroup as in
// gemm_tma.h (4 copies a stage, 64 KB, 3 stages), two consumer warpgroups of
// 64 rows. Per 8-wide k step a consumer issues the three products into a
// partial-sum register set (scale-d 0 on the first: a zeroed partial),
// waits for them and adds the partial into the running sum; the other
// consumer's products keep the tensor cores busy meanwhile (a second partial
// set in flight while the first is added makes ptxas serialise every wgmma:
// it cannot see that the group read has retired). Persistent grid, epilogue through
// tma_store_tile (32-column rounds: the four-tile stages leave 20 KB for
// staging). Convolutions use the same kernel with TmaConvLoad over NHWC
// big / small copies of the input.
#pragma once

#include "kernels/hip/gemm/gemm_tma.h"
#include "kernels/hip/tf32_split.h"

#if HIPQ_VENDOR_NVIDIA
#include <cstring>

namespace hipq::kernels::dev {

struct Tma3xTf32Shape {
  static constexpr int BM = 128, BN = 128, BK = 32;
  static constexpr int kStages = 3;
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kAccum = BN / 2;                    // fp32 accumulators a consumer thread, per set
  static constexpr int kTileBytes = 128 * BK * 4;          // one of the four operand tiles (128 rows x 128 bytes)
  static constexpr int kStageBytes = 4 * kTileBytes;       // A big, A small, B big, B small
  static constexpr int kEpiCols = 32, kLdc = kEpiCols + 8;
  static constexpr int kEpiBytes = kConsumers * 64 * kLdc * 4;
  static constexpr int kSmemBytes = kStages * kStageBytes + kEpiBytes + 1024;
  static_assert(kSmemBytes + 256 <= 227 * 1024, "fits the opt-in shared memory of an SM");
};

// d (64 x 128) (+)= A (64 x 8) B (128 x 8)^T, tf32 operands from shared memory;
// SCALE_D 0 overwrites d.
template <int SCALE_D>
__device__ __forceinline__ void wgmma_m64n128k8_tf32(float (&d)[64], uint64_t da, uint64_t db) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "n"(SCALE_D));
#endif
}

// The three products of one 8-wide k step (offset kb bytes into the tiles)
// into partial p, zeroed first.
__device__ __forceinline__ void tf32x3_step(float (&p)[64], uint32_t a_big, uint32_t a_small, uint32_t b_big,
                                            uint32_t b_small, uint32_t kb) {
  wgmma_m64n128k8_tf32<0>(p, wgmma_desc(a_small + kb), wgmma_desc(b_big + kb));
  wgmma_m64n128k8_tf32<1>(p, wgmma_desc(a_big + kb), wgmma_desc(b_small + kb));
  wgmma_m64n128k8_tf32<1>(p, wgmma_desc(a_big + kb), wgmma_desc(b_big + kb));
}

// C[batch][m][n] = sum_k A(m, k) B(n, k) from the split operands: maps
// ta[0 / 1] (big / small, (k, m, batch)), tb[0 / 1] read as `bl` says (k-tile
// width 32). Same tile order, persistence and epilogue contract as
// gemm_tma_kernel.
template <class BLoad, class Epilogue>
__global__ void __launch_bounds__(384, 1)
    gemm_tma_3xtf32_kernel(const __grid_constant__ CUtensorMap ta_big, const __grid_constant__ CUtensorMap ta_small,
                           const __grid_constant__ CUtensorMap tb_big, const __grid_constant__ CUtensorMap tb_small,
                           int M, int N, int K, int batches, int a_batch, BLoad bl, Epilogue ep) {
#if HIPQ_WGMMA_DEVICE
  using S = Tma3xTf32Shape;
  extern __shared__ unsigned char tf32_smem[];
  __shared__ uint64_t full_bar[S::kStages], empty_bar[S::kStages];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(tf32_smem));
  const uint32_t base = (raw + 1023u) & ~1023u;
  auto tile = [&](int s, int i) { return base + static_cast<uint32_t>(s * S::kStageBytes + i * S::kTileBytes); };
  auto full = [&](int s) { return static_cast<uint32_t>(__cvta_generic_to_shared(&full_bar[s])); };
  auto empty = [&](int s) { return static_cast<uint32_t>(__cvta_generic_to_shared(&empty_bar[s])); };

  const int m_tiles = (M + S::BM - 1) / S::BM;
  const int n_tiles = (N + S::BN - 1) / S::BN;
  const int tiles = batches * m_tiles * n_tiles;
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
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      tma_prefetch_map(&ta_big);
      tma_prefetch_map(&ta_small);
      tma_prefetch_map(&tb_big);
      tma_prefetch_map(&tb_small);
      int it = 0;
#pragma unroll 1
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int n0 = (t % n_tiles) * S::BN;
        const int m0 = ((t / n_tiles) % m_tiles) * S::BM;
        const int batch = t / (n_tiles * m_tiles);
#pragma unroll 1
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % S::kStages;
          if (it >= S::kStages) mbar_wait(empty(s), ((it / S::kStages) - 1) & 1);
          mbar_arrive_expect_tx(full(s), S::kStageBytes);
          tma_load_3d(tile(s, 0), &ta_big, full(s), kt * S::BK, m0, batch * a_batch);
          tma_load_3d(tile(s, 1), &ta_small, full(s), kt * S::BK, m0, batch * a_batch);
          bl.load(tile(s, 2), &tb_big, full(s), kt, n0, batch);
          bl.load(tile(s, 3), &tb_small, full(s), kt, n0, batch);
        }
      }
    }
    return;
  }

  setmaxnreg_inc<232>();
  const int cw = wg - 1;
  const int ct = threadIdx.x % 128;
  float* cs = reinterpret_cast<float*>(tf32_smem + (base - raw) + S::kStages * S::kStageBytes) + cw * 64 * S::kLdc;
  const uint32_t a_rows = static_cast<uint32_t>(cw * 64 * 128);  // this warpgroup's 64 rows of the A tiles
  int it = 0;
  float sum[S::kAccum], part[S::kAccum];
#pragma unroll
  for (int i = 0; i < S::kAccum; ++i) part[i] = 0.0f;
#pragma unroll 1
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int n0 = (t % n_tiles) * S::BN;
    const int m0 = ((t / n_tiles) % m_tiles) * S::BM;
    const int batch = t / (n_tiles * m_tiles);
#pragma unroll
    for (int i = 0; i < S::kAccum; ++i) sum[i] = 0.0f;
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
      const int s = it % S::kStages;
      mbar_wait(full(s), (it / S::kStages) & 1);
      const uint32_t ab = tile(s, 0) + a_rows, as = tile(s, 1) + a_rows, bb = tile(s, 2), bs = tile(s, 3);
#pragma unroll
      for (int kk = 0; kk < S::BK / 8; ++kk) {
#pragma unroll
        for (int i = 0; i < S::kAccum; ++i) wgmma_fence_operand(part[i]);
        wgmma_fence();
        tf32x3_step(part, ab, as, bb, bs, static_cast<uint32_t>(kk * 32));
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < S::kAccum; ++i) {
          wgmma_fence_operand(part[i]);
          sum[i] += part[i];
        }
      }
      mbar_arrive(empty(s));
    }
    tma_store_tile<S::BN, S::kEpiCols, S::kLdc>(sum, cs, 2 + cw, ct, m0 + cw * 64, n0, M, N, batch, ep);
  }
#else
  __trap();  // launched only where HipContext::wgmma holds
#endif
}

// ---- host side ----

// big / small[b][r][k] (k < ldk) = the split of x(b, r, k) = p[b * sb + r *
// s_row + k * s_k] for k < K, 0 past K.
// static: one copy a translation unit (this header is included by matmul.hip and conv2d.hip).
static __global__ void split_tf32_rows_kernel(const float* p, int64_t sb, int64_t s_row, int64_t s_k, int rows, int K,
                                       int ldk, int64_t total, float* big, float* small) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i % ldk);
    const int64_t rb = i / ldk;
    const int64_t r = rb % rows, b = rb / rows;
    const float x = k < K ? p[b * sb + r * s_row + k * s_k] : 0.0f;
    const Tf32Split sp = split_tf32(x);
    big[i] = f32_from_bits(sp.big);
    small[i] = f32_from_bits(sp.small);
  }
}

inline int tf32_ldk(int K) { return (K + 3) / 4 * 4; }

// The (k, row, batch) map of a split array [batches][rows][ldk] with boxes
// of 32 x box_rows x 1.
inline bool encode_f32_rows_map(CUtensorMap& map, const float* p, int rows, int ldk, int batches, int box_rows) {
  const TensorMapEncodeTiled encode = tensor_map_encoder();
  if (!encode || p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0 || rows <= 0 || ldk <= 0 || batches <= 0)
    return false;
  const uint64_t row_bytes = static_cast<uint64_t>(ldk) * 4;
  const uint64_t batch_bytes = row_bytes * static_cast<uint64_t>(rows);
  if (row_bytes % 16 != 0 || batch_bytes >= (uint64_t{1} << 40)) return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(ldk), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(batches)};
  const cuuint64_t strides[2] = {row_bytes, batch_bytes};
  const cuuint32_t box[3] = {32, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  std::memset(&map, 0, sizeof map);
  return encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(p), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The (c, x, y, image) map of an NHWC fp32 array [images][H][W][C] (C % 32
// == 0) with boxes of 32 x bw x bh x 1.
inline bool encode_f32_nhwc_map(CUtensorMap& map, const float* p, int images, int H, int W, int C, int bw, int bh) {
  const TensorMapEncodeTiled encode = tensor_map_encoder();
  if (!encode || p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0 || C % 32 != 0) return false;
  const uint64_t px = static_cast<uint64_t>(C) * 4;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(C), static_cast<cuuint64_t>(W), static_cast<cuuint64_t>(H),
                              static_cast<cuuint64_t>(images)};
  const cuuint64_t strides[3] = {px, px * W, px * W * H};
  if (strides[2] >= (uint64_t{1} << 40)) return false;
  const cuuint32_t box[4] = {32, static_cast<cuuint32_t>(bw), static_cast<cuuint32_t>(bh), 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  std::memset(&map, 0, sizeof map);
  return encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, const_cast<float*>(p), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The four maps and grid of one problem.
struct GemmTf32Plan {
  CUtensorMap a_big, a_small, b_big, b_small;
  int a_batch = 0;
  int blocks = 1;
};

inline bool set_tf32_grid(GemmTf32Plan& plan, int batch, int M, int N, int multiprocessors) {
  return batch > 0 && batch <= 65535 && M > 0 && N > 0 &&
         tma_grid_blocks(batch, M, N, Tma3xTf32Shape::BN, multiprocessors, plan.blocks);
}

template <class BLoad, class Epilogue>
hipError_t launch_gemm_tma_3xtf32(hipStream_t stream, const GemmTf32Plan& plan, int batch, int M, int N, int K,
                                  const BLoad& bl, const Epilogue& ep) {
  using S = Tma3xTf32Shape;
  auto* kernel = gemm_tma_3xtf32_kernel<BLoad, Epilogue>;
  if (hipError_t e = hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
      e != hipSuccess)
    return e;
  kernel<<<plan.blocks, S::kThreads, S::kSmemBytes, stream>>>(plan.a_big, plan.a_small, plan.b_big, plan.b_small, M,
                                                              N, tf32_ldk(K), batch, plan.a_batch, bl, ep);
  return hipGetLastError();
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
