#include "engine/models/resample.h"

namespace hipq::engine {

Result<Downsample2D> Downsample2D::bind(WeightBinder& b, const std::string& prefix, int64_t channels, int padding) {
  if (padding != 0 && padding != 1)
    return Status::InvalidArgument("Downsample2D " + prefix + ": padding " + std::to_string(padding) + " is not 0 or 1");
  Downsample2D d;
  HIPQ_ASSIGN_OR_RETURN(d.conv, Conv2d::bind(b, join_key(prefix, "conv"), channels, channels, 3, 2, padding));
  return d;
}

Result<DeviceTensor> Downsample2D::forward(kernels::Backend& be, const kernels::Tensor& x) const {
  if (conv.padding != 0) return conv(be, x);
  // F.pad(x, (0, 1, 0, 1)): x in the top-left of a zeroed [N, C, H + 1, W + 1].
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor padded, DeviceTensor::make(be, x.dtype, {n, c, h + 1, w + 1}));
  HIPQ_RETURN_IF_ERROR(be.fill(padded.t, 0.0f));
  kernels::Tensor inner = padded.t.slice(2, 0, h).slice(3, 0, w);
  HIPQ_RETURN_IF_ERROR(be.copy(x, inner));
  return conv(be, padded.t);
}

Result<Upsample2D> Upsample2D::bind(WeightBinder& b, const std::string& prefix, int64_t channels) {
  Upsample2D u;
  HIPQ_ASSIGN_OR_RETURN(u.conv, Conv2d::bind(b, join_key(prefix, "conv"), channels, channels, 3, 1, 1, true,
                                             /*fp8_form=*/true));
  return u;
}

Result<DeviceTensor> Upsample2D::forward(kernels::Backend& be, const kernels::Tensor& x, int64_t out_h,
                                         int64_t out_w) const {
  const int64_t n = x.dim(0), c = x.dim(1), h2 = 2 * x.dim(2), w2 = 2 * x.dim(3);
  if ((out_h == 0 || out_h == h2) && (out_w == 0 || out_w == w2)) {
    // The conv reads x as its 2x upsample: no full-size copy of the input.
    if (x.ndim != 4 || c != conv.in)
      return Status::InvalidArgument("Upsample2D: input " + x.describe() + " is not [N, " + std::to_string(conv.in) +
                                     ", H, W]");
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor y, DeviceTensor::make(be, x.dtype, {n, conv.out, h2, w2}));
    HIPQ_RETURN_IF_ERROR(conv.forward(be, x, y.t, nullptr, /*upsample_x2=*/true));
    return y;
  }
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor up, DeviceTensor::make(be, x.dtype, {n, c, h2, w2}));
  HIPQ_RETURN_IF_ERROR(be.upsample_nearest2x(x, up.t));
  if (out_h > h2 || out_w > w2)
    return Status::InvalidArgument("Upsample2D: target size larger than 2x the input " + x.describe());
  kernels::Tensor view = up.t.slice(2, 0, out_h == 0 ? h2 : out_h).slice(3, 0, out_w == 0 ? w2 : out_w);
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor cropped, contiguous_copy(be, view, x.dtype));
  return conv(be, cropped.t);
}

}  // namespace hipq::engine
