// attention: fused scaled-dot-product attention, flash style. For each
// (batch, head) and block of queries, K and V are streamed through shared
// memory in tiles of Bc keys; scores live in registers only, with an online
// softmax (running max and sum, rescaled per chunk of 8 keys), so no Sq x Sk
// matrix exists anywhere.
//
// Work split: G consecutive lanes of a warp share one query; lane l owns
// head dims d = l + G*t (t < kDimsPerLane), so a dot product is kDimsPerLane
// FMAs plus log2(G) xor-shuffles, and shared-memory reads are conflict-free.
// G = smallest power of two with G * kDimsPerLane >= D (at most warpSize):
// D = 64 -> G = 4, 64 queries per 256-thread block; D = 512 -> G = 32.
// Causal: query i sees keys j <= i + (Sk - Sq); key tiles past the block's
// last visible key are skipped.
// Instead of it:
//  - f16 of head dim 64 where HipContext::dot2_f16 holds (HIPQ_DOT2=1): the
//    packed-half kernel (attention_dot2.h);
//  - NVIDIA sm_80+ with q, k, v, out in one 16-bit type, head dim 64 or 128
//    and 16-byte aligned rows: the matrix-unit kernels (attention_mma.h,
//    on Hopper attention_wgmma.h);
//  - fp32 of head dim 64 where HIPQ_FP32_MATH allows: 3xTF32 on the matrix
//    units (attention_3xtf32.h);
//  - single-head attention with head dim over 128 (the VAE's): GEMM,
//    softmax, GEMM per block of queries (attention_by_gemms).
#include <algorithm>
#include <string>

#include "kernels/hip/attention/attention_3xtf32.h"
#include "kernels/hip/attention/attention_dot2.h"
#include "kernels/hip/attention/attention_mma.h"
#include "kernels/hip/attention/attention_wgmma.h"
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

constexpr int kDimsPerLane = 16;
constexpr int kBlock = 256;
constexpr int kChunk = 8;
constexpr int kSharedFloats = 12288;  // 48 KiB: K and V tiles

struct AttnArgs {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  int dt_q, dt_k, dt_v, dt_o;
  int64_t qsb, qss, ksb, kss, vsb, vss;  // batch and sequence strides (elements)
  int B, H, Sq, Sk, D, G, Dp, Bc;        // Dp = G * kDimsPerLane (padded row in shared memory)
  float scale_log2;                      // scale * log2(e): softmax in base 2
  bool causal;
};

__global__ void __launch_bounds__(kBlock) attention_kernel(AttnArgs a) {
  extern __shared__ float smem[];
  float* Ks = smem;
  float* Vs = smem + a.Bc * a.Dp;
  const int G = a.G;
  const int queries_per_block = kBlock / G;
  const int bh = blockIdx.y;
  const int b = bh / a.H;
  const int h = bh - b * a.H;
  const int lane = threadIdx.x % G;
  const int q_first = blockIdx.x * queries_per_block;
  const int i = q_first + threadIdx.x / G;
  const bool valid = i < a.Sq;
  const int causal_shift = a.Sk - a.Sq;

  float q[kDimsPerLane], acc[kDimsPerLane];
#pragma unroll
  for (int t = 0; t < kDimsPerLane; ++t) {
    const int d = lane + G * t;
    q[t] = (valid && d < a.D) ? dev::ld(a.q, a.dt_q, b * a.qsb + i * a.qss + h * a.D + d) * a.scale_log2 : 0.0f;
    acc[t] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;

  int kv_end = a.Sk;
  if (a.causal) {
    const int last_q = min(q_first + queries_per_block - 1, a.Sq - 1);
    kv_end = max(0, min(a.Sk, last_q + causal_shift + 1));
  }
  const int my_last_key = a.causal ? i + causal_shift : a.Sk - 1;

  for (int j0 = 0; j0 < kv_end; j0 += a.Bc) {
    const int jn = min(a.Bc, kv_end - j0);
    __syncthreads();
    for (int idx = threadIdx.x; idx < a.Bc * a.Dp; idx += kBlock) {
      const int r = idx / a.Dp;
      const int d = idx - r * a.Dp;
      const int j = j0 + r;
      const bool in = r < jn && d < a.D;
      Ks[idx] = in ? dev::ld(a.k, a.dt_k, b * a.ksb + j * a.kss + h * a.D + d) : 0.0f;
      Vs[idx] = in ? dev::ld(a.v, a.dt_v, b * a.vsb + j * a.vss + h * a.D + d) : 0.0f;
    }
    __syncthreads();
    for (int jc = 0; jc < jn; jc += kChunk) {
      float s[kChunk];
      float cmax = -INFINITY;
#pragma unroll
      for (int u = 0; u < kChunk; ++u) {
        const int r = jc + u < jn ? jc + u : jn - 1;  // clamp: keeps the shuffles uniform
        const float* kr = Ks + r * a.Dp + lane;
        float dot = 0.0f;
#pragma unroll
        for (int t = 0; t < kDimsPerLane; ++t) dot = fmaf(q[t], kr[G * t], dot);
        for (int off = G >> 1; off > 0; off >>= 1) dot += HIPQ_SHFL_XOR(dot, off, G);
        const bool visible = jc + u < jn && j0 + jc + u <= my_last_key;
        s[u] = visible ? dot : -INFINITY;
        cmax = fmaxf(cmax, s[u]);
      }
      const float m_new = fmaxf(m, cmax);
      if (m_new == -INFINITY) continue;  // nothing visible yet for this query
      const float corr = exp2f(m - m_new);
      l *= corr;
#pragma unroll
      for (int t = 0; t < kDimsPerLane; ++t) acc[t] *= corr;
#pragma unroll
      for (int u = 0; u < kChunk; ++u) {
        const float p = exp2f(s[u] - m_new);
        l += p;
        const int r = jc + u < jn ? jc + u : jn - 1;
        const float* vr = Vs + r * a.Dp + lane;
#pragma unroll
        for (int t = 0; t < kDimsPerLane; ++t) acc[t] = fmaf(p, vr[G * t], acc[t]);
      }
      m = m_new;
    }
  }

  if (!valid) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int t = 0; t < kDimsPerLane; ++t) {
    const int d = lane + G * t;
    if (d < a.D) dev::st(a.out, a.dt_o, ((static_cast<int64_t>(b) * a.Sq + i) * a.H + h) * a.D + d, acc[t] * inv);
  }
}

}  // namespace

