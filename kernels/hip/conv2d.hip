// conv2d (NCHW) as an implicit GEMM on the tiled core (gemm_tile.h):
// per image, out[o, p] = sum_k W[o, k] * X(k, p) with k = (c, ky, kx) and
// p = (ho, wo); X(k, p) is read straight from the input with padding (no
// im2col buffer). Epilogue adds bias and residual. x must be contiguous
// (a strided x is copied into a pool buffer first).
#include <string>

#include "kernels/hip/gemm_tile.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

struct WeightLoader {
  const void* w;
  int dt;
  int64_t K;
  __device__ float operator()(int /*b*/, int m, int k) const { return dev::ld(w, dt, m * K + k); }
};

struct Im2colLoader {
  const void* x;
  int dt;
  int C, H, W, Wo, KH, KW, stride, pad;
  __device__ float operator()(int b, int k, int p) const {
    const int khw = KH * KW;
    const int c = k / khw;
    const int r = k - c * khw;
    const int ky = r / KW;
    const int kx = r - ky * KW;
    const int ho = p / Wo;
    const int wo = p - ho * Wo;
    const int hi = ho * stride - pad + ky;
    const int wi = wo * stride - pad + kx;
    if (hi < 0 || hi >= H || wi < 0 || wi >= W) return 0.0f;
    return dev::ld(x, dt, ((static_cast<int64_t>(b) * C + c) * H + hi) * W + wi);
  }
};

struct ConvEpilogue {
  void* y;
  int dt;
  int64_t O, P;
  const void* bias;
  int bias_dt;
  const void* res;
  int res_dt;
  __device__ void operator()(int b, int o, int p, float acc) const {
    float v = acc;
    if (bias) v += dev::ld(bias, bias_dt, o);
    const int64_t i = (b * O + o) * P + p;
    if (res) v += dev::ld(res, res_dt, i);
    dev::st(y, dt, i, v);
  }
};

}  // namespace

Status hip_conv2d(HipContext& ctx, const Tensor& x_in, const Tensor& w_in, Tensor& y, const Conv2dOptions& o) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x_in, "conv2d", "x"));
  HIPQ_RETURN_IF_ERROR(require_device_float(w_in, "conv2d", "w"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "conv2d", "y"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(y, "conv2d", "y"));
  if (x_in.ndim != 4 || w_in.ndim != 4 || y.ndim != 4)
    return Status::InvalidArgument("conv2d: x, w and y must be 4-D (NCHW, OCkk): x " + x_in.describe() + ", w " +
                                   w_in.describe() + ", y " + y.describe());
  if (o.stride < 1 || o.padding < 0)
    return Status::InvalidArgument("conv2d: stride must be >= 1 and padding >= 0 (got stride " +
                                   std::to_string(o.stride) + ", padding " + std::to_string(o.padding) + ")");
  const int64_t N = x_in.shape[0], C = x_in.shape[1], H = x_in.shape[2], W = x_in.shape[3];
  const int64_t O = w_in.shape[0], KH = w_in.shape[2], KW = w_in.shape[3];
  if (w_in.shape[1] != C) return shape_mismatch("conv2d", "input channels of x and w differ", x_in, w_in);
  const int64_t Ho = (H + 2 * o.padding - KH) / o.stride + 1;
  const int64_t Wo = (W + 2 * o.padding - KW) / o.stride + 1;
  if (Ho <= 0 || Wo <= 0 || y.shape[0] != N || y.shape[1] != O || y.shape[2] != Ho || y.shape[3] != Wo)
    return Status::InvalidArgument("conv2d: y " + y.describe() + " must be [" + std::to_string(N) + ", " +
                                   std::to_string(O) + ", " + std::to_string(Ho) + ", " + std::to_string(Wo) +
                                   "] for x " + x_in.describe() + ", w " + w_in.describe());
  ConvEpilogue ep{y.data, static_cast<int>(y.dtype), O, Ho * Wo, nullptr, 0, nullptr, 0};
  if (o.bias) {
    HIPQ_RETURN_IF_ERROR(require_device_float(*o.bias, "conv2d", "bias"));
    if (o.bias->numel() != O || !o.bias->is_contiguous())
      return shape_mismatch("conv2d", "bias must be contiguous [O] (bias, y)", *o.bias, y);
    ep.bias = o.bias->data;
    ep.bias_dt = static_cast<int>(o.bias->dtype);
  }
  Buffer res_hold, x_hold, w_hold;
  if (o.residual) {
    HIPQ_RETURN_IF_ERROR(require_device_float(*o.residual, "conv2d", "residual"));
    if (!o.residual->same_shape(y)) return shape_mismatch("conv2d", "residual must have y's shape", *o.residual, y);
    HIPQ_ASSIGN_OR_RETURN(Tensor r, contiguous_or_copy(ctx, *o.residual, res_hold));
    ep.res = r.data;
    ep.res_dt = static_cast<int>(r.dtype);
  }
  if (N == 0 || O == 0) return Status::Ok();
  if (N > 65535 || C * KH * KW > (int64_t{1} << 30) || C * H * W * N > (int64_t{1} << 40))
    return Status::InvalidArgument("conv2d: problem too large for one launch: x " + x_in.describe());
  HIPQ_ASSIGN_OR_RETURN(Tensor x, contiguous_or_copy(ctx, x_in, x_hold));
  HIPQ_ASSIGN_OR_RETURN(Tensor w, contiguous_or_copy(ctx, w_in, w_hold));
  const int64_t K = C * KH * KW;
  WeightLoader la{w.data, static_cast<int>(w.dtype), K};
  Im2colLoader lb{x.data, static_cast<int>(x.dtype), static_cast<int>(C), static_cast<int>(H), static_cast<int>(W),
                  static_cast<int>(Wo), static_cast<int>(KH), static_cast<int>(KW), o.stride, o.padding};
  const int mma_dtype = x.dtype == w.dtype && x.dtype != DType::kF32 ? static_cast<int>(x.dtype) : -1;
  HIPQ_HIP_RETURN_IF_ERROR(dev::launch_gemm(ctx.stream, ctx.multiprocessors, ctx.matrix_units, mma_dtype,
                                            static_cast<int>(N),
                                            static_cast<int>(O), static_cast<int>(Ho * Wo), static_cast<int>(K), la,
                                            true, lb, false, ep));
  return Status::Ok();
}

}  // namespace hipq::kernels
