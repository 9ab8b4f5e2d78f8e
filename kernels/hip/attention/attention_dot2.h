// Packed-half fused attention for f16 q, k, v and out of head dim 64 on GPUs
// without matrix units (AMD RDNA2, gfx1030), used by hip_attention where
// HipContext::dot2_f16 holds (else the fp32 SIMT kernel in attention.hip).
// Flash style as that kernel: K/V tiles through shared memory, scores in
// registers, online softmax in base 2 with fp32 running max and sum, rescaled
// once per chunk of 8 keys; P rounded to f16 for the second product, as the
// matrix-unit kernels round it.
//
// Work split: one query a thread, 256 a block, so neither product needs a
// shuffle (the SIMT kernel spends 2 of every 18 instructions of its dot
// products on them) and every shared-memory read is a broadcast: all lanes
// of a wave read the same key.
//  - The thread holds its query as 32 f16 pairs (d, d + 1) and 64 fp32
//    accumulators.
//  - Ks[j][dp]: key j as 32 pairs along d, the row as it is in memory.
//    S = q . k is 32 dot2 a key, scaled by scale * log2(e) afterwards (q is
//    used as stored, unrounded).
//  - Vs[jp][d]: keys 2 jp and 2 jp + 1 as pairs along the keys
//    (v[2jp][d], v[2jp + 1][d]), interleaved when the tile is filled. Then
//    O[d] += p[2jp] v[2jp][d] + p[2jp + 1] v[2jp + 1][d] is one dot2 with P
//    packed as pairs, 64 dot2 for two keys.
// So a key costs 64 dot2 (128 multiply-adds), against 128 fmaf and 2 shuffles
// per 4 lanes' share in the SIMT kernel. Tiles of 64 keys (8 KB for K, 8 KB
// for V) filled with 16-byte loads; keys past the end zero-filled and
// masked. Causal: query i sees keys j <= i + Sk - Sq, and tiles past the
// block's last visible key are skipped.
// Registers: 32 + 64 + the chunk's 8 scores and 4 pairs, about 110: nine waves
// a SIMD on RDNA2 (1024 VGPRs a lane).
#pragma once

#include "kernels/hip/attention/attention_mma.h"  // AttnMmaArgs
#include "kernels/hip/dot2.h"
#include "kernels/hip/hip_common.h"

