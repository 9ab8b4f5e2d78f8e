#include "engine/models/transformer_2d.h"

namespace hipq::engine {

using kernels::Tensor;

Result<BasicTransformerBlock> BasicTransformerBlock::bind(WeightBinder& b, const std::string& prefix,
                                                          int64_t dim, int heads, int64_t head_dim,
                                                          int64_t cross_dim) {
  BasicTransformerBlock t;
  HIPQ_ASSIGN_OR_RETURN(t.norm1, LayerNorm::bind(b, join_key(prefix, "norm1"), dim, 1e-5f));
  HIPQ_ASSIGN_OR_RETURN(t.attn1, Attention::bind(b, join_key(prefix, "attn1"), AttentionKind::kSelf, dim, dim,
                                                 heads, head_dim, false));
  HIPQ_ASSIGN_OR_RETURN(t.norm2, LayerNorm::bind(b, join_key(prefix, "norm2"), dim, 1e-5f));
  HIPQ_ASSIGN_OR_RETURN(t.attn2,
                        Attention::bind(b, join_key(prefix, "attn2"), AttentionKind::kCross, dim, cross_dim,
                                        heads, head_dim, false));
  HIPQ_ASSIGN_OR_RETURN(t.norm3, LayerNorm::bind(b, join_key(prefix, "norm3"), dim, 1e-5f));
  const int64_t ff_inner = 4 * dim;
  HIPQ_ASSIGN_OR_RETURN(t.ff_geglu, Geglu::bind(b, join_key(prefix, "ff.net.0"), dim, ff_inner));
  HIPQ_ASSIGN_OR_RETURN(t.ff_out, Linear::bind(b, join_key(prefix, "ff.net.2"), ff_inner, dim));
  t.norm_codes = t.attn1.to_qkv.fp8.set() && t.attn2.to_q.fp8.set() && t.ff_geglu.fp8.set() &&
                 fp8_norm_codes_enabled();
  return t;
}

namespace {
// A norm's output as its layer takes it: 16 bits, or (norm_codes) e4m3
// codes, for which the norm's input, of the output's shape and dtype,
// stands in as the layer's x.
struct Normed {
  DeviceTensor y;
  LayerNorm::Codes c;
  kernels::Fp8Rows rows;  // views of c
  const Tensor& x(const Tensor& norm_input) const { return rows.codes.data != nullptr ? norm_input : y.t; }
  const kernels::Fp8Rows* codes() const { return rows.codes.data != nullptr ? &rows : nullptr; }
};

Result<Normed> normed(kernels::Backend& be, const LayerNorm& norm, const Tensor& x, bool as_codes) {
  Normed n;
  if (as_codes) {
    HIPQ_ASSIGN_OR_RETURN(n.c, norm.codes(be, x));
    n.rows = n.c.rows();
  } else {
    HIPQ_ASSIGN_OR_RETURN(n.y, norm(be, x));
  }
  return n;
}
}  // namespace

Result<DeviceTensor> BasicTransformerBlock::forward(kernels::Backend& be, const Tensor& x, const Tensor& context,
                                                    const ContextKV* kv) const {
  HIPQ_ASSIGN_OR_RETURN(Normed n1, normed(be, norm1, x, norm_codes));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor h1, attn1.forward(be, n1.x(x), nullptr, &x, nullptr, n1.codes()));
  HIPQ_ASSIGN_OR_RETURN(Normed n2, normed(be, norm2, h1.t, norm_codes));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor h2, attn2.forward(be, n2.x(h1.t), &context, &h1.t, kv, n2.codes()));
  HIPQ_ASSIGN_OR_RETURN(Normed n3, normed(be, norm3, h2.t, norm_codes));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor g, ff_geglu(be, n3.x(h2.t), n3.codes()));  // [B, S, 4*dim]
  return ff_out(be, g.t, kernels::Activation::kNone, &h2.t);
}

