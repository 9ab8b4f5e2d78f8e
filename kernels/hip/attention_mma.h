// Matrix-unit variant of the fused attention for f16/bf16 on NVIDIA (sm_80+),
// used by hip_attention when q, k, v and out share one 16-bit type, the head
// dim is 64 or 128 and rows are 16-byte aligned (else the SIMT kernel in
// attention.hip runs). Flash style as that kernel: K/V stream through shared
// memory in tiles of 64 keys, scores never leave registers, online softmax in
// base 2 with fp32 running max and sum.
//
// Work split: 4 warps per block, each owns 16 queries (64 per block). Both
// products are warp-level mma.sync m16n8k16 (fp32 accumulate):
//   S (16 x 64 keys)  = Q (16 x D) . K^T     Q fragments held in registers
//   O (16 x D)       += P (16 x 64) . V      P re-packed from S's accumulator
//                                             registers (same row/col layout)
// V is stored transposed in shared memory (Vt[d][key]) so each B fragment
// register is one 32-bit read. P is rounded to the 16-bit type for the second
// product (as FlashAttention does); everything else stays fp32 until the
// final store.
#pragma once

#include "kernels/hip/hip_common.h"

#if HIPQ_VENDOR_NVIDIA
#include <hip/hip_bf16.h>

#include <type_traits>

namespace hipq::kernels::dev {

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

template <typename TC, int D>
__global__ void __launch_bounds__(128) attention_mma_kernel(AttnMmaArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kQ = 64, kKeys = 64;
  constexpr int kLdK = D + 8;       // Ks[key][d] (also Qs[q][d] before the loop)
  constexpr int kLdV = kKeys + 8;   // Vt[d][key]
  __shared__ __align__(16) TC Ks[kKeys * kLdK];
  __shared__ __align__(16) TC Vt[D * kLdV];
  static_assert(kQ == kKeys, "Q is staged in the K buffer");

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

  // ---- Q: stage through shared memory, keep this warp's 16 rows as A fragments.
  for (int i = tid; i < kQ * kVecPerRow; i += 128) {
    const int r = i / kVecPerRow, c = (i % kVecPerRow) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (q0 + r < a.Sq) val = *reinterpret_cast<const uint4*>(qb + static_cast<int64_t>(q0 + r) * a.qss + c);
    *reinterpret_cast<uint4*>(Ks + r * kLdK + c) = val;
  }
  __syncthreads();
  uint32_t qf[D / 16][4];
  {
    const TC* qs = Ks + (warp * 16) * kLdK;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      qf[kc][0] = *reinterpret_cast<const uint32_t*>(qs + g * kLdK + kc * 16 + t2);
      qf[kc][1] = *reinterpret_cast<const uint32_t*>(qs + (g + 8) * kLdK + kc * 16 + t2);
      qf[kc][2] = *reinterpret_cast<const uint32_t*>(qs + g * kLdK + kc * 16 + t2 + 8);
      qf[kc][3] = *reinterpret_cast<const uint32_t*>(qs + (g + 8) * kLdK + kc * 16 + t2 + 8);
    }
  }

  float o[D / 8][4];
#pragma unroll
  for (int t = 0; t < D / 8; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // rows g and g + 8
  const int row_q[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  const int causal_shift = a.Sk - a.Sq;

  int kv_end = a.Sk;
  if (a.causal) kv_end = max(0, min(a.Sk, min(q0 + kQ, a.Sq) - 1 + causal_shift + 1));

  for (int j0 = 0; j0 < kv_end; j0 += kKeys) {
    __syncthreads();  // previous tile (or Q staging) fully read
    for (int i = tid; i < kKeys * kVecPerRow; i += 128) {
      const int r = i / kVecPerRow, c = (i % kVecPerRow) * 8;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (j0 + r < a.Sk) {
        kv = *reinterpret_cast<const uint4*>(kb + static_cast<int64_t>(j0 + r) * a.kss + c);
        vv = *reinterpret_cast<const uint4*>(vb + static_cast<int64_t>(j0 + r) * a.vss + c);
      }
      *reinterpret_cast<uint4*>(Ks + r * kLdK + c) = kv;
      const TC* ve = reinterpret_cast<const TC*>(&vv);
#pragma unroll
      for (int e = 0; e < 8; ++e) Vt[(c + e) * kLdV + r] = ve[e];
    }
    __syncthreads();

    // S = Q K^T: 8 tiles of 8 keys.
    float s[kKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
        uint32_t bf[2];
        const TC* kr = Ks + (n * 8 + g) * kLdK + kc * 16 + t2;
        bf[0] = *reinterpret_cast<const uint32_t*>(kr);
        bf[1] = *reinterpret_cast<const uint32_t*>(kr + 8);
        mma16816<TC>(s[n], qf[kc], bf);
      }
    }
    // Scale, mask, online softmax per row (a row's 64 scores sit in the 4 lanes of a quad).
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = j0 + n * 8 + t2 + (e & 1);
        const int r = e >> 1;
        const bool visible = key < a.Sk && (!a.causal || key <= row_q[r] + causal_shift);
        s[n][e] = visible ? s[n][e] * a.scale_log2 : -INFINITY;
        mx[r] = fmaxf(mx[r], s[n][e]);
      }
    }
    float corr[2], m_use[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m_run[r], mx[r]);
      m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // nothing visible yet: p = 0, no NaN
      corr[r] = exp2f(m_run[r] - m_use[r]);
      m_run[r] = m_new;
      l_run[r] *= corr[r];
    }
#pragma unroll
    for (int t = 0; t < D / 8; ++t) {
      o[t][0] *= corr[0];
      o[t][1] *= corr[0];
      o[t][2] *= corr[1];
      o[t][3] *= corr[1];
    }
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
    // O += P V: B fragments from Vt (k = key, n = head dim).
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
#pragma unroll
      for (int t = 0; t < D / 8; ++t) {
        uint32_t bf[2];
        const TC* vr = Vt + (t * 8 + g) * kLdV + kc * 16 + t2;
        bf[0] = *reinterpret_cast<const uint32_t*>(vr);
        bf[1] = *reinterpret_cast<const uint32_t*>(vr + 8);
        mma16816<TC>(o[t], pf[kc], bf);
      }
    }
  }

  // Finish: the row sums are spread over the quad.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  const float inv[2] = {l_run[0] > 0.0f ? 1.0f / l_run[0] : 0.0f, l_run[1] > 0.0f ? 1.0f / l_run[1] : 0.0f};
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
