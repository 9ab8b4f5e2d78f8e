// unary: y = f(x) for gelu, gelu_tanh, silu, quick_gelu, neg, exp. x may be
// strided; x and y may differ in float dtype.
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__device__ __forceinline__ float apply_unary(int op, float x) {
  switch (op) {
    case static_cast<int>(UnaryOp::kGelu): return dev::gelu(x);
    case static_cast<int>(UnaryOp::kGeluTanh): return dev::gelu_tanh(x);
    case static_cast<int>(UnaryOp::kSilu): return dev::silu(x);
    case static_cast<int>(UnaryOp::kQuickGelu): return dev::quick_gelu(x);
    case static_cast<int>(UnaryOp::kNeg): return -x;
    default: return expf(x);
  }
}

__global__ void unary_kernel(int op, const void* __restrict__ x, int xdt, void* __restrict__ y, int ydt, int64_t n,
                             dev::Indexer ix) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t ox, oy, u;
    ix.offsets(i, ox, oy, u);
    dev::st(y, ydt, oy, apply_unary(op, dev::ld(x, xdt, ox)));
  }
}

}  // namespace

Status hip_unary(HipContext& ctx, UnaryOp op, const Tensor& x, Tensor& y) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x, "unary", "x"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "unary", "y"));
  if (!x.same_shape(y)) return shape_mismatch("unary", "x and y shapes differ", x, y);
  if (static_cast<int>(op) > static_cast<int>(UnaryOp::kExp))
    return Status::InvalidArgument("unary: unknown op code " + std::to_string(static_cast<int>(op)));
  const int64_t n = x.numel();
  if (n == 0) return Status::Ok();
  const int block = ctx.tuning->elementwise_block;
  unary_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(static_cast<int>(op), x.data,
                                                                  static_cast<int>(x.dtype), y.data,
                                                                  static_cast<int>(y.dtype), n, make_indexer(x, &x, &y));
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
