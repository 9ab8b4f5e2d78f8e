// fp32 GEMM on the matrix units (NVIDIA sm_80+) as 3xTF32: every fp32
// operand element x is split once, when it is loaded from shared memory into
// a fragment, into big = tf32(x) and small = tf32(x - big) (tf32_split.h),
// and each product is accumulated in fp32 as
//   small_a big_b + big_a small_b + big_a big_b
// with three mma.sync.m16n8k8 .tf32 instructions (small_a small_b, below
// 2^-22 of the product, is dropped, as CUTLASS's 3xTF32 "fast accurate" mode
// does), into a partial sum per 8-wide k step that an fp32 add (round to
// nearest) takes into the running sum (the mma's own accumulation truncates). The result has fp32's accuracy, not tf32's (parity cases at fp32
// tolerances; tests/kernels/hip/tf32_split_test.cpp). Selected by matmul.hip
// and conv2d.hip for fp32 a and b when HipContext::fp32_3xtf32 holds
// (HIPQ_FP32_MATH, kernels/fp32_math.h); gemm_tile.h's SIMT core is the
// fallback and the AMD path.
//
// Same epilogue contract and fill-policy pattern as gemm_mma.h, with fp32
// tiles in shared memory: PlainFill (16-byte cp.async copies of 4 floats
// where the operand is plain, plain_operand_f32), StridedF32Fill (any
// strides, element by element) and conv2d.hip's Im2colFill<float>. Block tile 128x128,
// BK = 32, 8 warps in a 2 x 4 grid, each 64x32 of C as 4 x 4 m16n8 tiles;
// two shared-memory stages (66-80 KB, dynamic), the next k-tile in flight
// while the current one is multiplied; two blocks an SM when both fills are
// compact (<= 128 registers a thread).
//
// Fragment loads. For m16n8k8 .tf32, lane (g = lane / 4, t = lane % 4) holds
// A at rows g, g + 8 and k slots t, t + 4, B at k slots t, t + 4 and column
// g. The kernel feeds slot t with k = 2t and slot t + 4 with k = 2t + 1 of
// each 8-wide k step, in A and B alike (a sum over k does not depend on the
// order), so a lane's two k values are adjacent: one 8-byte load where the
// tile is k-contiguous. Row padding per layout keeps the loads free of bank
// conflicts: k-contiguous tiles (32 floats a row) pad to 40 (rows 8 banks
// apart: a half-warp's 8-byte loads cover 32 banks), m- or n-contiguous tiles
// (128 a row) pad to 132 (rows 2t and 2t + 1 land 8t and 8t + 4 banks apart).
#pragma once

#include "kernels/hip/gemm/gemm_mma.h"
#include "kernels/hip/tf32_split.h"

