// upsample_nearest2x: [N, C, H, W] -> [N, C, 2H, 2W], each input pixel
// repeated in a 2x2 block. x may be strided.
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__global__ void upsample2x_kernel(const void* __restrict__ x, int xdt, int64_t sn, int64_t sc, int64_t sh,
                                  int64_t sw, void* __restrict__ y, int ydt, int64_t n, int64_t C, int64_t Ho,
                                  int64_t Wo) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = i;
    const int64_t wo = r % Wo;
    r /= Wo;
    const int64_t ho = r % Ho;
    r /= Ho;
    const int64_t c = r % C;
    const int64_t b = r / C;
    dev::st(y, ydt, i, dev::ld(x, xdt, b * sn + c * sc + (ho >> 1) * sh + (wo >> 1) * sw));
  }
}

}  // namespace

Status hip_upsample_nearest2x(HipContext& ctx, const Tensor& x, Tensor& y) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x, "upsample_nearest2x", "x"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "upsample_nearest2x", "y"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(y, "upsample_nearest2x", "y"));
  if (x.ndim != 4 || y.ndim != 4 || y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1] ||
      y.shape[2] != 2 * x.shape[2] || y.shape[3] != 2 * x.shape[3])
    return shape_mismatch("upsample_nearest2x", "y must be [N, C, 2H, 2W] of x [N, C, H, W]", x, y);
  const int64_t n = y.numel();
  if (n == 0) return Status::Ok();
  const int block = ctx.tuning->elementwise_block;
  upsample2x_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(
      x.data, static_cast<int>(x.dtype), x.stride[0], x.stride[1], x.stride[2], x.stride[3], y.data,
      static_cast<int>(y.dtype), n, y.shape[1], y.shape[2], y.shape[3]);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
