// Matrix-unit variant of the GEMM core for f16/bf16 operands on NVIDIA
// (sm_80+: warp-level mma through the WMMA API): matmul's kMma route
// (gemm_route.h) when both operands are stored in the same 16-bit type. Same
// loader/epilogue contract as gemm_tiled_kernel: products accumulate in fp32,
// the epilogue sees fp32 sums.
//
// Block tile 128x128, BK = 32, 8 warps in a 2 x 4 grid, each 64x32 of C
// (4 x 2 fragments of 16x16). Two shared-memory stages: the next k-tile is in
// flight while the current one is multiplied.
//
// Each operand tile is kept in shared memory in the orientation of its
// contiguous index in global memory (A: k- or m-contiguous, B: k- or
// n-contiguous; the fragment layouts row_major / col_major follow), and is
// filled by a fill policy, a kernel template argument:
//  - PlainFill (PlainOperand::p set: stored in the fragment type, the
//    contiguous index has unit stride, extents and strides multiples of 8,
//    16-byte aligned): 16-byte cp.async copies straight to shared memory,
//    rows past the matrix zero-filled;
//  - LoaderFill: through the loader functor, element by element, into
//    registers before the current tile's multiply and into shared memory
//    after it (odd strides, odd shapes);
//  - conv2d.hip's Im2colFill: the implicit im2col of a 3x3 (any k x k) conv.
// PlainFill, MmaFillBase and PlainOperand also serve the fp32 3xTF32 kernel
// (gemm_3xtf32.h), with TC = float and its own row padding.
// AMD builds see only PlainOperand and the plain_operand_* helpers (gfx1030 has no
// matrix units; CDNA would use rocWMMA-style intrinsics, not in ROCm 5.2.3).
#pragma once

#include "kernels/hip/gemm_route.h"  // gemm_plain
#include "kernels/hip/hip_common.h"

namespace hipq::kernels::dev {

// An operand matrix the kernel may copy directly: element (batch, row, col)
// at p[batch * sb + row * ld + col], where col is the operand's contiguous
// index (k for a k-fast operand, else m for A / n for B). p == nullptr: use
// the loader.
struct PlainOperand {
  const void* p = nullptr;
  int64_t sb = 0;
  int64_t ld = 0;
};

// The PlainOperand for data at p whose contiguous index (extent `contiguous`
// elements) has unit stride: empty unless every row piece of `vec` elements
// (16 bytes) is a 16-byte aligned copy.
inline PlainOperand plain_operand_vec(const void* p, int64_t sb, int64_t ld, int64_t contiguous, int64_t vec) {
  const bool ok = gemm_plain(p != nullptr && reinterpret_cast<uintptr_t>(p) % 16 == 0, sb, ld, contiguous, vec);
  return ok ? PlainOperand{p, sb, ld} : PlainOperand{};
}
// 16-bit data: 8-element pieces.
inline PlainOperand plain_operand_16bit(const void* p, int64_t sb, int64_t ld, int64_t contiguous) {
  return plain_operand_vec(p, sb, ld, contiguous, 8);
}
// fp32 data (gemm_3xtf32.h): 4-element pieces.
inline PlainOperand plain_operand_f32(const void* p, int64_t sb, int64_t ld, int64_t contiguous) {
  return plain_operand_vec(p, sb, ld, contiguous, 4);
}

}  // namespace hipq::kernels::dev

#if HIPQ_VENDOR_NVIDIA
#include <hip/hip_bf16.h>
#include <mma.h>  // CUDA's WMMA API (NVIDIA build only)

#include <type_traits>

namespace hipq::kernels::dev {

template <typename TC>
__device__ __forceinline__ TC to_tc(float v);
template <>
__device__ __forceinline__ __half to_tc<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 to_tc<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void cp_async_wait_one() {  // all but the newest group complete
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 1;\n" ::);
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::);
#endif
}

