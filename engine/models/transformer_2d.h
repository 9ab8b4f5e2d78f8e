// Transformer2DModel (diffusers, continuous input): the spatial transformer
// of the UNet's cross-attention blocks.
//
//   norm (GroupNorm, eps 1e-6) -> proj_in (Linear when use_linear_projection,
//   else 1x1 Conv) -> transformer_blocks.{i}: BasicTransformerBlock
//   -> proj_out -> + input.
// BasicTransformerBlock: x += attn1(norm1(x)); x += attn2(norm2(x), context);
//   x += ff(norm3(x)) with ff = ff.net.0.proj (GEGLU, [2*4*dim, dim]) and
//   ff.net.2 ([dim, 4*dim]).
// Thread safety: immutable after binding.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "engine/models/attention.h"
#include "engine/models/layers.h"

namespace hipq::engine {

struct BasicTransformerBlock {
  LayerNorm norm1, norm2, norm3;
  Attention attn1, attn2;
  Geglu ff_geglu;  // ff.net.0 (its projection ff.net.0.proj, GEGLU fused)
  Linear ff_out;   // ff.net.2
  // The norms hand their layers e4m3 codes (LayerNorm::codes) instead of a
  // 16-bit output: those layers are fp8 and HIPQ_FP8_NORM_CODES was on when
  // the block was bound.
  bool norm_codes = false;

  static Result<BasicTransformerBlock> bind(WeightBinder& b, const std::string& prefix, int64_t dim,
                                            int heads, int64_t head_dim, int64_t cross_dim);
  // x: [B, S, dim] contiguous; context: [B, Sk, cross_dim]; kv: the
  // context's projections made beforehand (or nullptr).
  Result<DeviceTensor> forward(kernels::Backend& be, const kernels::Tensor& x, const kernels::Tensor& context,
                               const ContextKV* kv = nullptr) const;
};

struct Transformer2DModel {
  GroupNorm norm;
  bool linear_projection = false;
  Linear proj_in_linear, proj_out_linear;
  Conv2d proj_in_conv, proj_out_conv;
  std::vector<BasicTransformerBlock> blocks;
  int64_t channels = 0;

  static Result<Transformer2DModel> bind(WeightBinder& b, const std::string& prefix, int64_t channels,
                                         int heads, int depth, int64_t cross_dim, bool use_linear_projection,
                                         int groups);
  // x: [N, C, H, W]; context: [N, Sk, cross_dim]. Returns [N, C, H, W].
  Result<DeviceTensor> forward(kernels::Backend& be, const kernels::Tensor& x, const kernels::Tensor& context,
                               const ContextKV* kv = nullptr) const;
  // Adds each block's cross-attention projection of `kv`'s context to it.
  Status project_context(kernels::Backend& be, ContextKV& kv) const;
};

}  // namespace hipq::engine
