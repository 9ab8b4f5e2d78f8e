#include "engine/models/resnet_block.h"

namespace hipq::engine {

Result<ResnetBlock2D> ResnetBlock2D::bind(WeightBinder& b, const std::string& prefix, int64_t in, int64_t out,
                                          int64_t temb_channels, int groups, float eps) {
  ResnetBlock2D r;
  r.in = in;
  r.out = out;
  HIPQ_ASSIGN_OR_RETURN(r.norm1, GroupNorm::bind(b, join_key(prefix, "norm1"), in, groups, eps));
  HIPQ_ASSIGN_OR_RETURN(
      r.conv1, Conv2d::bind(b, join_key(prefix, "conv1"), in, out, 3, 1, 1, true, /*fp8_form=*/true));
  if (temb_channels > 0) {
    HIPQ_ASSIGN_OR_RETURN(Linear t, Linear::bind(b, join_key(prefix, "time_emb_proj"), temb_channels, out));
    r.time_emb_proj = std::move(t);
  }
  HIPQ_ASSIGN_OR_RETURN(r.norm2, GroupNorm::bind(b, join_key(prefix, "norm2"), out, groups, eps));
  HIPQ_ASSIGN_OR_RETURN(
      r.conv2, Conv2d::bind(b, join_key(prefix, "conv2"), out, out, 3, 1, 1, true, /*fp8_form=*/true));
  if (in != out) {
    HIPQ_ASSIGN_OR_RETURN(Conv2d s, Conv2d::bind(b, join_key(prefix, "conv_shortcut"), in, out, 1, 1, 0, true,
                                                 /*fp8_form=*/true));
    r.conv_shortcut = std::move(s);
  }
  return r;
}

Result<DeviceTensor> ResnetBlock2D::forward(kernels::Backend& be, const kernels::Tensor& x,
                                            const kernels::Tensor* temb_silu) const {
  // Each intermediate goes back to the pool as soon as the next one is made
  // (the ops are stream-ordered, so its block is reused only after): at the
  // VAE's 1024 px levels one fp32 activation is 0.5-1 GiB.
  DeviceTensor h1;
  {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor h, norm1(be, x, /*silu=*/true));
    HIPQ_ASSIGN_OR_RETURN(h1, conv1(be, h.t));  // [N, out, H, W]
  }
  if (time_emb_proj && temb_silu) {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor t, (*time_emb_proj)(be, *temb_silu));  // [N, out]
    kernels::Tensor t4 = t.t.reshape({t.t.dim(0), out, 1, 1});
    HIPQ_RETURN_IF_ERROR(be.binary(kernels::BinaryOp::kAdd, h1.t, t4, h1.t));
  }
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor h2, norm2(be, h1.t, /*silu=*/true));
  h1 = DeviceTensor{};
  if (conv_shortcut) {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor s, (*conv_shortcut)(be, x));
    return conv2(be, h2.t, &s.t);
  }
  return conv2(be, h2.t, &x);
}

Result<DeviceTensor> ResnetBlock2D::forward_consuming(kernels::Backend& be, DeviceTensor x,
                                                      const kernels::Tensor* temb_silu) const {
  if (!x.t.is_contiguous()) return forward(be, x.t, temb_silu);
  DeviceTensor s, h1;
  if (conv_shortcut) {
    HIPQ_ASSIGN_OR_RETURN(s, (*conv_shortcut)(be, x.t));
    HIPQ_RETURN_IF_ERROR(norm1.in_place(be, x.t, /*silu=*/true));
    HIPQ_ASSIGN_OR_RETURN(h1, conv1(be, x.t));
    x = DeviceTensor{};
  } else {  // x is the residual: kept to the end
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor h, norm1(be, x.t, /*silu=*/true));
    HIPQ_ASSIGN_OR_RETURN(h1, conv1(be, h.t));
  }
  if (time_emb_proj && temb_silu) {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor t, (*time_emb_proj)(be, *temb_silu));  // [N, out]
    kernels::Tensor t4 = t.t.reshape({t.t.dim(0), out, 1, 1});
    HIPQ_RETURN_IF_ERROR(be.binary(kernels::BinaryOp::kAdd, h1.t, t4, h1.t));
  }
  HIPQ_RETURN_IF_ERROR(norm2.in_place(be, h1.t, /*silu=*/true));
  return conv2(be, h1.t, conv_shortcut ? &s.t : &x.t);
}

}  // namespace hipq::engine