// Operand tile fills. A fill owns one operand's ROWS x COLS tile in shared
// memory (row stride kLd = COLS + PAD; COLS is the operand's contiguous index;
// PAD 8 for the 16-bit tiles here, chosen per layout by gemm_3xtf32.h)
// and has three calls: begin() once per block, issue() to start the k-tile
// at k0, finish() after the current tile's multiply (stores what issue()
// left in registers). kIsA: the operand is A (loader called (b, m, k)), else
// B ((b, k, n)); kColIsK: the column index is k.
template <int ROWS, int COLS, bool kIsA, bool kColIsK, int PAD = 8>
struct MmaFillBase {
  static constexpr int kRows = ROWS, kCols = COLS, kLd = COLS + PAD;
  int row_lim = 0, col_lim = 0, row0 = 0, col0 = 0;  // the tile's origin and the operand's extents
  // mn0: the block's first m (A) or n (B); MN: M or N.
  __device__ __forceinline__ void set_origin(int mn0, int MN, int K) {
    row_lim = kColIsK ? MN : K;
    col_lim = kColIsK ? K : MN;
    row0 = kColIsK ? mn0 : 0;
    col0 = kColIsK ? 0 : mn0;
  }
  __device__ __forceinline__ int tile_row(int k0) const { return row0 + (kColIsK ? 0 : k0); }
  __device__ __forceinline__ int tile_col(int k0) const { return col0 + (kColIsK ? k0 : 0); }
};

// A plain operand (PlainOperand): 16-byte cp.async copies (kVec elements of
// TC each), out-of-range rows zero-filled. Nothing to finish.
template <typename TC, int ROWS, int COLS, bool kIsA, bool kColIsK, int PAD = 8>
struct PlainFill : MmaFillBase<ROWS, COLS, kIsA, kColIsK, PAD> {
  static constexpr bool kCompact = true;
  static constexpr int kVec = 16 / static_cast<int>(sizeof(TC));
  PlainOperand plain;
  const TC* base = nullptr;
  __device__ __forceinline__ void begin(int batch, int mn0, int MN, int K, int /*tid*/) {
    this->set_origin(mn0, MN, K);
    base = static_cast<const TC*>(plain.p) + static_cast<int64_t>(batch) * plain.sb;
  }
  __device__ __forceinline__ void issue(TC* tile, int k0, int tid) {
    const int r0 = this->tile_row(k0), c0 = this->tile_col(k0);
#pragma unroll
    for (int v = tid; v < ROWS * COLS / kVec; v += 256) {
      const int r = v / (COLS / kVec), c = (v % (COLS / kVec)) * kVec;
      const bool ok = r0 + r < this->row_lim && c0 + c < this->col_lim;
      const TC* src = ok ? base + static_cast<int64_t>(r0 + r) * plain.ld + (c0 + c) : base;
      cp_async16(tile + r * this->kLd + c, src, ok);
    }
  }
  __device__ __forceinline__ void finish(TC*, int) const {}
};

// Any operand, through its loader functor: element loads into registers at
// issue(), stored to shared memory at finish() (the loads overlap the
// current tile's multiply). Exact: same-type 16-bit values pass through fp32.
template <typename TC, int ROWS, int COLS, bool kIsA, bool kColIsK, class Load>
struct LoaderFill : MmaFillBase<ROWS, COLS, kIsA, kColIsK> {
  static constexpr bool kCompact = false;
  static constexpr int kElems = ROWS * COLS / 256;  // per thread
  Load load;
  int batch = 0;
  TC regs[kElems];
  __device__ __forceinline__ void begin(int b, int mn0, int MN, int K, int /*tid*/) {
    this->set_origin(mn0, MN, K);
    batch = b;
  }
  __device__ __forceinline__ float element(int r, int c) const {
    // (row, col) of the operand -> the loader's (b, m, k) / (b, k, n)
    if (kIsA) return kColIsK ? load(batch, r, c) : load(batch, c, r);
    return kColIsK ? load(batch, c, r) : load(batch, r, c);
  }
  __device__ __forceinline__ void issue(TC*, int k0, int tid) {
    const int r0 = this->tile_row(k0), c0 = this->tile_col(k0);
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      const int i = tid + e * 256;
      const int r = i / COLS, c = i % COLS;
      regs[e] = to_tc<TC>((r0 + r < this->row_lim && c0 + c < this->col_lim) ? element(r0 + r, c0 + c) : 0.0f);
    }
  }
  __device__ __forceinline__ void finish(TC* tile, int tid) const {
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      const int i = tid + e * 256;
      tile[(i / COLS) * this->kLd + i % COLS] = regs[e];
    }
  }
};

