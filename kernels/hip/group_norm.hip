// group_norm: x [N, C, *] normalised over each (n, group) of C/G channels ×
// spatial, then y = xhat * gamma[c] + beta[c], optionally SiLU (fused).
// Three launches so the reduction uses the whole device, not one block per
// group: (1) per (group, chunk) two-pass mean and M2, (2) merge the chunks in
// fp64 (Chan et al.) into mean and 1/std per group, (3) normalise
// elementwise. The variance is the biased one, as PyTorch's GroupNorm.
#include <algorithm>
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__global__ void group_stats_kernel(const void* __restrict__ x, int xdt, int64_t group_len, int64_t chunk,
                                   double* __restrict__ partial) {
  __shared__ float scratch[32];
  const int ng = blockIdx.x;
  const int s = blockIdx.y;
  const int64_t base = static_cast<int64_t>(ng) * group_len;
  const int64_t lo = s * chunk;
  const int64_t hi = lo + chunk < group_len ? lo + chunk : group_len;
  float sum = 0.0f;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) sum += dev::ld(x, xdt, base + i);
  const int64_t cnt = hi > lo ? hi - lo : 0;
  const float mean = cnt ? dev::block_reduce_sum(sum, scratch) / static_cast<float>(cnt) : 0.0f;
  float m2 = 0.0f;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const float d = dev::ld(x, xdt, base + i) - mean;
    m2 += d * d;
  }
  m2 = cnt ? dev::block_reduce_sum(m2, scratch) : 0.0f;
  if (threadIdx.x == 0) {
    double* p = partial + (static_cast<int64_t>(ng) * gridDim.y + s) * 3;
    p[0] = static_cast<double>(cnt);
    p[1] = mean;
    p[2] = m2;
  }
}

__global__ void group_finalize_kernel(const double* __restrict__ partial, int groups_total, int splits, float eps,
                                      float* __restrict__ stats) {
  const int ng = blockIdx.x * blockDim.x + threadIdx.x;
  if (ng >= groups_total) return;
  double n = 0, mean = 0, m2 = 0;
  for (int s = 0; s < splits; ++s) {
    const double* p = partial + (static_cast<int64_t>(ng) * splits + s) * 3;
    if (p[0] == 0) continue;
    const double nb = p[0], nab = n + nb, delta = p[1] - mean;
    mean += delta * nb / nab;
    m2 += p[2] + delta * delta * n * nb / nab;
    n = nab;
  }
  const double var = n > 0 ? m2 / n : 0.0;
  stats[2 * ng] = static_cast<float>(mean);
  stats[2 * ng + 1] = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
}

__global__ void group_apply_kernel(const void* __restrict__ x, int xdt, const void* __restrict__ gamma, int gdt,
                                   int64_t gs, const void* __restrict__ beta, int bdt, int64_t bs,
                                   const float* __restrict__ stats, void* __restrict__ y, int ydt, int64_t n,
                                   int64_t C, int64_t HW, int64_t cpg, bool fuse_silu) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t nc = i / HW;
    const int64_t c = nc % C;
    const int64_t ng = (nc / C) * (C / cpg) + c / cpg;
    float v = (dev::ld(x, xdt, i) - stats[2 * ng]) * stats[2 * ng + 1];
    v = v * dev::ld(gamma, gdt, c * gs) + dev::ld(beta, bdt, c * bs);
    if (fuse_silu) v = dev::silu(v);
    dev::st(y, ydt, i, v);
  }
}

}  // namespace

Status hip_group_norm(HipContext& ctx, const Tensor& x_in, const Tensor& gamma, const Tensor& beta, Tensor& y,
                      const GroupNormOptions& o) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x_in, "group_norm", "x"));
  HIPQ_RETURN_IF_ERROR(require_device_float(gamma, "group_norm", "gamma"));
  HIPQ_RETURN_IF_ERROR(require_device_float(beta, "group_norm", "beta"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "group_norm", "y"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(y, "group_norm", "y"));
  if (x_in.ndim < 2) return Status::InvalidArgument("group_norm: x " + x_in.describe() + " must be [N, C, ...]");
  if (!x_in.same_shape(y)) return shape_mismatch("group_norm", "x and y shapes differ", x_in, y);
  const int64_t N = x_in.shape[0], C = x_in.shape[1];
  if (o.groups < 1 || C % o.groups != 0)
    return Status::InvalidArgument("group_norm: channels " + std::to_string(C) + " of x " + x_in.describe() +
                                   " are not divisible by groups " + std::to_string(o.groups));
  if (gamma.numel() != C || beta.numel() != C || gamma.ndim != 1 || beta.ndim != 1)
    return shape_mismatch("group_norm", "gamma and beta must be [C] (gamma, beta)", gamma, beta);
  const int64_t n = x_in.numel();
  if (n == 0) return Status::Ok();
  const int64_t HW = n / (N * C);
  const int64_t cpg = C / o.groups;
  const int64_t groups_total = N * o.groups;
  const int64_t group_len = cpg * HW;
  if (groups_total > 65535 * 64) return Status::InvalidArgument("group_norm: too many groups in x " + x_in.describe());

  Buffer x_hold;
  HIPQ_ASSIGN_OR_RETURN(Tensor x, contiguous_or_copy(ctx, x_in, x_hold));
  const int64_t want_blocks = 4LL * ctx.multiprocessors;
  int64_t splits = std::max<int64_t>(1, (want_blocks + groups_total - 1) / groups_total);
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, group_len / 2048));
  splits = std::min<int64_t>(splits, 65535);
  const int64_t chunk = (group_len + splits - 1) / splits;

  HIPQ_ASSIGN_OR_RETURN(Buffer scratch,
                        ctx.backend->allocate(static_cast<size_t>(groups_total * splits * 3) * sizeof(double) +
                                              static_cast<size_t>(groups_total * 2) * sizeof(float)));
  double* partial = static_cast<double*>(scratch.data());
  float* stats = reinterpret_cast<float*>(partial + groups_total * splits * 3);

  group_stats_kernel<<<dim3(static_cast<unsigned>(groups_total), static_cast<unsigned>(splits)), 256, 0,
                       ctx.stream>>>(x.data, static_cast<int>(x.dtype), group_len, chunk, partial);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  group_finalize_kernel<<<static_cast<unsigned>((groups_total + 127) / 128), 128, 0, ctx.stream>>>(
      partial, static_cast<int>(groups_total), static_cast<int>(splits), o.eps, stats);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  const int block = ctx.tuning->elementwise_block;
  group_apply_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(
      x.data, static_cast<int>(x.dtype), gamma.data, static_cast<int>(gamma.dtype), gamma.stride[0], beta.data,
      static_cast<int>(beta.dtype), beta.stride[0], stats, y.data, static_cast<int>(y.dtype), n, C, HW, cpg,
      o.fuse_silu);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