namespace hipq::kernels::dev {

struct AttnDot2Shape {
  static constexpr int D = 64, kPairs = D / 2;
  static constexpr int kThreads = 256, kQ = kThreads;  // one query a thread
  static constexpr int kKeys = 64, kChunk = 8;
};

__global__ void __launch_bounds__(AttnDot2Shape::kThreads) attention_dot2_kernel(AttnMmaArgs a) {
  using S = AttnDot2Shape;
  constexpr int D = S::D, DP = S::kPairs, kKeys = S::kKeys, kChunk = S::kChunk;
  static_assert(kKeys % kChunk == 0 && kChunk % 2 == 0, "whole chunks of key pairs a tile");
  __shared__ __align__(16) uint32_t Ks[kKeys][DP];
  __shared__ __align__(16) uint32_t Vs[kKeys / 2][D];

  const int bh = blockIdx.y;
  const int b = bh / a.H, h = bh - b * a.H;
  const int q0 = blockIdx.x * S::kQ;
  const int i = q0 + static_cast<int>(threadIdx.x);
  const bool valid = i < a.Sq;
  const uint16_t* kb = static_cast<const uint16_t*>(a.k) + b * a.ksb + h * D;
  const uint16_t* vb = static_cast<const uint16_t*>(a.v) + b * a.vsb + h * D;

  uint32_t q[DP];
  {
    const uint16_t* qr =
        static_cast<const uint16_t*>(a.q) + b * a.qsb + static_cast<int64_t>(valid ? i : 0) * a.qss + h * D;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      const uint4 u = valid ? reinterpret_cast<const uint4*>(qr)[c] : make_uint4(0u, 0u, 0u, 0u);
      q[4 * c] = u.x;
      q[4 * c + 1] = u.y;
      q[4 * c + 2] = u.z;
      q[4 * c + 3] = u.w;
    }
  }
  float acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) acc[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  const int shift = a.Sk - a.Sq;
  int kv_end = a.Sk;
  if (a.causal) kv_end = max(0, min(a.Sk, min(q0 + S::kQ, a.Sq) + shift));
  const int my_last = a.causal ? i + shift : a.Sk - 1;

  for (int j0 = 0; j0 < kv_end; j0 += kKeys) {
    __syncthreads();  // the previous tile's readers are done
    for (int p = threadIdx.x; p < kKeys * (D / 8); p += S::kThreads) {
      const int r = p / (D / 8), c = p % (D / 8), j = j0 + r;
      const uint4 u = j < kv_end
                          ? *reinterpret_cast<const uint4*>(kb + static_cast<int64_t>(j) * a.kss + 8 * c)
                          : make_uint4(0u, 0u, 0u, 0u);
      *reinterpret_cast<uint4*>(&Ks[r][4 * c]) = u;
    }
    for (int p = threadIdx.x; p < (kKeys / 2) * (D / 8); p += S::kThreads) {
      const int jp = p / (D / 8), c = p % (D / 8), j = j0 + 2 * jp;
      const uint4 z = make_uint4(0u, 0u, 0u, 0u);
      const uint4 lo =
          j < kv_end ? *reinterpret_cast<const uint4*>(vb + static_cast<int64_t>(j) * a.vss + 8 * c) : z;
      const uint4 hi = j + 1 < kv_end
                           ? *reinterpret_cast<const uint4*>(vb + static_cast<int64_t>(j + 1) * a.vss + 8 * c)
                           : z;
      store_pairs8(&Vs[jp][8 * c], lo, hi);  // d = 8c .. 8c + 7: (key j, key j + 1)
    }
    __syncthreads();
    const int jn = min(kKeys, kv_end - j0);
    for (int jc = 0; jc < jn; jc += kChunk) {
      float s[kChunk];
      float cmax = -INFINITY;
#pragma unroll
      for (int u = 0; u < kChunk; ++u) {
        float dot = 0.0f;
#pragma unroll
        for (int t = 0; t < DP; ++t) dot = dot2_f16(q[t], Ks[jc + u][t], dot);
        const int j = j0 + jc + u;
        s[u] = j < a.Sk && j <= my_last ? dot * a.scale_log2 : -INFINITY;
        cmax = fmaxf(cmax, s[u]);
      }
      const float m_new = fmaxf(m, cmax);
      if (m_new == -INFINITY) continue;  // nothing visible to this query yet
      const float corr = exp2f(m - m_new);
      m = m_new;
      l *= corr;
#pragma unroll
      for (int d = 0; d < D; ++d) acc[d] *= corr;
#pragma unroll
      for (int u = 0; u < kChunk; u += 2) {
        const float p0 = exp2f(s[u] - m_new), p1 = exp2f(s[u + 1] - m_new);
        l += p0 + p1;
        const uint32_t pp = pack2_16bit(kDtF16, p0, p1);
        const uint32_t* vr = Vs[(jc + u) / 2];
#pragma unroll
        for (int d = 0; d < D; ++d) acc[d] = dot2_f16(pp, vr[d], acc[d]);
      }
    }
  }

  if (!valid) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  uint16_t* orow = static_cast<uint16_t*>(a.out) + ((static_cast<int64_t>(b) * a.Sq + i) * a.H + h) * D;
#pragma unroll
  for (int c = 0; c < D / 8; ++c) {
    float v8[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v8[e] = acc[8 * c + e] * inv;
    st8_16bit(orow, kDtF16, 8 * c, v8);
  }
}

// Launches attention_dot2_kernel for B batches x H heads.
inline void launch_attention_dot2(hipStream_t stream, const AttnMmaArgs& a, int B) {
  const dim3 grid((a.Sq + AttnDot2Shape::kQ - 1) / AttnDot2Shape::kQ, B * a.H);
  attention_dot2_kernel<<<grid, AttnDot2Shape::kThreads, 0, stream>>>(a);
}

}  // namespace hipq::kernels::dev
