// The leaf modules of every model: Linear, Geglu, Conv2d, GroupNorm, LayerNorm,
// Embedding — torch.nn's, with their state-dict names ("weight", "bias") and
// PyTorch's default initialisation declared for synthetic weights.
//
// Each holds Tensors bound through a WeightBinder (the model owns the
// memory). forward() writes a caller-allocated output, like the ops do, so a
// block can choose where results go (and fuse residual adds).
// Thread safety: immutable after binding; forward uses the backend's thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/models/device_tensor.h"
#include "engine/models/weight_binder.h"
#include "kernels/backend.h"

namespace hipq::engine {

// A Linear or GEGLU weight in the fp8 form (WeightBinder::bind_fp8, the
// precision fp8): forward quantizes its input rows (quantize_fp8_rows) into
// scratch and multiplies with matmul_fp8; the epilogue is the same.
// Empty (codes.data null) when the layer runs in the model's 16-bit dtype.
struct Fp8Weight {
  kernels::Fp8Rows rows;
  bool set() const { return rows.codes.data != nullptr; }
};

// y2 [rows, n] = matmul(x2 [rows, in], weight^T) with `o` (trans_b set), through
// the fp8 form when `fp8` is set. `x_codes`: x2's e4m3 codes and row scales
// already made (LayerNorm::codes; only with `fp8` set): the product reads
// them and x2 gives only the shape.
Status linear_product(kernels::Backend& be, const kernels::Tensor& x2, const kernels::Tensor& weight,
                      const Fp8Weight& fp8, kernels::Tensor& y2, const kernels::MatmulOptions& o,
                      const kernels::Fp8Rows* x_codes = nullptr);

struct Linear {
  kernels::Tensor weight;  // [out, in]; no memory when fp8 holds the layer's weight
  kernels::Tensor bias;    // [out]; data == nullptr when the layer has none
  bool has_bias = false;
  int64_t in = 0, out = 0;
  Fp8Weight fp8;

  static Result<Linear> bind(WeightBinder& b, const std::string& prefix, int64_t in, int64_t out,
                             bool bias = true);
  // Layers of one input stored apart (prefixes[i].weight [out_each, in]),
  // bound as one of out = prefixes.size() * out_each features: their outputs
  // side by side in the order given, from one GEMM.
  static Result<Linear> bind_stacked(WeightBinder& b, const std::vector<std::string>& prefixes, int64_t in,
                                     int64_t out_each, bool bias);
  // y[..., out] = x[..., in] @ W^T + b (+ residual); x contiguous.
  // `x_codes` as linear_product's.
  Status forward(kernels::Backend& be, const kernels::Tensor& x, kernels::Tensor& y,
                 kernels::Activation act = kernels::Activation::kNone,
                 const kernels::Tensor* residual = nullptr, const kernels::Fp8Rows* x_codes = nullptr) const;
  // Allocates y in x's dtype.
  Result<DeviceTensor> operator()(kernels::Backend& be, const kernels::Tensor& x,
                                  kernels::Activation act = kernels::Activation::kNone,
                                  const kernels::Tensor* residual = nullptr,
                                  const kernels::Fp8Rows* x_codes = nullptr) const;
};

// diffusers' GEGLU (ff.net.0 of a transformer block): the projection `proj`
// to 2 * inner features, then value * gelu(gate) over its two halves, as one
// GEMM whose epilogue does the GEGLU (MatmulOptions::geglu_pairs). The
// projection's rows are bound interleaved (ParamLayout::kInterleavedHalves).
struct Geglu {
  kernels::Tensor weight;  // [2 * inner, in], halves interleaved on the device (or fp8)
  kernels::Tensor bias;    // [2 * inner], likewise
  int64_t in = 0, inner = 0;
  Fp8Weight fp8;

  static Result<Geglu> bind(WeightBinder& b, const std::string& prefix, int64_t in, int64_t inner);
  // x [..., in] contiguous -> [..., inner] in x's dtype; `x_codes` as
  // linear_product's.
  Result<DeviceTensor> operator()(kernels::Backend& be, const kernels::Tensor& x,
                                  const kernels::Fp8Rows* x_codes = nullptr) const;
};

struct Conv2d {
  kernels::Tensor weight;  // [out, in, k, k]; no memory when fp8 holds the layer's weight
  kernels::Tensor bias;    // [out]
  bool has_bias = true;
  int64_t in = 0, out = 0;
  int kernel = 3, stride = 1, padding = 1;
  // The weight's fp8 form (codes.data null when the layer runs in the
  // model's 16-bit dtype): forward runs conv2d_fp8.
  kernels::Fp8ConvWeight fp8;

  // `fp8_form`: a layer that runs in e4m3 where the binder makes fp8 forms
  // (WeightBinder::bind_fp8_conv; stride 1 only): the UNet's resnet and
  // upsampler convs, not its first and last.
  static Result<Conv2d> bind(WeightBinder& b, const std::string& prefix, int64_t in, int64_t out, int kernel,
                             int stride, int padding, bool bias = true, bool fp8_form = false);
  // `upsample_x2`: the conv reads x as its nearest 2x upsample
  // (Conv2dOptions::upsample_x2).
  Status forward(kernels::Backend& be, const kernels::Tensor& x, kernels::Tensor& y,
                 const kernels::Tensor* residual = nullptr, bool upsample_x2 = false) const;
  Result<DeviceTensor> operator()(kernels::Backend& be, const kernels::Tensor& x,
                                  const kernels::Tensor* residual = nullptr) const;
};

struct GroupNorm {
  kernels::Tensor weight, bias;  // [C]
  int groups = 32;
  float eps = 1e-5f;
  int64_t channels = 0;

  static Result<GroupNorm> bind(WeightBinder& b, const std::string& prefix, int64_t channels,
                                int groups, float eps);
  Result<DeviceTensor> operator()(kernels::Backend& be, const kernels::Tensor& x, bool silu) const;
  // x normalised in place (the same values as operator()): for an input not
  // needed afterwards, one activation fewer.
  Status in_place(kernels::Backend& be, kernels::Tensor& x, bool silu) const;
};

struct LayerNorm {
  kernels::Tensor weight, bias;  // [D]
  float eps = 1e-5f;
  int64_t dim = 0;

  static Result<LayerNorm> bind(WeightBinder& b, const std::string& prefix, int64_t dim, float eps);
  Result<DeviceTensor> operator()(kernels::Backend& be, const kernels::Tensor& x) const;
  // The output as an fp8 Linear's input, never written in 16 bits: e4m3
  // codes [rows, dim] and a scale a row (Backend::layer_norm_fp8; the bytes
  // quantize_fp8_rows gives of operator()'s output). x contiguous.
  struct Codes {
    DeviceTensor codes, scales;
    kernels::Fp8Rows rows() const { return {codes.t, scales.t}; }
  };
  Result<Codes> codes(kernels::Backend& be, const kernels::Tensor& x) const;
};

// HIPQ_FP8_NORM_CODES=1: the transformer blocks' LayerNorms hand their fp8
// Linear layers codes (LayerNorm::codes) instead of a 16-bit output they then
// quantize; the same bytes, one pass fewer. Off until measured on a GPU
// (kernels/dev/README.md).
bool fp8_norm_codes_enabled();

// Output size of a convolution along one spatial dim.
inline int64_t conv_out_size(int64_t in, int kernel, int stride, int padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

}  // namespace hipq::engine
