// Entry points of the hip backend's ops, one per file kernels/hip/<op>.hip,
// called by HipBackend (hip_backend.hip). Each checks shapes/dtypes, returns
// InvalidArgument before launching anything when they are wrong, and enqueues
// its kernels on ctx.stream without synchronising the host (parity_sums is
// the exception: it returns host values, so it waits for its own result).
// Included only by .hip files.
#pragma once

#include <hip/hip_runtime.h>

#include <span>
#include <string>

#include "base/result.h"
#include "base/status.h"
#include "kernels/backend.h"
#include "kernels/hip/arch_tuning.h"
#include "kernels/hip/route_switches.h"
#include "kernels/constant_forms.h"

namespace hipq::kernels {

// What an op needs from its backend. Not owned; valid during the call.
struct HipContext {
  hipStream_t stream = nullptr;
  Backend* backend = nullptr;  // scratch buffers come from its pool
  int warp_size = 32;
  int multiprocessors = 1;
  bool matrix_units = false;  // f16/bf16 GEMMs may use the matrix-unit kernel (NVIDIA sm_80+)
  bool wgmma = false;         // ... and the Hopper kernels (compute capability 9.0, built for sm_90a,
                              // RouteSwitches::wgmma)
  bool fp32_3xtf32 = false;   // fp32 GEMMs (matmul, conv2d) as 3xTF32 on the matrix units (NVIDIA sm_80+,
                              // HIPQ_FP32_MATH not "fma": kernels/fp32_math.h); else the fp32 SIMT core
  // f16 matmuls, convs and head-dim-64 attention on the packed-half kernels
  // (gemm_dot2.h, attention_dot2.h: dot2 products into fp32): HIPQ_DOT2=1,
  // on either vendor; to be AMD's default once checked (kernels/f16_math.h).
  bool dot2_f16 = false;
  // The environment's route switches (HIPQ_GEMM_TMA, HIPQ_FP32_WGMMA,
  // HIPQ_CONV_NHWC, HIPQ_ATTN_WGMMA*; HIPQ_NO_WGMMA is folded into `wgmma`),
  // read once when the backend starts.
  RouteSwitches switches;
  // fp8 (e4m3) products (matmul_fp8): compute capability 9.0 of an sm_90a
  // build; else fp8_refusal says why (gemm_route.h: fp8_refusal).
  bool fp8 = false;
  std::string fp8_refusal;
  const ArchTuning* tuning = nullptr;
  ConstantForms* forms = nullptr;  // the backend's forms of constant tensors (kernels/constant_forms.h)

  // Blocks for a grid-stride loop over n items with `block` threads each.
  unsigned grid_for(int64_t n, int block) const {
    int64_t want = (n + block - 1) / block;
    int64_t cap = static_cast<int64_t>(multiprocessors) * (tuning ? tuning->blocks_per_sm : 8);
    if (want > cap) want = cap;
    return static_cast<unsigned>(want < 1 ? 1 : want);
  }
};

// Shared checks (hip_common_checks.hip).
Status require_device_float(const Tensor& t, const char* op, const char* operand);
Status require_contiguous_out(const Tensor& t, const char* op, const char* operand);
Status shape_mismatch(const char* op, const char* what, const Tensor& a, const Tensor& b);
// `t` itself when contiguous, otherwise a contiguous copy in a pool buffer
// held by `hold` (released to the pool when `hold` dies; the pool is
// stream-ordered, so that is safe right after the launch).
Result<Tensor> contiguous_or_copy(HipContext& ctx, const Tensor& t, Buffer& hold);

Status hip_matmul(HipContext& ctx, const Tensor& a, const Tensor& b, Tensor& out, const MatmulOptions& o);
Status hip_lora_merge(HipContext& ctx, const Tensor& base, std::span<const LoraFactors> deltas, Tensor& out);
Status hip_quantize_fp8_rows(HipContext& ctx, const Tensor& x, Tensor& codes, Tensor& scales);
Status hip_layer_norm_fp8(HipContext& ctx, const Tensor& x, const Tensor* gamma, const Tensor* beta, float eps,
                          Tensor& codes, Tensor& scales);
Status hip_matmul_fp8(HipContext& ctx, const Fp8Rows& a, const Fp8Rows& b, Tensor& out, const MatmulOptions& o);
Status hip_conv2d(HipContext& ctx, const Tensor& x, const Tensor& w, Tensor& y, const Conv2dOptions& o);
Status hip_conv2d_fp8(HipContext& ctx, const Tensor& x, const Fp8ConvWeight& w, Tensor& y,
                      const Conv2dOptions& o);
Status hip_group_norm(HipContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                      const GroupNormOptions& o);
Status hip_layer_norm(HipContext& ctx, const Tensor& x, const Tensor* gamma, const Tensor* beta, Tensor& y,
                      float eps);
Status hip_softmax(HipContext& ctx, const Tensor& x, Tensor& y, float scale, bool causal);
Status hip_attention(HipContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                     const AttentionOptions& o);
Status hip_unary(HipContext& ctx, UnaryOp op, const Tensor& x, Tensor& y);
Status hip_geglu(HipContext& ctx, const Tensor& x, Tensor& y);
// x [..., 2F] of (value, gate) pairs 2j, 2j + 1 -> y [..., F] = value * gelu(gate):
// the unfused end of matmul's geglu_pairs epilogue (MatmulOptions).
Status hip_geglu_pairs(HipContext& ctx, const Tensor& x, Tensor& y);
Status hip_binary(HipContext& ctx, BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y);
Status hip_scale(HipContext& ctx, const Tensor& x, Tensor& y, float alpha, float beta);
Status hip_concat(HipContext& ctx, std::span<const Tensor> xs, int dim, Tensor& y);
Status hip_upsample_nearest2x(HipContext& ctx, const Tensor& x, Tensor& y);
Status hip_timestep_embedding(HipContext& ctx, const Tensor& t, Tensor& y, const TimestepEmbeddingOptions& o);
Status hip_embedding(HipContext& ctx, const Tensor& ids, const Tensor& table, Tensor& y);
Status hip_copy(HipContext& ctx, const Tensor& src, Tensor& dst);
Status hip_fill(HipContext& ctx, Tensor& y, float value);
Result<ParitySums> hip_parity_sums(HipContext& ctx, const Tensor& a, const Tensor& b);

}  // namespace hipq::kernels
