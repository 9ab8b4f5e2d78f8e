#include "engine/models/layers.h"

#include <cstdlib>
#include <string_view>

namespace hipq::engine {

using kernels::Tensor;

Status linear_product(kernels::Backend& be, const Tensor& x2, const Tensor& weight, const Fp8Weight& fp8, Tensor& y2,
                      const kernels::MatmulOptions& o, const kernels::Fp8Rows* x_codes) {
  if (x_codes != nullptr) {
    if (!fp8.set()) return Status::InvalidArgument("linear_product: input codes for a layer without an fp8 weight");
    return be.matmul_fp8(*x_codes, fp8.rows, y2, o);
  }
  if (!fp8.set()) return be.matmul(x2, weight, y2, o);
  // Per-token scales made on the fly (torchao's dynamic row-wise recipe).
  const int64_t rows = x2.dim(0), in = x2.dim(1);
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor codes, DeviceTensor::make(be, kernels::DType::kU8, {rows, in}));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor scales, DeviceTensor::make(be, kernels::DType::kF32, {rows}));
  kernels::Fp8Rows a{codes.t, scales.t};
  HIPQ_RETURN_IF_ERROR(be.quantize_fp8_rows(x2, a.codes, a.scales));
  return be.matmul_fp8(a, fp8.rows, y2, o);
}

Result<Linear> Linear::bind(WeightBinder& b, const std::string& prefix, int64_t in, int64_t out,
                            bool bias) {
  Linear l;
  l.in = in;
  l.out = out;
  HIPQ_ASSIGN_OR_RETURN(auto q, b.bind_fp8({join_key(prefix, "weight")}, {out, in}, ParamInit::uniform_fan_in(in),
                                            ParamLayout::kAsStored));
  if (q) {
    l.fp8.rows = *q;
    l.weight = q->codes;
  } else {
    HIPQ_ASSIGN_OR_RETURN(l.weight, b.bind(join_key(prefix, "weight"), {out, in}, ParamInit::uniform_fan_in(in)));
  }
  if (bias) {
    HIPQ_ASSIGN_OR_RETURN(l.bias, b.bind(join_key(prefix, "bias"), {out}, ParamInit::uniform_fan_in(in)));
    l.has_bias = true;
  }
  return l;
}

Result<Linear> Linear::bind_stacked(WeightBinder& b, const std::vector<std::string>& prefixes, int64_t in,
                                    int64_t out_each, bool bias) {
  Linear l;
  l.in = in;
  l.out = out_each * static_cast<int64_t>(prefixes.size());
  std::vector<std::string> names;
  for (const std::string& p : prefixes) names.push_back(join_key(p, "weight"));
  HIPQ_ASSIGN_OR_RETURN(auto q, b.bind_fp8(names, {out_each, in}, ParamInit::uniform_fan_in(in), ParamLayout::kAsStored));
  if (q) {
    l.fp8.rows = *q;
    l.weight = q->codes;
  } else {
    HIPQ_ASSIGN_OR_RETURN(l.weight, b.bind_stacked(names, {out_each, in}, ParamInit::uniform_fan_in(in)));
  }
  if (bias) {
    names.clear();
    for (const std::string& p : prefixes) names.push_back(join_key(p, "bias"));
    HIPQ_ASSIGN_OR_RETURN(l.bias, b.bind_stacked(names, {out_each}, ParamInit::uniform_fan_in(in)));
    l.has_bias = true;
  }
  return l;
}

Status Linear::forward(kernels::Backend& be, const Tensor& x, Tensor& y, kernels::Activation act,
                       const Tensor* residual, const kernels::Fp8Rows* x_codes) const {
  if (x.dim(-1) != in)
    return Status::InvalidArgument("Linear: input " + x.describe() + " does not end in " + std::to_string(in));
  const int64_t rows = x.numel() / in;
  Tensor x2 = x.reshape({rows, in});
  Tensor y2 = y.reshape({rows, out});
  Tensor r2;
  kernels::MatmulOptions o;
  o.trans_b = true;
  o.bias = has_bias ? &bias : nullptr;
  o.activation = act;
  if (residual) {
    r2 = residual->reshape({rows, out});
    o.residual = &r2;
  }
  return linear_product(be, x2, weight, fp8, y2, o, x_codes);
}

