// fp32 fused attention on the matrix units (NVIDIA sm_80+) as 3xTF32, used
// by hip_attention for fp32 q, k, v and out of head dim 64 when
// HipContext::fp32_3xtf32 holds (HIPQ_FP32_MATH, kernels/fp32_math.h) and
// rows are 16-byte aligned; else attention.hip's SIMT kernel runs. Flash
// style as attention_mma.h: K/V stream through shared memory in tiles of 32
// keys, scores never leave registers, online softmax in base 2 with fp32
// running max and sum, so no Sq x Sk matrix exists anywhere.
//
// Both products are mma.sync m16n8k8 .tf32 with the numerics of
// gemm_3xtf32.h: every operand element x is split into big = tf32(x) and
// small = tf32(x - big) (tf32_split.h), a product is taken as
// small_a big_b + big_a small_b + big_a big_b into a zeroed partial sum per
// 8-wide k step, and that partial is added to the running sum by an fp32 add
// (round to nearest; the matrix unit's own accumulation truncates):
//   S (16 x 32 keys) = Q (16 x D) . K^T   Q split once, held in registers
//   O (16 x D)      += P (16 x 32) . V     P split from S's accumulators
// The softmax, its running max and sum and the rescaling are fp32 as in the
// SIMT kernel; the result keeps fp32's accuracy (parity cases at fp32
// tolerances).
//
// Work split: 8 warps per block, each owns 16 queries (128 per block). K and
// V tiles are read from global memory into registers while the current
// tile is multiplied, then split once per block (not once per warp) into
// big and small copies in shared memory, two stages deep; one barrier a
// tile. Fragments use gemm_3xtf32.h's k-slot order: mma slot t holds k = 2t
// and slot t + 4 holds k = 2t + 1 of each 8-wide step (a sum over k does not
// depend on the order). For S that makes a lane's two head dims adjacent
// (8-byte loads of Q and K); for P.V it makes the A fragment exactly S's
// accumulator registers (c0, c1 at keys 2t, 2t + 1): P needs no shuffles.
// Row padding: K rows D + 8 floats (8-byte loads of rows g = 0..3 land 8
// banks apart), V rows D + 4 (rows 2t and 2t + 1 of column g: 8t and 8t + 4).
#pragma once

#include "kernels/hip/attention/attention_mma.h"  // AttnMmaArgs
#include "kernels/hip/gemm/gemm_3xtf32.h"         // mma_m16n8k8_tf32
#include "kernels/hip/hip_common.h"
#include "kernels/hip/tf32_split.h"