#if HIPQ_VENDOR_NVIDIA
namespace hipq::kernels::dev {

// Row padding (floats) of an fp32 operand tile whose columns are k
// (kColIsK) or m / n.
template <bool kColIsK>
inline constexpr int kTf32Pad = kColIsK ? 8 : 4;

// Block tile and operand tile shapes of one layout (kAK: A k-contiguous,
// kBK: B k-contiguous), as MmaShape, plus the paddings and stage sizes.
template <bool kAK, bool kBK>
struct Tf32x3Shape {
  static constexpr int BM = 128, BN = 128, BK = 32, kThreads = 256;
  static constexpr int kARows = kAK ? BM : BK, kACols = kAK ? BK : BM;
  static constexpr int kBRows = kBK ? BN : BK, kBCols = kBK ? BK : BN;
  static constexpr int kAPad = kTf32Pad<kAK>, kBPad = kTf32Pad<kBK>;
  static constexpr int kATile = kARows * (kACols + kAPad);  // floats per stage
  static constexpr int kBTile = kBRows * (kBCols + kBPad);
  static constexpr int kSmemBytes = 2 * (kATile + kBTile) * static_cast<int>(sizeof(float));
};

// acc += a * b for one m16n8k8 tile, operands as tf32 bit patterns.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// One 8-wide k step of a 3xTF32 product: the three products go into a
// zeroed partial sum (the two small terms first, so the large one lands on a
// value that already holds them), which is then added to the running sum
// with an fp32 add that rounds to nearest. The matrix unit's own
// accumulation does not round to nearest (it truncates), so adding into the
// running sum there would bias every one of the K / 8 steps by up to an ulp
// of the running sum; here that error is relative to one step's partial sum.
__device__ __forceinline__ void mma_3xtf32_step(float (&acc)[4], const uint32_t (&a_big)[4],
                                                const uint32_t (&a_small)[4], const uint32_t (&b_big)[2],
                                                const uint32_t (&b_small)[2]) {
  float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  mma_m16n8k8_tf32(part, a_small, b_big);
  mma_m16n8k8_tf32(part, a_big, b_small);
  mma_m16n8k8_tf32(part, a_big, b_big);
#pragma unroll
  for (int e = 0; e < 4; ++e) acc[e] += part[e];
}

template <bool kAK, bool kBK, class FillA, class FillB, class Epilogue>
__global__ void __launch_bounds__(256, FillA::kCompact && FillB::kCompact ? 2 : 1)
    gemm_3xtf32_kernel(int M, int N, int K, FillA fa, FillB fb, Epilogue ep) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using S = Tf32x3Shape<kAK, kBK>;
  constexpr int BM = S::BM, BN = S::BN, BK = S::BK;
  static_assert(FillA::kRows == S::kARows && FillA::kCols == S::kACols && FillA::kLd == S::kACols + S::kAPad,
                "A fill shape");
  static_assert(FillB::kRows == S::kBRows && FillB::kCols == S::kBCols && FillB::kLd == S::kBCols + S::kBPad,
                "B fill shape");
  constexpr int kLdA = FillA::kLd, kLdB = FillB::kLd;
  extern __shared__ float4 tf32x3_smem[];  // float4: 16-byte aligned for cp.async
  float* As = reinterpret_cast<float*>(tf32x3_smem);
  float* Bs = As + 2 * S::kATile;

  const int batch = blockIdx.z;
  const int m0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * BN;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int wm = warp / 4;  // 0..1: rows wm*64
  const int wn = warp % 4;  // 0..3: cols wn*32
  const int g = lane / 4, t = lane % 4;
  fa.begin(batch, m0, M, K, tid);
  fb.begin(batch, n0, N, K, tid);

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  const int k_tiles = (K + BK - 1) / BK;
  fa.issue(As, 0, tid);
  fb.issue(Bs, 0, tid);
  cp_async_commit();
  fa.finish(As, tid);
  fb.finish(Bs, tid);
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int cur = kt & 1, nxt = cur ^ 1;
    const bool has_next = kt + 1 < k_tiles;
    if (has_next) {
      fa.issue(As + nxt * S::kATile, (kt + 1) * BK, tid);
      fb.issue(Bs + nxt * S::kBTile, (kt + 1) * BK, tid);
    }
    cp_async_commit();
    cp_async_wait_one();
    __syncthreads();
    const float* a = As + cur * S::kATile;
    const float* b = Bs + cur * S::kBTile;
    // Not unrolled: unrolled, the compiler hoists the next steps' fragment
    // loads and splits, and the two-blocks-an-SM kernels spill at 128 registers.
#pragma unroll 1
    for (int kk = 0; kk < BK; kk += 8) {
      // B fragments of the warp's four 8-column tiles: k = kk + 2t, kk + 2t + 1 at column g.
      uint32_t b_big[4][2], b_small[4][2];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n = wn * 32 + j * 8 + g;
        float v0, v1;
        if constexpr (kBK) {
          const float2 v = *reinterpret_cast<const float2*>(b + n * kLdB + kk + 2 * t);
          v0 = v.x;
          v1 = v.y;
        } else {
          v0 = b[(kk + 2 * t) * kLdB + n];
          v1 = b[(kk + 2 * t + 1) * kLdB + n];
        }
        const Tf32Split s0 = split_tf32(v0), s1 = split_tf32(v1);
        b_big[j][0] = s0.big;
        b_small[j][0] = s0.small;
        b_big[j][1] = s1.big;
        b_small[j][1] = s1.small;
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        // A fragment: rows m, m + 8; a0/a1 at k = kk + 2t, a2/a3 at kk + 2t + 1.
        const int m = wm * 64 + i * 16 + g;
        float v[4];
        if constexpr (kAK) {
          const float2 lo = *reinterpret_cast<const float2*>(a + m * kLdA + kk + 2 * t);
          const float2 hi = *reinterpret_cast<const float2*>(a + (m + 8) * kLdA + kk + 2 * t);
          v[0] = lo.x;
          v[1] = hi.x;
          v[2] = lo.y;
          v[3] = hi.y;
        } else {
          v[0] = a[(kk + 2 * t) * kLdA + m];
          v[1] = a[(kk + 2 * t) * kLdA + m + 8];
          v[2] = a[(kk + 2 * t + 1) * kLdA + m];
          v[3] = a[(kk + 2 * t + 1) * kLdA + m + 8];
        }
        uint32_t a_big[4], a_small[4];
        split_tf32_frag(v, a_big, a_small);
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_3xtf32_step(acc[i][j], a_big, a_small, b_big[j], b_small[j]);
      }
    }
    if (has_next) {
      fa.finish(As + nxt * S::kATile, tid);
      fb.finish(Bs + nxt * S::kBTile, tid);
    }
    __syncthreads();
  }
  cp_async_wait_all();  // (K == 0: the prologue's zero-fill may still be in flight)

  // Accumulator layout of an m16n8 tile: c0, c1 at (row g, cols 2t, 2t + 1), c2, c3 eight rows below.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + wm * 64 + i * 16 + g;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + wn * 32 + j * 8 + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (m + 8 * h >= M) continue;
        if (n < N) ep(batch, m + 8 * h, n, acc[i][j][2 * h]);
        if (n + 1 < N) ep(batch, m + 8 * h, n + 1, acc[i][j][2 * h + 1]);
      }
    }
  }