Result<DeviceTensor> Linear::operator()(kernels::Backend& be, const Tensor& x, kernels::Activation act,
                                        const Tensor* residual, const kernels::Fp8Rows* x_codes) const {
  std::vector<int64_t> shape = x.shape_vec();
  shape.back() = out;
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor y, DeviceTensor::make(be, x.dtype, shape));
  HIPQ_RETURN_IF_ERROR(forward(be, x, y.t, act, residual, x_codes));
  return y;
}

Result<Geglu> Geglu::bind(WeightBinder& b, const std::string& prefix, int64_t in, int64_t inner) {
  Geglu g;
  g.in = in;
  g.inner = inner;
  const std::string proj = join_key(prefix, "proj");
  HIPQ_ASSIGN_OR_RETURN(auto q, b.bind_fp8({join_key(proj, "weight")}, {2 * inner, in}, ParamInit::uniform_fan_in(in),
                                            ParamLayout::kInterleavedHalves));
  if (q) {
    g.fp8.rows = *q;
    g.weight = q->codes;
  } else {
    HIPQ_ASSIGN_OR_RETURN(g.weight, b.bind(join_key(proj, "weight"), {2 * inner, in}, ParamInit::uniform_fan_in(in),
                                           ParamLayout::kInterleavedHalves));
  }
  HIPQ_ASSIGN_OR_RETURN(g.bias, b.bind(join_key(proj, "bias"), {2 * inner}, ParamInit::uniform_fan_in(in),
                                       ParamLayout::kInterleavedHalves));
  return g;
}

Result<DeviceTensor> Geglu::operator()(kernels::Backend& be, const Tensor& x, const kernels::Fp8Rows* x_codes) const {
  if (x.dim(-1) != in)
    return Status::InvalidArgument("GEGLU: input " + x.describe() + " does not end in " + std::to_string(in));
  std::vector<int64_t> shape = x.shape_vec();
  shape.back() = inner;
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor y, DeviceTensor::make(be, x.dtype, shape));
  const int64_t rows = x.numel() / in;
  Tensor y2 = y.t.reshape({rows, inner});
  kernels::MatmulOptions o;
  o.trans_b = true;
  o.bias = &bias;
  o.geglu_pairs = true;
  HIPQ_RETURN_IF_ERROR(linear_product(be, x.reshape({rows, in}), weight, fp8, y2, o, x_codes));
  return y;
}

Result<Conv2d> Conv2d::bind(WeightBinder& b, const std::string& prefix, int64_t in, int64_t out, int kernel,
                            int stride, int padding, bool bias, bool fp8_form) {
  Conv2d c;
  c.in = in;
  c.out = out;
  c.kernel = kernel;
  c.stride = stride;
  c.padding = padding;
  c.has_bias = bias;
  const int64_t fan_in = in * kernel * kernel;
  if (fp8_form && stride == 1) {
    HIPQ_ASSIGN_OR_RETURN(std::optional<kernels::Fp8ConvWeight> q,
                          b.bind_fp8_conv(join_key(prefix, "weight"), {out, in, kernel, kernel},
                                          ParamInit::uniform_fan_in(fan_in)));
    if (q) c.fp8 = *q;
  }
  if (c.fp8.codes.data == nullptr) {
    HIPQ_ASSIGN_OR_RETURN(c.weight, b.bind(join_key(prefix, "weight"), {out, in, kernel, kernel},
                                           ParamInit::uniform_fan_in(fan_in)));
  }
  if (bias) {
    HIPQ_ASSIGN_OR_RETURN(c.bias, b.bind(join_key(prefix, "bias"), {out}, ParamInit::uniform_fan_in(fan_in)));
  }
  return c;
}

Status Conv2d::forward(kernels::Backend& be, const Tensor& x, Tensor& y, const Tensor* residual,
                       bool upsample_x2) const {
  kernels::Conv2dOptions o;
  o.stride = stride;
  o.padding = padding;
  o.bias = has_bias ? &bias : nullptr;
  o.residual = residual;
  o.upsample_x2 = upsample_x2;
  if (fp8.codes.data != nullptr) return be.conv2d_fp8(x, fp8, y, o);
  return be.conv2d(x, weight, y, o);
}