// One head, no mask, head dim over 128: the VAE mid-block attention (SDXL at
// 1024 px: 16384 tokens x 512, 550 GFLOP). The SIMT kernel keeps a 512-wide
// query in one warp and reaches ~2.5 TFLOP/s there; as two GEMMs with a row
// softmax between, per block of queries, it runs at GEMM speed (the tiled
// fp32 GEMM, or the matrix-unit one for f16/bf16). A block's scores
// (kScoreElems fp32) and probabilities (kScoreElems in q's dtype: 128 MiB in
// all at most) come from the backend's pool; scores and softmax are fp32
// whatever the dtype, their sums in another order than the fused kernel's.
// 64 MiB of fp32 a buffer: 1024 query rows at 16384 keys, so that the
// P.V product (1024 x 512, K = 16384) still spreads over the SMs.
constexpr int64_t kScoreElems = int64_t{1} << 24;

// q, k, v, out of one dtype: fp32 (the SIMT GEMMs), or f16/bf16 (the matrix-unit
// GEMMs; the probabilities are rounded to that type before P.V, as flash
// attention rounds P).
bool attention_by_gemms_applies(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                const AttentionOptions& o, int D) {
  return !o.causal && o.heads == 1 && D > 128 && k.shape[1] > 0 && k.dtype == q.dtype && v.dtype == q.dtype &&
         out.dtype == q.dtype;
}

Status attention_by_gemms(HipContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                          float scale) {
  const int64_t B = q.shape[0], Sq = q.shape[1], Sk = k.shape[1];
  const int64_t block = std::min<int64_t>(Sq, std::max<int64_t>(16, kScoreElems / Sk));  // Sk > 0: see applies
  const size_t elems = static_cast<size_t>(block * Sk);
  HIPQ_ASSIGN_OR_RETURN(Buffer scores, ctx.backend->allocate(elems * sizeof(float)));
  HIPQ_ASSIGN_OR_RETURN(Buffer probs, ctx.backend->allocate(elems * dtype_size(q.dtype)));
  MatmulOptions qk;
  qk.trans_b = true;
  qk.alpha = scale;
  for (int64_t b = 0; b < B; ++b) {
    const Tensor kb = k.slice(0, b, 1), vb = v.slice(0, b, 1);
    for (int64_t q0 = 0; q0 < Sq; q0 += block) {
      const int64_t n = std::min(block, Sq - q0);
      Tensor s = Tensor::contiguous(scores.data(), DType::kF32, {1, n, Sk}, Location::kDevice);
      Tensor p = Tensor::contiguous(probs.data(), q.dtype, {1, n, Sk}, Location::kDevice);
      Tensor ob = out.slice(0, b, 1).slice(1, q0, n);
      HIPQ_RETURN_IF_ERROR(hip_matmul(ctx, q.slice(0, b, 1).slice(1, q0, n), kb, s, qk));
      HIPQ_RETURN_IF_ERROR(hip_softmax(ctx, s, p, 1.0f, false));
      HIPQ_RETURN_IF_ERROR(hip_matmul(ctx, p, vb, ob, MatmulOptions{}));
    }
  }
  return Status::Ok();
}

