// Attention: diffusers' `Attention` module (to_q, to_k, to_v, to_out.0), the
// multi-head scaled-dot-product attention of the UNet's transformer blocks
// (self: attn1, cross: attn2) and of the VAE's mid block.
//
// Keys under its prefix: to_q.weight [inner, query_dim], to_k.weight
// [inner, kv_dim], to_v.weight, (their biases when qkv_bias: the VAE),
// to_out.0.weight [query_dim, inner], to_out.0.bias.
// Thread safety: immutable after binding.
#pragma once

#include <string>

#include "engine/models/layers.h"

namespace hipq::engine {

struct Attention {
  Linear to_q, to_k, to_v, to_out;
  int heads = 1;
  int64_t head_dim = 0;

  // kv_dim: width of the context (cross attention) or query_dim (self).
  static Result<Attention> bind(WeightBinder& b, const std::string& prefix, int64_t query_dim,
                                int64_t kv_dim, int heads, int64_t head_dim, bool qkv_bias);
  // x: [B, S, query_dim]; context: [B, Sk, kv_dim] (nullptr: self attention);
  // returns to_out(attention) (+ residual, same shape as x, when given).
  Result<DeviceTensor> forward(kernels::Backend& be, const kernels::Tensor& x,
                               const kernels::Tensor* context,
                               const kernels::Tensor* residual) const;
};

}  // namespace hipq::engine