#if HIPQ_VENDOR_NVIDIA
namespace hipq::kernels::dev {

template <int D>
struct Attn3xTf32Shape {
  static constexpr int kWarps = 8, kThreads = 32 * kWarps, kQ = 16 * kWarps;
  static constexpr int kKeys = 32;
  static constexpr int kLdK = D + 8, kLdV = D + 4;
  static constexpr int kKElems = kKeys * kLdK, kVElems = kKeys * kLdV;
  static constexpr int kStageWords = 2 * (kKElems + kVElems);  // K big, K small, V big, V small
  static constexpr int kSmemBytes = 2 * kStageWords * static_cast<int>(sizeof(uint32_t));
  static constexpr int kVecsPerRow = D / 4;                      // float4 pieces of a row
  static constexpr int kVecs = kKeys * kVecsPerRow / kThreads;   // per thread, per tensor
  static_assert(kKeys * kVecsPerRow % kThreads == 0, "a tile is whole float4 pieces per thread");
  static_assert(D % 8 == 0, "head dim in 8-wide k steps");
};

template <int D>
__global__ void __launch_bounds__(Attn3xTf32Shape<D>::kThreads, 1) attention_3xtf32_kernel(AttnMmaArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using S = Attn3xTf32Shape<D>;
  constexpr int kQ = S::kQ, kKeys = S::kKeys, kLdK = S::kLdK, kLdV = S::kLdV, kThreads = S::kThreads;
  extern __shared__ float4 attn_3xtf32_smem[];  // float4: 16-byte aligned rows
  uint32_t* smem = reinterpret_cast<uint32_t*>(attn_3xtf32_smem);

  const int bh = blockIdx.y;
  const int b = bh / a.H;
  const int h = bh - b * a.H;
  const int q0 = blockIdx.x * kQ;
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const float* qb = static_cast<const float*>(a.q) + b * a.qsb + h * D;
  const float* kb = static_cast<const float*>(a.k) + b * a.ksb + h * D;
  const float* vb = static_cast<const float*>(a.v) + b * a.vsb + h * D;
  const int row_q[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};

  // ---- Q: this warp's rows g and g + 8, split once. a0 / a1 at dim 2t of
  // each 8-wide step, a2 / a3 at 2t + 1; rows past Sq are zero.
  uint32_t q_big[D / 8][4], q_small[D / 8][4];
  {
    const bool ok0 = row_q[0] < a.Sq, ok1 = row_q[1] < a.Sq;
    const float* p0 = qb + static_cast<int64_t>(ok0 ? row_q[0] : 0) * a.qss + 2 * t;
    const float* p1 = qb + static_cast<int64_t>(ok1 ? row_q[1] : 0) * a.qss + 2 * t;
#pragma unroll
    for (int kc = 0; kc < D / 8; ++kc) {
      const float2 lo = ok0 ? *reinterpret_cast<const float2*>(p0 + kc * 8) : make_float2(0.0f, 0.0f);
      const float2 hi = ok1 ? *reinterpret_cast<const float2*>(p1 + kc * 8) : make_float2(0.0f, 0.0f);
      const float v[4] = {lo.x, hi.x, lo.y, hi.y};
      split_tf32_frag(v, q_big[kc], q_small[kc]);
    }
  }

  // ---- K/V tiles: global -> registers (load), registers -> split copies
  // in shared memory (store). Keys past Sk are zero.
  float4 k_regs[S::kVecs], v_regs[S::kVecs];
  auto load = [&](int j0) {
#pragma unroll
    for (int e = 0; e < S::kVecs; ++e) {
      const int i = tid + e * kThreads;
      const int r = i / S::kVecsPerRow, c = (i % S::kVecsPerRow) * 4;
      const bool ok = j0 + r < a.Sk;
      const int64_t key = ok ? j0 + r : 0;
      const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      k_regs[e] = ok ? *reinterpret_cast<const float4*>(kb + key * a.kss + c) : zero;
      v_regs[e] = ok ? *reinterpret_cast<const float4*>(vb + key * a.vss + c) : zero;
    }
  };
  auto split4 = [](const float4& x, uint32_t* big, uint32_t* small) {
    const Tf32Split s0 = split_tf32(x.x), s1 = split_tf32(x.y), s2 = split_tf32(x.z), s3 = split_tf32(x.w);
    *reinterpret_cast<uint4*>(big) = make_uint4(s0.big, s1.big, s2.big, s3.big);
    *reinterpret_cast<uint4*>(small) = make_uint4(s0.small, s1.small, s2.small, s3.small);
  };
  auto store = [&](int stage) {
    uint32_t* st = smem + stage * S::kStageWords;
#pragma unroll
    for (int e = 0; e < S::kVecs; ++e) {
      const int i = tid + e * kThreads;
      const int r = i / S::kVecsPerRow, c = (i % S::kVecsPerRow) * 4;
      split4(k_regs[e], st + r * kLdK + c, st + S::kKElems + r * kLdK + c);
      split4(v_regs[e], st + 2 * S::kKElems + r * kLdV + c, st + 2 * S::kKElems + S::kVElems + r * kLdV + c);
    }
  };

  float o[D / 8][4];
#pragma unroll
  for (int d = 0; d < D / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // rows g and g + 8
  const int kv_end = attn_key_end(a, q0, kQ);

  if (kv_end > 0) {
    load(0);
    store(0);
  }
  __syncthreads();
  for (int j0 = 0, it = 0; j0 < kv_end; j0 += kKeys, ++it) {
    const int cur = it & 1;
    const bool has_next = j0 + kKeys < kv_end;
    if (has_next) load(j0 + kKeys);  // in flight while this tile is multiplied
    const uint32_t* k_big = smem + cur * S::kStageWords;
    const uint32_t* k_small = k_big + S::kKElems;
    const uint32_t* v_big = k_big + 2 * S::kKElems;
    const uint32_t* v_small = v_big + S::kVElems;

    // S = Q K^T: kKeys / 8 tiles of 8 keys; K's B fragment at key g, dims 2t, 2t + 1.
    float s[kKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < D / 8; ++kc) {
        const int at = (n * 8 + g) * kLdK + kc * 8 + 2 * t;
        const uint2 bb = *reinterpret_cast<const uint2*>(k_big + at);
        const uint2 bs = *reinterpret_cast<const uint2*>(k_small + at);
        const uint32_t b_big[2] = {bb.x, bb.y}, b_small[2] = {bs.x, bs.y};
        mma_3xtf32_step(s[n], q_big[kc], q_small[kc], b_big, b_small);
      }
    }
    float corr[2], m_use[2];
    attn_softmax_tile(s, a, j0, 2 * t, row_q, m_run, l_run, corr, m_use);
    attn_rescale(o, corr);
    // O += P V, one 8-key step per S tile: the A fragment is that tile's
    // accumulator (a0 = c0 row g key 2t, a1 = c2 row g + 8, a2 = c1 key
    // 2t + 1, a3 = c3); V's B fragment at keys 2t, 2t + 1, head dim g.
#pragma unroll
    for (int kc = 0; kc < kKeys / 8; ++kc) {
      const float p[4] = {exp2f(s[kc][0] - m_use[0]), exp2f(s[kc][2] - m_use[1]), exp2f(s[kc][1] - m_use[0]),
                          exp2f(s[kc][3] - m_use[1])};
      l_run[0] += p[0] + p[2];
      l_run[1] += p[1] + p[3];
      uint32_t p_big[4], p_small[4];
      split_tf32_frag(p, p_big, p_small);
      const int key = kc * 8 + 2 * t;
#pragma unroll
      for (int d = 0; d < D / 8; ++d) {
        const int at = key * kLdV + d * 8 + g;
        const uint32_t b_big[2] = {v_big[at], v_big[at + kLdV]};
        const uint32_t b_small[2] = {v_small[at], v_small[at + kLdV]};
        mma_3xtf32_step(o[d], p_big, p_small, b_big, b_small);
      }
    }
    // The next tile into the other stage: its last readers finished before
    // the previous iteration's barrier.
    if (has_next) store(cur ^ 1);
    __syncthreads();
  }

  float inv[2];
  attn_inverse_sums(l_run, inv);
  float* ob = static_cast<float*>(a.out);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row_q[r] >= a.Sq) continue;
    float* orow = ob + ((static_cast<int64_t>(b) * a.Sq + row_q[r]) * a.H + h) * D;
#pragma unroll
    for (int d = 0; d < D / 8; ++d)
      *reinterpret_cast<float2*>(orow + d * 8 + 2 * t) = make_float2(o[d][2 * r] * inv[r], o[d][2 * r + 1] * inv[r]);
  }
#else
  __trap();  // hip_attention only selects this kernel where HipContext::fp32_3xtf32 holds (sm_80+)
#endif
}

// One launch: (Sq / 128) x (B * H) blocks; the stages take 70 KB of dynamic
// shared memory.
template <int D>
hipError_t launch_attention_3xtf32(hipStream_t stream, const AttnMmaArgs& a, int B) {
  using S = Attn3xTf32Shape<D>;
  auto* kernel = attention_3xtf32_kernel<D>;
  if (hipError_t e = hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
      e != hipSuccess)
    return e;
  const dim3 grid((a.Sq + S::kQ - 1) / S::kQ, B * a.H);
  kernel<<<grid, S::kThreads, S::kSmemBytes, stream>>>(a);
  return hipGetLastError();
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
