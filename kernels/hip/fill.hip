// fill: y = value for every element (any float dtype, strided y allowed).
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__global__ void fill_kernel(void* __restrict__ y, int dt, int64_t n, dev::Indexer ix, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t oy, u1, u2;
    ix.offsets(i, oy, u1, u2);
    dev::st(y, dt, oy, value);
  }
}

}  // namespace

Status hip_fill(HipContext& ctx, Tensor& y, float value) {
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "fill", "y"));
  const int64_t n = y.numel();
  if (n == 0) return Status::Ok();
  const int block = ctx.tuning->elementwise_block;
  fill_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(y.data, static_cast<int>(y.dtype), n,
                                                                 make_indexer(y, &y), value);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