Status hip_attention(HipContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                     const AttentionOptions& o) {
  HIPQ_RETURN_IF_ERROR(require_device_float(q, "attention", "q"));
  HIPQ_RETURN_IF_ERROR(require_device_float(k, "attention", "k"));
  HIPQ_RETURN_IF_ERROR(require_device_float(v, "attention", "v"));
  HIPQ_RETURN_IF_ERROR(require_device_float(out, "attention", "out"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(out, "attention", "out"));
  if (q.ndim != 3 || k.ndim != 3 || v.ndim != 3 || out.ndim != 3)
    return Status::InvalidArgument("attention: q, k, v, out must be [B, S, H*D]: q " + q.describe() + ", k " +
                                   k.describe() + ", v " + v.describe() + ", out " + out.describe());
  if (o.heads < 1 || q.shape[2] % o.heads != 0)
    return Status::InvalidArgument("attention: last dim of q " + q.describe() + " is not divisible by heads " +
                                   std::to_string(o.heads));
  if (!q.same_shape(out)) return shape_mismatch("attention", "out must have q's shape", q, out);
  if (!k.same_shape(v)) return shape_mismatch("attention", "k and v shapes differ", k, v);
  if (k.shape[0] != q.shape[0] || k.shape[2] != q.shape[2])
    return shape_mismatch("attention", "k must be [B, Sk, H*D] with q's B and H*D", k, q);
  for (const Tensor* t : {&q, &k, &v})
    if (t->stride[2] != 1)
      return Status::InvalidArgument("attention: the last dim must be contiguous (stride 1): " + t->describe());
  const int B = static_cast<int>(q.shape[0]), Sq = static_cast<int>(q.shape[1]), Sk = static_cast<int>(k.shape[1]);
  const int H = o.heads, D = static_cast<int>(q.shape[2] / o.heads);
  int G = 1;
  while (G * kDimsPerLane < D) G <<= 1;
  if (G > ctx.warp_size)
    return Status::Unimplemented("attention: head dim " + std::to_string(D) + " exceeds the supported maximum " +
                                 std::to_string(kDimsPerLane * ctx.warp_size));
  const int Dp = G * kDimsPerLane;
  int Bc = kSharedFloats / (2 * Dp);
  Bc = Bc >= 64 ? 64 : (Bc / kChunk) * kChunk;
  if (Bc < kChunk) return Status::Unimplemented("attention: head dim " + std::to_string(D) + " too large");
  if (static_cast<int64_t>(B) * H > 65535)
    return Status::InvalidArgument("attention: B*heads too large for one launch: q " + q.describe());
  if (B == 0 || Sq == 0) return Status::Ok();

  const float scale = o.scale != 0.0f ? o.scale : 1.0f / sqrtf(static_cast<float>(D));
  if (attention_by_gemms_applies(q, k, v, out, o, D)) return attention_by_gemms(ctx, q, k, v, out, scale);
  const float scale_log2 = scale * 1.4426950408889634f;  // softmax in base 2
  // Rows of whole 16-byte pieces of 16-bit data (the fast kernels' loads).
  auto rows_aligned = [](const Tensor& t) {
    return aligned16(t.data) && t.stride[0] % 8 == 0 && t.stride[1] % 8 == 0;
  };
  const bool same_16bit = q.dtype != DType::kF32 && k.dtype == q.dtype && v.dtype == q.dtype && out.dtype == q.dtype;
  // The problem as the fused kernels below take it.
  const dev::AttnMmaArgs m{q.data,      k.data,      v.data,      out.data, q.stride[0], q.stride[1], k.stride[0],
                           k.stride[1], v.stride[0], v.stride[1], H,        Sq,          Sk,          scale_log2,
                           o.causal};
  // f16 of head dim 64 on the packed-half kernel where HipContext::dot2_f16
  // holds (HIPQ_DOT2=1): attention_dot2.h.
  if (ctx.dot2_f16 && same_16bit && q.dtype == DType::kF16 && D == 64 && rows_aligned(q) && rows_aligned(k) &&
      rows_aligned(v) && rows_aligned(out)) {
    dev::launch_attention_dot2(ctx.stream, m, B);
    HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
    return Status::Ok();
  }
#if HIPQ_VENDOR_NVIDIA
  // fp32 with 3xTF32 products (HIPQ_FP32_MATH): head dim 64, rows of whole
  // 16-byte pieces (attention_3xtf32.h).
  const bool all_f32 = q.dtype == DType::kF32 && k.dtype == q.dtype && v.dtype == q.dtype && out.dtype == q.dtype;
  auto rows_aligned_f32 = [](const Tensor& t) {
    return aligned16(t.data) && t.stride[0] % 4 == 0 && t.stride[1] % 4 == 0;
  };
  if (ctx.fp32_3xtf32 && all_f32 && D == 64 && rows_aligned_f32(q) && rows_aligned_f32(k) && rows_aligned_f32(v) &&
      rows_aligned_f32(out)) {
    HIPQ_HIP_RETURN_IF_ERROR(dev::launch_attention_3xtf32<64>(ctx.stream, m, B));
    return Status::Ok();
  }
  if (ctx.matrix_units && same_16bit && (D == 64 || D == 128) && rows_aligned(q) && rows_aligned(k) &&
      rows_aligned(v) && rows_aligned(out)) {
    // Hopper: the warp-specialised wgmma kernel where it applies (head dim 64,
    // not causal; the HIPQ_ATTN_WGMMA* switches, RouteSwitches).
    if (ctx.wgmma && ctx.switches.attention_wgmma && D == 64) {
      hipError_t e = hipSuccess;
      const dev::AttnWgmmaRoute route{ctx.multiprocessors, ctx.switches.attention_wgmma_consumers,
                                      ctx.switches.attention_wgmma_key_tails};
      const bool launched = q.dtype == DType::kF16
                                ? dev::launch_attention_wgmma<__half>(ctx.stream, m, B, route, e)
                                : dev::launch_attention_wgmma<__nv_bfloat16>(ctx.stream, m, B, route, e);
      if (launched) {
        HIPQ_HIP_RETURN_IF_ERROR(e);
        return Status::Ok();
      }
    }
    auto launch = [&](auto kernel, int q_per_block, int threads) {
      kernel<<<dim3((Sq + q_per_block - 1) / q_per_block, B * H), threads, 0, ctx.stream>>>(m);
    };
    using S64 = dev::AttnMmaShape<64>;
    using S128 = dev::AttnMmaShape<128>;
    if (q.dtype == DType::kF16) {
      if (D == 64)
        launch(dev::attention_mma_kernel<__half, 64>, S64::kQ, S64::kThreads);
      else
        launch(dev::attention_mma_kernel<__half, 128>, S128::kQ, S128::kThreads);
    } else {
      if (D == 64)
        launch(dev::attention_mma_kernel<__nv_bfloat16, 64>, S64::kQ, S64::kThreads);
      else
        launch(dev::attention_mma_kernel<__nv_bfloat16, 128>, S128::kQ, S128::kThreads);
    }
    HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
    return Status::Ok();
  }
#endif
  AttnArgs a{};
  a.q = q.data;
  a.k = k.data;
  a.v = v.data;
  a.out = out.data;
  a.dt_q = static_cast<int>(q.dtype);
  a.dt_k = static_cast<int>(k.dtype);
  a.dt_v = static_cast<int>(v.dtype);
  a.dt_o = static_cast<int>(out.dtype);
  a.qsb = q.stride[0];
  a.qss = q.stride[1];
  a.ksb = k.stride[0];
  a.kss = k.stride[1];
  a.vsb = v.stride[0];
  a.vss = v.stride[1];
  a.B = B;
  a.H = H;
  a.Sq = Sq;
  a.Sk = Sk;
  a.D = D;
  a.G = G;
  a.Dp = Dp;
  a.Bc = Bc;
  a.scale_log2 = scale_log2;
  a.causal = o.causal;
  const int queries_per_block = kBlock / G;
  dim3 grid((Sq + queries_per_block - 1) / queries_per_block, B * H);
  const size_t shmem = static_cast<size_t>(2) * Bc * Dp * sizeof(float);
  attention_kernel<<<grid, kBlock, shmem, ctx.stream>>>(a);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
