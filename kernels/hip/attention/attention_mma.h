// Matrix-unit variant of the fused attention for f16/bf16 on NVIDIA (sm_80+),
// used by hip_attention when q, k, v and out share one 16-bit type, the head
// dim is 64 or 128 and rows are 16-byte aligned (else the SIMT kernel in
// attention.hip runs). Flash style as that kernel: K/V stream through shared
// memory in tiles of 64 keys, scores never leave registers, online softmax in
// base 2 with fp32 running max and sum.
//
// Work split: 8 warps per block, each owns 16 queries (128 per block); K/V
// tiles (64 keys at head dim 64, 32 at 128) arrive by 16-byte cp.async two
// stages deep, the next tile in flight while the current one is used. Both
// products are warp-level mma.sync m16n8k16 (fp32 accumulate):
//   S (16 x 64 keys)  = Q (16 x D) . K^T     Q fragments held in registers
//   O (16 x D)       += P (16 x 64) . V      P re-packed from S's accumulator
//                                             registers (same row/col layout)
// K and V stay row-major in shared memory; K's B fragments come from
// ldmatrix loads, V's from transposing ones. P is rounded to the 16-bit type for the second
// product (as FlashAttention does); everything else stays fp32 until the
// final store.
#pragma once

#include "kernels/hip/gemm/gemm_mma.h"  // cp.async helpers
#include "kernels/hip/hip_common.h"

namespace hipq::kernels::dev {

// One attention problem as the fused kernels take it (this file's,
// attention_wgmma.h, attention_3xtf32.h, attention_dot2.h): q, k, v of
// [B, S, H * D] with their own strides, out contiguous [B, Sq, H * D].
struct AttnMmaArgs {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  int64_t qsb, qss, ksb, kss, vsb, vss;  // batch and sequence strides (elements)
  int H, Sq, Sk;
  float scale_log2;  // scale * log2(e)
  bool causal;
};

}  // namespace hipq::kernels::dev

#if HIPQ_VENDOR_NVIDIA
#include <hip/hip_bf16.h>

#include <type_traits>

namespace hipq::kernels::dev {

template <typename TC>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

// c += a . b for one m16n8k16 tile (a: 4 regs, b: 2 regs, c: 4 fp32).
template <typename TC>
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, const uint32_t* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same<TC, __half>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

// ldmatrix of four 8x8 16-bit matrices: lane l gives the row address of
// matrix l / 8, row l % 8; r[i] holds matrix i's (row lane / 4, columns
// 2 * (lane % 4) and + 1), the B fragment layout of mma m16n8k16 ".col".
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
#endif
}

// ldmatrix of four 8x8 16-bit matrices, transposed: lane l gives the row
// address of matrix l / 8, row l % 8.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
#endif
}

// The online softmax of the matrix-unit kernels (this one and
// attention_3xtf32.h), for one lane's rows g and g + 8 of a warp's 16
// queries: s[n][e] is the score of row e >> 1 and key j0 + 8n + t2 + (e & 1)
// (the m16n8 accumulator layout), a row's scores spread over the 4 lanes of
// a quad. Scales to base 2, masks keys past Sk and, when causal, past the
// row's last visible key (only a partial tile or a causal run needs it),
// takes the row max over the quad and updates the running max and sum.
// Returns per row the factor the earlier accumulators are to be scaled by
// (corr) and the max the probabilities subtract (m_use: 0 while nothing is
// visible, so p = 0 and no NaN).
template <int kTiles>
__device__ __forceinline__ void attn_softmax_tile(float (&s)[kTiles][4], const AttnMmaArgs& a, int j0, int t2,
                                                  const int (&row_q)[2], float (&m_run)[2], float (&l_run)[2],
                                                  float (&corr)[2], float (&m_use)[2]) {
  const int causal_shift = a.Sk - a.Sq;
  float mx[2] = {-INFINITY, -INFINITY};
  if (!a.causal && j0 + 8 * kTiles <= a.Sk) {
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] *= a.scale_log2;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
      }
    }
  } else {
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = j0 + n * 8 + t2 + (e & 1);
        const int r = e >> 1;
        const bool visible = key < a.Sk && (!a.causal || key <= row_q[r] + causal_shift);
        s[n][e] = visible ? s[n][e] * a.scale_log2 : -INFINITY;
        mx[r] = fmaxf(mx[r], s[n][e]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    const float m_new = fmaxf(m_run[r], mx[r]);
    m_use[r] = m_new == -INFINITY ? 0.0f : m_new;
    corr[r] = exp2f(m_run[r] - m_use[r]);
    m_run[r] = m_new;
    l_run[r] *= corr[r];
  }
}

