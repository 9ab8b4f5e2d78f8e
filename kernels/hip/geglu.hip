// geglu: x [..., 2F] -> y [..., F] = x[..., :F] * gelu(x[..., F:]) (diffusers
// GEGLU, exact erf GELU). x is made contiguous first if it is not.
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__global__ void geglu_kernel(const void* __restrict__ x, int xdt, void* __restrict__ y, int ydt, int64_t n,
                             int64_t F) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / F, c = i - r * F;
    const float h = dev::ld(x, xdt, r * 2 * F + c);
    const float g = dev::ld(x, xdt, r * 2 * F + F + c);
    dev::st(y, ydt, i, h * dev::gelu(g));
  }
}

}  // namespace

Status hip_geglu(HipContext& ctx, const Tensor& x_in, Tensor& y) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x_in, "geglu", "x"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "geglu", "y"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(y, "geglu", "y"));
  bool ok = x_in.ndim >= 1 && x_in.ndim == y.ndim && x_in.dim(-1) == 2 * y.dim(-1);
  for (int d = 0; ok && d + 1 < x_in.ndim; ++d) ok = x_in.shape[d] == y.shape[d];
  if (!ok) return shape_mismatch("geglu", "y must be x with the last dim halved", x_in, y);
  const int64_t n = y.numel();
  if (n == 0) return Status::Ok();
  Buffer hold;
  HIPQ_ASSIGN_OR_RETURN(Tensor x, contiguous_or_copy(ctx, x_in, hold));
  const int block = ctx.tuning->elementwise_block;
  geglu_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(x.data, static_cast<int>(x.dtype), y.data,
                                                                  static_cast<int>(y.dtype), n, y.dim(-1));
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
