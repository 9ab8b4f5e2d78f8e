// binary: y = a (op) b with b broadcast to a's shape (numpy rules, b's dims
// right-aligned; a size-1 dim of b repeats). a and b may be strided.
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__global__ void binary_kernel(int op, const void* __restrict__ a, int adt, const void* __restrict__ b, int bdt,
                              void* __restrict__ y, int ydt, int64_t n, dev::Indexer ix) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t oa, ob, oy;
    ix.offsets(i, oa, ob, oy);
    const float va = dev::ld(a, adt, oa);
    const float vb = dev::ld(b, bdt, ob);
    float r;
    switch (op) {
      case static_cast<int>(BinaryOp::kAdd): r = va + vb; break;
      case static_cast<int>(BinaryOp::kSub): r = va - vb; break;
      case static_cast<int>(BinaryOp::kMul): r = va * vb; break;
      default: r = va / vb; break;
    }
    dev::st(y, ydt, oy, r);
  }
}

}  // namespace

Status hip_binary(HipContext& ctx, BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  HIPQ_RETURN_IF_ERROR(require_device_float(a, "binary", "a"));
  HIPQ_RETURN_IF_ERROR(require_device_float(b, "binary", "b"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "binary", "y"));
  if (!a.same_shape(y)) return shape_mismatch("binary", "y must have a's shape", a, y);
  if (b.ndim > a.ndim) return shape_mismatch("binary", "b has more dims than a (cannot broadcast)", b, a);
  if (static_cast<int>(op) > static_cast<int>(BinaryOp::kDiv))
    return Status::InvalidArgument("binary: unknown op code " + std::to_string(static_cast<int>(op)));
  dev::Indexer ix;
  ix.ndim = a.ndim;
  const int off = a.ndim - b.ndim;
  for (int d = 0; d < a.ndim; ++d) {
    ix.shape[d] = a.shape[d];
    ix.stride[0][d] = a.stride[d];
    ix.stride[2][d] = y.stride[d];
    const int bd = d - off;
    if (bd < 0 || b.shape[bd] == 1) {
      ix.stride[1][d] = 0;
    } else if (b.shape[bd] == a.shape[d]) {
      ix.stride[1][d] = b.stride[bd];
    } else {
      return shape_mismatch("binary", "b does not broadcast to a", b, a);
    }
  }
  if (ix.ndim == 0) {
    ix.ndim = 1;
    ix.shape[0] = 1;
  }
  const int64_t n = a.numel();
  if (n == 0) return Status::Ok();
  const int block = ctx.tuning->elementwise_block;
  binary_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(
      static_cast<int>(op), a.data, static_cast<int>(a.dtype), b.data, static_cast<int>(b.dtype), y.data,
      static_cast<int>(y.dtype), n, ix);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