Result<DeviceTensor> Conv2d::operator()(kernels::Backend& be, const Tensor& x, const Tensor* residual) const {
  if (x.ndim != 4 || x.dim(1) != in)
    return Status::InvalidArgument("Conv2d: input " + x.describe() + " is not [N, " + std::to_string(in) + ", H, W]");
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor y,
                        DeviceTensor::make(be, x.dtype,
                                           {x.dim(0), out, conv_out_size(x.dim(2), kernel, stride, padding),
                                            conv_out_size(x.dim(3), kernel, stride, padding)}));
  HIPQ_RETURN_IF_ERROR(forward(be, x, y.t, residual));
  return y;
}

Result<GroupNorm> GroupNorm::bind(WeightBinder& b, const std::string& prefix, int64_t channels, int groups,
                                  float eps) {
  if (groups <= 0 || channels % groups != 0)
    return Status::InvalidArgument("GroupNorm '" + prefix + "': " + std::to_string(channels) +
                                   " channels are not divisible into " + std::to_string(groups) + " groups");
  GroupNorm g;
  g.channels = channels;
  g.groups = groups;
  g.eps = eps;
  HIPQ_ASSIGN_OR_RETURN(g.weight, b.bind(join_key(prefix, "weight"), {channels}, ParamInit::ones()));
  HIPQ_ASSIGN_OR_RETURN(g.bias, b.bind(join_key(prefix, "bias"), {channels}, ParamInit::zeros()));
  return g;
}

Result<DeviceTensor> GroupNorm::operator()(kernels::Backend& be, const Tensor& x, bool silu) const {
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor y, DeviceTensor::make(be, x.dtype, x.shape_vec()));
  kernels::GroupNormOptions o;
  o.groups = groups;
  o.eps = eps;
  o.fuse_silu = silu;
  HIPQ_RETURN_IF_ERROR(be.group_norm(x, weight, bias, y.t, o));
  return y;
}

Status GroupNorm::in_place(kernels::Backend& be, Tensor& x, bool silu) const {
  if (!x.is_contiguous()) return Status::InvalidArgument("GroupNorm::in_place: " + x.describe() + " is a view");
  kernels::GroupNormOptions o;
  o.groups = groups;
  o.eps = eps;
  o.fuse_silu = silu;
  return be.group_norm(x, weight, bias, x, o);
}

Result<LayerNorm> LayerNorm::bind(WeightBinder& b, const std::string& prefix, int64_t dim, float eps) {
  LayerNorm l;
  l.dim = dim;
  l.eps = eps;
  HIPQ_ASSIGN_OR_RETURN(l.weight, b.bind(join_key(prefix, "weight"), {dim}, ParamInit::ones()));
  HIPQ_ASSIGN_OR_RETURN(l.bias, b.bind(join_key(prefix, "bias"), {dim}, ParamInit::zeros()));
  return l;
}

Result<DeviceTensor> LayerNorm::operator()(kernels::Backend& be, const Tensor& x) const {
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor y, DeviceTensor::make(be, x.dtype, x.shape_vec()));
  HIPQ_RETURN_IF_ERROR(be.layer_norm(x, &weight, &bias, y.t, eps));
  return y;
}

Result<LayerNorm::Codes> LayerNorm::codes(kernels::Backend& be, const Tensor& x) const {
  if (x.ndim < 1 || x.dim(-1) != dim)
    return Status::InvalidArgument("LayerNorm: input " + x.describe() + " does not end in " + std::to_string(dim));
  const int64_t rows = x.numel() / dim;
  Codes c;
  HIPQ_ASSIGN_OR_RETURN(c.codes, DeviceTensor::make(be, kernels::DType::kU8, {rows, dim}));
  HIPQ_ASSIGN_OR_RETURN(c.scales, DeviceTensor::make(be, kernels::DType::kF32, {rows}));
  HIPQ_RETURN_IF_ERROR(be.layer_norm_fp8(x.reshape({rows, dim}), &weight, &bias, eps, c.codes.t, c.scales.t));
  return c;
}

bool fp8_norm_codes_enabled() {
  const char* env = std::getenv("HIPQ_FP8_NORM_CODES");
  return env != nullptr && std::string_view(env) == "1";
}

}  // namespace hipq::engine