// End of the keys a block of queries q0 .. q0 + block - 1 sees (causal: up
// to its last query's last visible key).
__device__ __forceinline__ int attn_key_end(const AttnMmaArgs& a, int q0, int block) {
  if (!a.causal) return a.Sk;
  return max(0, min(a.Sk, min(q0 + block, a.Sq) + a.Sk - a.Sq));
}

// o (kTiles m16n8 accumulators) *= corr of its row.
template <int kTiles>
__device__ __forceinline__ void attn_rescale(float (&o)[kTiles][4], const float (&corr)[2]) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    o[t][0] *= corr[0];
    o[t][1] *= corr[0];
    o[t][2] *= corr[1];
    o[t][3] *= corr[1];
  }
}

// 1 / the row sums (spread over the quad), 0 for a row that saw no key.
__device__ __forceinline__ void attn_inverse_sums(float (&l_run)[2], float (&inv)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    inv[r] = l_run[r] > 0.0f ? 1.0f / l_run[r] : 0.0f;
  }
}

// Block shape: 8 warps of 16 queries; K/V tiles of kKeys keys, two stages.
template <int D>
struct AttnMmaShape {
  static constexpr int kWarps = 8, kThreads = 32 * kWarps, kQ = 16 * kWarps;
  static constexpr int kKeys = D == 64 ? 64 : 32;
  static constexpr int kMinBlocks = D == 64 ? 2 : 1;    // head dim 64 fits 128 registers: two blocks an SM
  static constexpr int kLd = D + 8;                     // padded row (elements): conflict-free fragments
  static constexpr int kTileElems = kKeys * kLd;        // one K or V tile
  static constexpr int kSmemElems = 2 * 2 * kTileElems;  // [stage][K, V]
  static_assert(kQ * kLd <= kSmemElems, "Q is staged in the K/V buffers");
};

template <typename TC, int D>
__global__ void __launch_bounds__(AttnMmaShape<D>::kThreads, AttnMmaShape<D>::kMinBlocks)
    attention_mma_kernel(AttnMmaArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using S = AttnMmaShape<D>;
  constexpr int kQ = S::kQ, kKeys = S::kKeys, kLd = S::kLd, kThreads = S::kThreads;
  __shared__ __align__(128) TC smem[S::kSmemElems];
  auto k_tile = [&](int stage) { return smem + (2 * stage) * S::kTileElems; };
  auto v_tile = [&](int stage) { return smem + (2 * stage + 1) * S::kTileElems; };

  const int bh = blockIdx.y;
  const int b = bh / a.H;
  const int h = bh - b * a.H;
  const int q0 = blockIdx.x * kQ;
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t2 = (lane % 4) * 2;  // fragment row in the 8-row group, column pair
  const TC* qb = static_cast<const TC*>(a.q) + b * a.qsb + h * D;
  const TC* kb = static_cast<const TC*>(a.k) + b * a.ksb + h * D;
  const TC* vb = static_cast<const TC*>(a.v) + b * a.vsb + h * D;
  constexpr int kVecPerRow = D / 8;  // 16-byte pieces per row

  // K and V rows of tile j0 into `stage`, 16-byte cp.async, keys past Sk zero-filled.
  auto issue = [&](int stage, int j0) {
    TC* ks = k_tile(stage);
    TC* vs = v_tile(stage);
    for (int i = tid; i < kKeys * kVecPerRow; i += kThreads) {
      const int r = i / kVecPerRow, c = (i % kVecPerRow) * 8;
      const bool ok = j0 + r < a.Sk;
      const int64_t key = ok ? j0 + r : 0;
      cp_async16(ks + r * kLd + c, kb + key * a.kss + c, ok);
      cp_async16(vs + r * kLd + c, vb + key * a.vss + c, ok);
    }
    cp_async_commit();
  };
  const int kv_end = attn_key_end(a, q0, kQ);

  // ---- Q: staged through shared memory, this warp's 16 rows kept as A
  // fragments. Where Q fits in one stage (head dim 64) it comes by cp.async
  // into stage 1 while K/V tile 0 streams into stage 0, so the block waits on
  // memory once before its first products instead of twice (with 77 keys,
  // cross attention, that wait is most of the block's time).
  constexpr bool kQInStage = kQ * kLd <= 2 * S::kTileElems;
  TC* q_stage = kQInStage ? k_tile(1) : smem;
  for (int i = tid; i < kQ * kVecPerRow; i += kThreads) {
    const int r = i / kVecPerRow, c = (i % kVecPerRow) * 8;
    const bool ok = q0 + r < a.Sq;
    const TC* src = qb + static_cast<int64_t>(ok ? q0 + r : 0) * a.qss + c;
    if constexpr (kQInStage) {
      cp_async16(q_stage + r * kLd + c, src, ok);
    } else {
      *reinterpret_cast<uint4*>(q_stage + r * kLd + c) = ok ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
    }
  }
  if constexpr (kQInStage) {
    cp_async_commit();
    if (kv_end > 0) {
      issue(0, 0);
      cp_async_wait_one();  // Q's group is done; tile 0 may still be in flight
    } else {
      cp_async_wait_all();
    }
  }
  __syncthreads();
  uint32_t qf[D / 16][4];
  {
    const TC* qs = q_stage + (warp * 16) * kLd;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      qf[kc][0] = *reinterpret_cast<const uint32_t*>(qs + g * kLd + kc * 16 + t2);
      qf[kc][1] = *reinterpret_cast<const uint32_t*>(qs + (g + 8) * kLd + kc * 16 + t2);
      qf[kc][2] = *reinterpret_cast<const uint32_t*>(qs + g * kLd + kc * 16 + t2 + 8);
      qf[kc][3] = *reinterpret_cast<const uint32_t*>(qs + (g + 8) * kLd + kc * 16 + t2 + 8);
    }
  }
  __syncthreads();  // Q's staging buffer becomes a K/V stage again

  float o[D / 8][4];