Result<Transformer2DModel> Transformer2DModel::bind(WeightBinder& b, const std::string& prefix, int64_t channels,
                                                    int heads, int depth, int64_t cross_dim,
                                                    bool use_linear_projection, int groups) {
  if (heads <= 0 || channels % heads != 0)
    return Status::InvalidArgument("Transformer2DModel '" + prefix + "': " + std::to_string(channels) +
                                   " channels do not split into " + std::to_string(heads) + " heads");
  Transformer2DModel t;
  t.channels = channels;
  t.linear_projection = use_linear_projection;
  HIPQ_ASSIGN_OR_RETURN(t.norm, GroupNorm::bind(b, join_key(prefix, "norm"), channels, groups, 1e-6f));
  if (use_linear_projection) {
    HIPQ_ASSIGN_OR_RETURN(t.proj_in_linear, Linear::bind(b, join_key(prefix, "proj_in"), channels, channels));
  } else {
    HIPQ_ASSIGN_OR_RETURN(t.proj_in_conv, Conv2d::bind(b, join_key(prefix, "proj_in"), channels, channels, 1, 1, 0));
  }
  for (int i = 0; i < depth; ++i) {
    HIPQ_ASSIGN_OR_RETURN(BasicTransformerBlock blk,
                          BasicTransformerBlock::bind(b, join_key(prefix, "transformer_blocks." + std::to_string(i)),
                                                      channels, heads, channels / heads, cross_dim));
    t.blocks.push_back(std::move(blk));
  }
  if (use_linear_projection) {
    HIPQ_ASSIGN_OR_RETURN(t.proj_out_linear, Linear::bind(b, join_key(prefix, "proj_out"), channels, channels));
  } else {
    HIPQ_ASSIGN_OR_RETURN(t.proj_out_conv,
                          Conv2d::bind(b, join_key(prefix, "proj_out"), channels, channels, 1, 1, 0));
  }
  return t;
}

Status Transformer2DModel::project_context(kernels::Backend& be, ContextKV& kv) const {
  for (const BasicTransformerBlock& blk : blocks) HIPQ_RETURN_IF_ERROR(kv.add(be, blk.attn2));
  return Status::Ok();
}

Result<DeviceTensor> Transformer2DModel::forward(kernels::Backend& be, const Tensor& x, const Tensor& context,
                                                 const ContextKV* kv) const {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), s = h * w;
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor normed, norm(be, x, false));
  DeviceTensor tokens;  // [N, HW, C]
  if (linear_projection) {
    Tensor nhwc = normed.t.reshape({n, c, s}).permute({0, 2, 1});
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor seq, contiguous_copy(be, nhwc, x.dtype));
    HIPQ_ASSIGN_OR_RETURN(tokens, proj_in_linear(be, seq.t));
  } else {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor p, proj_in_conv(be, normed.t));
    HIPQ_ASSIGN_OR_RETURN(tokens, contiguous_copy(be, p.t.reshape({n, c, s}).permute({0, 2, 1}), x.dtype));
  }
  for (const BasicTransformerBlock& blk : blocks) {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor next, blk.forward(be, tokens.t, context, kv));
    tokens = std::move(next);
  }
  if (linear_projection) {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor p, proj_out_linear(be, tokens.t));  // [N, HW, C]
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor out, DeviceTensor::make(be, x.dtype, {n, c, h, w}));
    Tensor dst = out.t.reshape({n, c, s});
    HIPQ_RETURN_IF_ERROR(be.copy(p.t.permute({0, 2, 1}), dst));
    HIPQ_RETURN_IF_ERROR(be.binary(kernels::BinaryOp::kAdd, out.t, x, out.t));
    return out;
  }
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor ncs, contiguous_copy(be, tokens.t.permute({0, 2, 1}), x.dtype));
  return proj_out_conv(be, ncs.t.reshape({n, c, h, w}), &x);
}

}  // namespace hipq::engine
