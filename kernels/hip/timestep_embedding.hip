// timestep_embedding: sinusoidal embedding of timesteps t [N] -> y [N, dim],
// as diffusers' get_timestep_embedding (scale 1): half = dim/2,
// freq_j = exp(-ln(max_period) * j / (half - shift)), [sin, cos] or [cos, sin]
// when flip_sin_to_cos, zero-padded when dim is odd.
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__global__ void timestep_embedding_kernel(const void* __restrict__ t, int tdt, int64_t ts, void* __restrict__ y,
                                          int ydt, int64_t N, int dim, bool flip, float shift, float log_max_period) {
  const int half = dim / 2;
  const int64_t n = N * dim;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / dim;
    const int col = static_cast<int>(i - row * dim);
    float v = 0.0f;
    if (col < 2 * half) {
      const int j = col < half ? col : col - half;
      const bool first = col < half;
      const float freq = expf(-log_max_period * static_cast<float>(j) / (static_cast<float>(half) - shift));
      const float arg = dev::ld(t, tdt, row * ts) * freq;
      const bool use_sin = flip ? !first : first;
      v = use_sin ? sinf(arg) : cosf(arg);
    }
    dev::st(y, ydt, i, v);
  }
}

}  // namespace

Status hip_timestep_embedding(HipContext& ctx, const Tensor& t, Tensor& y, const TimestepEmbeddingOptions& o) {
  HIPQ_RETURN_IF_ERROR(require_device_float(t, "timestep_embedding", "t"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "timestep_embedding", "y"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(y, "timestep_embedding", "y"));
  if (o.dim < 1) return Status::InvalidArgument("timestep_embedding: dim must be >= 1 (got " + std::to_string(o.dim) + ")");
  if (t.ndim != 1 || y.ndim != 2 || y.shape[0] != t.shape[0] || y.shape[1] != o.dim)
    return Status::InvalidArgument("timestep_embedding: t must be [N] and y [N, " + std::to_string(o.dim) + "]: t " +
                                   t.describe() + ", y " + y.describe());
  const int64_t n = y.numel();
  if (n == 0) return Status::Ok();
  const int block = ctx.tuning->elementwise_block;
  timestep_embedding_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(
      t.data, static_cast<int>(t.dtype), t.stride[0], y.data, static_cast<int>(y.dtype), t.shape[0], o.dim,
      o.flip_sin_to_cos, o.downscale_freq_shift, logf(o.max_period));
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