// Block tile and the operand tile shapes of one layout. kAK: A is
// k-contiguous (tile [BM][BK], row_major fragments), else m-contiguous
// ([BK][BM], col_major). kBK: B is k-contiguous ([BN][BK], col_major), else
// n-contiguous ([BK][BN], row_major).
template <bool kAK, bool kBK>
struct MmaShape {
  static constexpr int BM = 128, BN = 128, BK = 32;
  static constexpr int kARows = kAK ? BM : BK, kACols = kAK ? BK : BM;
  static constexpr int kBRows = kBK ? BN : BK, kBCols = kBK ? BK : BN;
};

// Two blocks per SM (<= 128 registers a thread) when both fills keep little in
// registers (kCompact); the loader fill's per-element staging needs more.
template <typename TC, bool kAK, bool kBK, class FillA, class FillB, class Epilogue>
__global__ void __launch_bounds__(256, FillA::kCompact && FillB::kCompact ? 2 : 1)
    gemm_mma_kernel(int M, int N, int K, FillA fa, FillB fb, Epilogue ep) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  namespace wmma = nvcuda::wmma;
  using S = MmaShape<kAK, kBK>;
  constexpr int BM = S::BM, BN = S::BN, BK = S::BK;
  static_assert(FillA::kRows == S::kARows && FillA::kCols == S::kACols, "A fill shape");
  static_assert(FillB::kRows == S::kBRows && FillB::kCols == S::kBCols, "B fill shape");
  constexpr int kATile = FillA::kRows * FillA::kLd;  // elements per stage
  constexpr int kBTile = FillB::kRows * FillB::kLd;
  constexpr int kPipeBytes = 2 * (kATile + kBTile) * static_cast<int>(sizeof(TC));
  constexpr int kEpiBytes = 8 * 16 * 16 * static_cast<int>(sizeof(float));
  __shared__ __align__(128) unsigned char smem[kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes];
  TC* As = reinterpret_cast<TC*>(smem);
  TC* Bs = As + 2 * kATile;

  const int batch = blockIdx.z;
  const int m0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * BN;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int wm = warp / 4;  // 0..1: rows wm*64
  const int wn = warp % 4;  // 0..3: cols wn*32
  fa.begin(batch, m0, M, K, tid);
  fb.begin(batch, n0, N, K, tid);

  using LayoutA = typename std::conditional<kAK, wmma::row_major, wmma::col_major>::type;
  using LayoutB = typename std::conditional<kBK, wmma::col_major, wmma::row_major>::type;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

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
      fa.issue(As + nxt * kATile, (kt + 1) * BK, tid);
      fb.issue(Bs + nxt * kBTile, (kt + 1) * BK, tid);
    }
    cp_async_commit();
    cp_async_wait_one();
    __syncthreads();
    const TC* a = As + cur * kATile;
    const TC* b = Bs + cur * kBTile;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, TC, LayoutA> fra[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, TC, LayoutB> frb[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int m = wm * 64 + i * 16;
        if (kAK)
          wmma::load_matrix_sync(fra[i], a + m * FillA::kLd + kk, FillA::kLd);
        else
          wmma::load_matrix_sync(fra[i], a + kk * FillA::kLd + m, FillA::kLd);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int n = wn * 32 + j * 16;
        if (kBK)
          wmma::load_matrix_sync(frb[j], b + n * FillB::kLd + kk, FillB::kLd);
        else
          wmma::load_matrix_sync(frb[j], b + kk * FillB::kLd + n, FillB::kLd);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fra[i], frb[j], acc[i][j]);
    }
    if (has_next) {
      fa.finish(As + nxt * kATile, tid);
      fb.finish(Bs + nxt * kBTile, tid);
    }
    __syncthreads();
  }

  cp_async_wait_all();  // (K == 0: the prologue's zero-fill may still be in flight)
  __syncthreads();
  float* Cs = reinterpret_cast<float*>(smem) + warp * 256;  // the pipeline buffers are free now
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(Cs, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const int mb = m0 + wm * 64 + i * 16;
      const int nb = n0 + wn * 32 + j * 16;
#pragma unroll 1
      for (int e = lane; e < 256; e += 32) {
        const int m = mb + e / 16, n = nb + e % 16;
        if (m < M && n < N) ep(batch, m, n, Cs[e]);
      }
      __syncwarp();
    }
  }