#else
  __trap();  // selected only where HipContext::fp32_3xtf32 holds (sm_80+)
#endif
}

template <bool kAK, bool kBK, class FillA, class FillB, class Epilogue>
hipError_t launch_gemm_3xtf32_fills(hipStream_t stream, int batch, int M, int N, int K, const FillA& fa,
                                    const FillB& fb, const Epilogue& ep) {
  using S = Tf32x3Shape<kAK, kBK>;
  auto* kernel = gemm_3xtf32_kernel<kAK, kBK, FillA, FillB, Epilogue>;
  if (hipError_t e = hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
      e != hipSuccess)
    return e;
  dim3 grid((N + S::BN - 1) / S::BN, (M + S::BM - 1) / S::BM, batch);
  kernel<<<grid, S::kThreads, S::kSmemBytes, stream>>>(M, N, K, fa, fb, ep);
  return hipGetLastError();
}

// Any fp32 operand with int64 strides: element (row, col) of the tile's
// orientation at p[batch * sb + row * s_row + col * s_col]; element loads into
// registers at issue(), stored at finish() (the loads overlap the current
// tile's multiply), zero past the operand. Each thread keeps one pointer and
// steps it by 256 / COLS rows per element, so no per-element address stays
// live across the k loop (a generic loader's per-element 64-bit offsets do,
// and spill). 16 staged values an operand: one block an SM.
template <int ROWS, int COLS, bool kIsA, bool kColIsK, int PAD>
struct StridedF32Fill : MmaFillBase<ROWS, COLS, kIsA, kColIsK, PAD> {
  static constexpr bool kCompact = false;
  static constexpr int kElems = ROWS * COLS / 256;  // per thread
  static constexpr int kRowStep = 256 / COLS;
  const float* p = nullptr;
  int64_t sb = 0, s_row = 0, s_col = 0;
  const float* base = nullptr;  // this thread's first element at k0 = 0
  int r_t = 0, c_t = 0;         // its row and column in the tile
  float regs[kElems];
  __device__ __forceinline__ void begin(int batch, int mn0, int MN, int K, int tid) {
    this->set_origin(mn0, MN, K);
    r_t = tid / COLS;
    c_t = tid % COLS;
    base = p + batch * sb + (this->row0 + r_t) * s_row + (this->col0 + c_t) * s_col;
  }
  __device__ __forceinline__ void issue(float*, int k0, int) {
    const int dr = this->tile_row(k0) - this->row0, dc = this->tile_col(k0) - this->col0;
    const float* q = base + dr * s_row + dc * s_col;
    const bool col_ok = this->col0 + dc + c_t < this->col_lim;
    const int row = this->row0 + dr + r_t;
    const int64_t step = kRowStep * s_row;
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      regs[e] = col_ok && row + e * kRowStep < this->row_lim ? *q : 0.0f;
      q += step;
    }
  }
  __device__ __forceinline__ void finish(float* tile, int) const {
#pragma unroll
    for (int e = 0; e < kElems; ++e) tile[(r_t + e * kRowStep) * this->kLd + c_t] = regs[e];
  }
};

