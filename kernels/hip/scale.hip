// scale: y = alpha * x + beta elementwise (x may be strided).
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__global__ void scale_kernel(const void* __restrict__ x, int xdt, void* __restrict__ y, int ydt, int64_t n,
                             dev::Indexer ix, float alpha, float beta) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t ox, oy, u;
    ix.offsets(i, ox, oy, u);
    dev::st(y, ydt, oy, fmaf(alpha, dev::ld(x, xdt, ox), beta));
  }
}

}  // namespace

Status hip_scale(HipContext& ctx, const Tensor& x, Tensor& y, float alpha, float beta) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x, "scale", "x"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "scale", "y"));
  if (!x.same_shape(y)) return shape_mismatch("scale", "x and y shapes differ", x, y);
  const int64_t n = x.numel();
  if (n == 0) return Status::Ok();
  const int block = ctx.tuning->elementwise_block;
  scale_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(x.data, static_cast<int>(x.dtype), y.data,
                                                                  static_cast<int>(y.dtype), n,
                                                                  make_indexer(x, &x, &y), alpha, beta);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
