// Attention: diffusers' `Attention` module (to_q, to_k, to_v, to_out.0), the
// multi-head scaled-dot-product attention of the UNet's transformer blocks
// (self: attn1, cross: attn2) and of the VAE's mid block.
//
// Keys under its prefix: to_q.weight [inner, query_dim], to_k.weight
// [inner, kv_dim], to_v.weight, (their biases when qkv_bias: the VAE),
// to_out.0.weight [query_dim, inner], to_out.0.bias.
// On the device the projections that read the same input are one GEMM: q, k
// and v of a self attention ([3 * inner, query_dim], bound stacked), k and v
// of a cross attention ([2 * inner, kv_dim]); attention reads q, k and v as
// strided views of that product.
// Thread safety: immutable after binding.
#pragma once

#include <cstdint>
#include <string>

#include "engine/models/context_kv.h"
#include "engine/models/layers.h"

namespace hipq::engine {

enum class AttentionKind : uint8_t {
  kSelf = 0,   // keys and values from the queries' own input
  kCross = 1,  // keys and values from a context (the text embeddings)
};

struct Attention {
  AttentionKind kind = AttentionKind::kSelf;
  Linear to_qkv;       // self: q | k | v features of each token
  Linear to_q, to_kv;  // cross: q of x; k | v of the context
  Linear to_out;
  int heads = 1;
  int64_t head_dim = 0;

  // kv_dim: width of the context (cross attention); query_dim for self.
  static Result<Attention> bind(WeightBinder& b, const std::string& prefix, AttentionKind kind,
                                int64_t query_dim, int64_t kv_dim, int heads, int64_t head_dim,
                                bool qkv_bias);
  // x: [B, S, query_dim]; context: [B, Sk, kv_dim] for cross attention,
  // nullptr for self attention; returns to_out(attention) (+ residual, same
  // shape as x, when given). `kv`, when given and made for this context,
  // supplies the context's k | v projection instead of computing it.
  // `x_codes`: x's e4m3 codes and row scales (LayerNorm::codes) for the q
  // (self: q | k | v) projection, which must then be fp8; x gives only the
  // shape and dtype.
  Result<DeviceTensor> forward(kernels::Backend& be, const kernels::Tensor& x, const kernels::Tensor* context,
                               const kernels::Tensor* residual, const ContextKV* kv = nullptr,
                               const kernels::Fp8Rows* x_codes = nullptr) const;
  // Cross attention: the k | v projection of `context`, [B, Sk, 2 * inner].
  Result<DeviceTensor> project_context(kernels::Backend& be, const kernels::Tensor& context) const;
};

}  // namespace hipq::engine
