// geglu: x [..., 2F] -> y [..., F] = value * gelu(gate) (diffusers GEGLU, exact
// erf GELU), with the value and gate columns of a row either in halves
// (value j at j, gate at F + j: hip_geglu, the layout diffusers' projection
// writes) or in pairs (value j at 2j, gate at 2j + 1: hip_geglu_pairs, matmul's
// geglu_pairs layout where the fused epilogue does not apply). x is made
// contiguous first if it is not.
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

// Value j of row r at r * 2F + j * step, its gate `gate` further on.
__global__ void geglu_kernel(const void* __restrict__ x, int xdt, void* __restrict__ y, int ydt, int64_t n,
                             int64_t F, int64_t step, int64_t gate) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / F, c = i - r * F;
    const int64_t v = r * 2 * F + c * step;
    const float h = dev::ld(x, xdt, v);
    const float g = dev::ld(x, xdt, v + gate);
    dev::st(y, ydt, i, h * dev::gelu(g));
  }
}

Status run_geglu(HipContext& ctx, const Tensor& x_in, Tensor& y, bool pairs) {
  const char* op = pairs ? "geglu_pairs" : "geglu";
  HIPQ_RETURN_IF_ERROR(require_device_float(x_in, op, "x"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, op, "y"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(y, op, "y"));
  bool ok = x_in.ndim >= 1 && x_in.ndim == y.ndim && x_in.dim(-1) == 2 * y.dim(-1);
  for (int d = 0; ok && d + 1 < x_in.ndim; ++d) ok = x_in.shape[d] == y.shape[d];
  if (!ok) return shape_mismatch(op, "y must be x with the last dim halved", x_in, y);
  const int64_t n = y.numel();
  if (n == 0) return Status::Ok();
  Buffer hold;
  HIPQ_ASSIGN_OR_RETURN(Tensor x, contiguous_or_copy(ctx, x_in, hold));
  const int64_t F = y.dim(-1);
  const int block = ctx.tuning->elementwise_block;
  geglu_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(x.data, static_cast<int>(x.dtype), y.data,
                                                                  static_cast<int>(y.dtype), n, F,
                                                                  pairs ? 2 : 1, pairs ? 1 : F);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace

Status hip_geglu(HipContext& ctx, const Tensor& x, Tensor& y) { return run_geglu(ctx, x, y, false); }

Status hip_geglu_pairs(HipContext& ctx, const Tensor& x, Tensor& y) { return run_geglu(ctx, x, y, true); }

}  // namespace hipq::kernels