#else
  __trap();  // choose_gemm_route only selects this kernel on sm_80+
#endif
}

template <typename TC, bool kAK, bool kBK, class FillA, class FillB, class Epilogue>
void launch_gemm_mma_fills(hipStream_t stream, int batch, int M, int N, int K, const FillA& fa, const FillB& fb,
                           const Epilogue& ep) {
  dim3 grid((N + MmaShape<kAK, kBK>::BN - 1) / MmaShape<kAK, kBK>::BN,
            (M + MmaShape<kAK, kBK>::BM - 1) / MmaShape<kAK, kBK>::BM, batch);
  gemm_mma_kernel<TC, kAK, kBK><<<grid, 256, 0, stream>>>(M, N, K, fa, fb, ep);
}

// Both operands copied directly when both are plain, else both through their
// loaders.
template <typename TC, bool kAK, bool kBK, class LoadA, class LoadB, class Epilogue>
void launch_gemm_mma_layout(hipStream_t stream, int batch, int M, int N, int K, const LoadA& la,
                            const PlainOperand& pa, const LoadB& lb, const PlainOperand& pb, const Epilogue& ep) {
  using S = MmaShape<kAK, kBK>;
  if (pa.p && pb.p) {
    PlainFill<TC, S::kARows, S::kACols, true, kAK> fa{};
    PlainFill<TC, S::kBRows, S::kBCols, false, kBK> fb{};
    fa.plain = pa;
    fb.plain = pb;
    launch_gemm_mma_fills<TC, kAK, kBK>(stream, batch, M, N, K, fa, fb, ep);
  } else {
    LoaderFill<TC, S::kARows, S::kACols, true, kAK, LoadA> fa{};
    LoaderFill<TC, S::kBRows, S::kBCols, false, kBK, LoadB> fb{};
    fa.load = la;
    fb.load = lb;
    launch_gemm_mma_fills<TC, kAK, kBK>(stream, batch, M, N, K, fa, fb, ep);
  }
}

template <typename TC, class LoadA, class LoadB, class Epilogue>
void launch_gemm_mma(hipStream_t stream, int batch, int M, int N, int K, const LoadA& la, bool a_k_fast,
                     const PlainOperand& pa, const LoadB& lb, bool b_k_fast, const PlainOperand& pb,
                     const Epilogue& ep) {
  if (a_k_fast && b_k_fast)
    launch_gemm_mma_layout<TC, true, true>(stream, batch, M, N, K, la, pa, lb, pb, ep);
  else if (a_k_fast)
    launch_gemm_mma_layout<TC, true, false>(stream, batch, M, N, K, la, pa, lb, pb, ep);
  else if (b_k_fast)
    launch_gemm_mma_layout<TC, false, true>(stream, batch, M, N, K, la, pa, lb, pb, ep);
  else
    launch_gemm_mma_layout<TC, false, false>(stream, batch, M, N, K, la, pa, lb, pb, ep);
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