#pragma unroll
  for (int t = 0; t < D / 8; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // rows g and g + 8
  const int row_q[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};

  if (!kQInStage && kv_end > 0) issue(0, 0);
  for (int j0 = 0, it = 0; j0 < kv_end; j0 += kKeys, ++it) {
    const int stage = it & 1;
    if (j0 + kKeys < kv_end) {
      issue(stage ^ 1, j0 + kKeys);  // the next tile streams in while this one is used
      cp_async_wait_one();
    } else {
      cp_async_wait_all();
    }
    __syncthreads();
    const TC* ks = k_tile(stage);
    const TC* vs = v_tile(stage);

    // S = Q K^T: kKeys / 8 tiles of 8 keys. K's B fragments come from
    // ldmatrix: one x4 load serves two 8-key tiles at one 16-wide d chunk.
    const int mi = lane / 8;  // the 8x8 matrix this lane addresses
    float s[kKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int n = 0; n < kKeys / 8; n += 2) {
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
        uint32_t r[4];  // keys +8 * (mi / 2), d +8 * (mi % 2)
        ldmatrix_x4(r, ks + ((n + mi / 2) * 8 + lane % 8) * kLd + kc * 16 + (mi % 2) * 8);
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        mma16816<TC>(s[n], qf[kc], b0);
        mma16816<TC>(s[n + 1], qf[kc], b1);
      }
    }
    float corr[2], m_use[2];
    attn_softmax_tile(s, a, j0, t2, row_q, m_run, l_run, corr, m_use);
    attn_rescale(o, corr);
    uint32_t pf[kKeys / 16][4];  // P as A fragments, 16 keys each
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      const float p0 = exp2f(s[n][0] - m_use[0]), p1 = exp2f(s[n][1] - m_use[0]);
      const float p2 = exp2f(s[n][2] - m_use[1]), p3 = exp2f(s[n][3] - m_use[1]);
      l_run[0] += p0 + p1;
      l_run[1] += p2 + p3;
      pf[n / 2][(n % 2) * 2 + 0] = pack2<TC>(p0, p1);  // row g
      pf[n / 2][(n % 2) * 2 + 1] = pack2<TC>(p2, p3);  // row g + 8
    }
    // O += P V: V's B fragments by transposing ldmatrix from the row-major
    // tile (k = key, n = head dim); one x4 load serves two 8-wide d tiles.
    // Here matrix mi covers keys +8 * (mi % 2), d +8 * (mi / 2).
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
#pragma unroll
      for (int t = 0; t < D / 8; t += 2) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, vs + (kc * 16 + (mi % 2) * 8 + lane % 8) * kLd + (t + mi / 2) * 8);
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        mma16816<TC>(o[t], pf[kc], b0);
        mma16816<TC>(o[t + 1], pf[kc], b1);
      }
    }
    __syncthreads();  // this stage is refilled two tiles later
  }

  float inv[2];
  attn_inverse_sums(l_run, inv);
  TC* ob = static_cast<TC*>(a.out);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row_q[r] >= a.Sq) continue;
    TC* orow = ob + ((static_cast<int64_t>(b) * a.Sq + row_q[r]) * a.H + h) * D;
#pragma unroll
    for (int t = 0; t < D / 8; ++t)
      *reinterpret_cast<uint32_t*>(orow + t * 8 + t2) = pack2<TC>(o[t][2 * r] * inv[r], o[t][2 * r + 1] * inv[r]);
  }
#else
  __trap();  // hip_attention only selects this kernel on sm_80+
#endif
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