// The fill types of one layout.
template <bool kAK, bool kBK>
struct Tf32x3Fills {
  using S = Tf32x3Shape<kAK, kBK>;
  using PlainA = PlainFill<float, S::kARows, S::kACols, true, kAK, S::kAPad>;
  using PlainB = PlainFill<float, S::kBRows, S::kBCols, false, kBK, S::kBPad>;
  using StridedA = StridedF32Fill<S::kARows, S::kACols, true, kAK, S::kAPad>;
  using StridedB = StridedF32Fill<S::kBRows, S::kBCols, false, kBK, S::kBPad>;
};

// An fp32 operand matrix in memory: element (batch, i, j) at
// p[batch * sb + i * si + j * sj], with (i, j) = (m, k) for A and (k, n) for B.
struct F32Operand {
  const float* p = nullptr;
  int64_t sb = 0, si = 0, sj = 0;
};

// Both operands copied directly when both are plain (plain_operand_f32),
// else both through StridedF32Fill. kAK / kBK: A's resp. B's k has unit stride.
template <bool kAK, bool kBK, class Epilogue>
hipError_t launch_gemm_3xtf32_layout(hipStream_t stream, int batch, int M, int N, int K, const F32Operand& a,
                                     const F32Operand& b, const Epilogue& ep) {
  using F = Tf32x3Fills<kAK, kBK>;
  const PlainOperand pa = kAK ? plain_operand_f32(a.p, a.sb, a.si, K) : plain_operand_f32(a.p, a.sb, a.sj, M);
  const PlainOperand pb = kBK ? plain_operand_f32(b.p, b.sb, b.sj, K) : plain_operand_f32(b.p, b.sb, b.si, N);
  if (pa.p && pb.p) {
    typename F::PlainA fa{};
    typename F::PlainB fb{};
    fa.plain = pa;
    fb.plain = pb;
    return launch_gemm_3xtf32_fills<kAK, kBK>(stream, batch, M, N, K, fa, fb, ep);
  }
  // Tile rows: A m (k-contiguous) or k; B n (k-contiguous) or k.
  typename F::StridedA fa{};
  fa.p = a.p;
  fa.sb = a.sb;
  fa.s_row = kAK ? a.si : a.sj;
  fa.s_col = kAK ? a.sj : a.si;
  typename F::StridedB fb{};
  fb.p = b.p;
  fb.sb = b.sb;
  fb.s_row = kBK ? b.sj : b.si;
  fb.s_col = kBK ? b.si : b.sj;
  return launch_gemm_3xtf32_fills<kAK, kBK>(stream, batch, M, N, K, fa, fb, ep);
}

// C[batch] = A[batch] B[batch] for fp32 operands, handed to the epilogue as
// ep(batch, m, n, sum). The tiles take the orientation of each operand's unit
// stride (A: k else m; B: k else n).
template <class Epilogue>
hipError_t launch_gemm_3xtf32(hipStream_t stream, int batch, int M, int N, int K, const F32Operand& a,
                              const F32Operand& b, const Epilogue& ep) {
  const bool a_k_fast = a.sj == 1;
  const bool b_k_fast = b.si == 1 && b.sj != 1;
  if (a_k_fast && b_k_fast) return launch_gemm_3xtf32_layout<true, true>(stream, batch, M, N, K, a, b, ep);
  if (a_k_fast) return launch_gemm_3xtf32_layout<true, false>(stream, batch, M, N, K, a, b, ep);
  if (b_k_fast) return launch_gemm_3xtf32_layout<false, true>(stream, batch, M, N, K, a, b, ep);
  return launch_gemm_3xtf32_layout<false, false>(stream, batch, M, N, K, a, b, ep);
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
