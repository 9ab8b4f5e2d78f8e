// softmax over the last dim of (scale * x), one block per row. With causal,
// on the last two dims [R, C] element (r, c) is masked (gets 0) when
// c > r + (C - R), the same alignment as attention's causal mask.
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__global__ void softmax_kernel(const void* __restrict__ x, int xdt, void* __restrict__ y, int ydt, int64_t C,
                               int64_t R, float scale, bool causal) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t base = row * C;
  const int64_t limit = causal ? (row % R) + (C - R) : C - 1;  // last unmasked column
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i <= limit && i < C; i += blockDim.x) m = fmaxf(m, scale * dev::ld(x, xdt, base + i));
  m = dev::block_reduce_max(m, scratch);
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i <= limit && i < C; i += blockDim.x) s += expf(scale * dev::ld(x, xdt, base + i) - m);
  s = dev::block_reduce_sum(s, scratch);
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
    const float v = i <= limit ? expf(scale * dev::ld(x, xdt, base + i) - m) * inv : 0.0f;
    dev::st(y, ydt, base + i, v);
  }
}

}  // namespace

Status hip_softmax(HipContext& ctx, const Tensor& x_in, Tensor& y, float scale, bool causal) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x_in, "softmax", "x"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "softmax", "y"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(y, "softmax", "y"));
  if (x_in.ndim < 1 || !x_in.same_shape(y)) return shape_mismatch("softmax", "x and y shapes differ", x_in, y);
  if (causal && x_in.ndim < 2)
    return Status::InvalidArgument("softmax: causal needs at least 2 dims, x is " + x_in.describe());
  const int64_t C = x_in.dim(-1);
  const int64_t R = x_in.ndim >= 2 ? x_in.dim(-2) : 1;
  const int64_t rows = C ? x_in.numel() / C : 0;
  if (rows == 0) return Status::Ok();
  if (rows > 0x7fffffffLL) return Status::InvalidArgument("softmax: too many rows in x " + x_in.describe());
  Buffer hold;
  HIPQ_ASSIGN_OR_RETURN(Tensor x, contiguous_or_copy(ctx, x_in, hold));
  const int block = C >= 1024 ? 512 : (C >= 256 ? 256 : 128);
  softmax_kernel<<<static_cast<unsigned>(rows), block, 0, ctx.stream>>>(
      x.data, static_cast<int>(x.dtype), y.data, static_cast<int>(y.dtype), C, R, scale, causal);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
