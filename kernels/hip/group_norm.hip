// group_norm: x [N, C, *] normalised over each (n, group) of C/G channels ×
// spatial, then y = xhat * gamma[c] + beta[c], optionally SiLU (fused).
// The reduction uses the whole device, not one block per group: per (group,
// chunk) a two-pass mean and M2, merged in fp64 (Chan et al.) into the
// group's mean and 1/std, then an elementwise pass. The variance is the biased
// one, as PyTorch's GroupNorm.
//
// Two forms. The vector form (16-byte loads and stores: 8 f16/bf16 or 4 fp32
// elements; x and y of one dtype, 16-byte aligned, spatial size a multiple of
// the vector) takes two launches: each stats block holds its chunk in
// registers (one read of x), and each apply block merges its group's chunk
// partials itself, so no third launch sits between them. The general form
// (any dtypes, any sizes) takes three: stats, a merge kernel, apply.
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

// One warp merges group ng's `splits` chunk partials (count, mean, M2) in
// fp64, by the pairwise form of Chan et al.: n = sum n_s, mean = sum n_s
// mean_s / n, M2 = sum M2_s + n_s (mean_s - mean)^2; its lane 0 writes the
// group's mean and 1/std to stat[0], stat[1]. Both forms merge through it.
__device__ void merge_group_partials(const double* __restrict__ partial, int64_t ng, int splits, float eps,
                                     float* stat) {
  const int lane = threadIdx.x % warpSize;
  const double* p = partial + ng * splits * 3;
  double n = 0, weighted = 0;
  for (int s = lane; s < splits; s += warpSize) {
    n += p[3 * s];
    weighted += p[3 * s] * p[3 * s + 1];
  }
  n = dev::warp_reduce_sum(n);
  weighted = dev::warp_reduce_sum(weighted);
  const double mean = n > 0 ? weighted / n : 0.0;
  double m2 = 0;
  for (int s = lane; s < splits; s += warpSize) {
    const double d = p[3 * s + 1] - mean;
    m2 += p[3 * s + 2] + p[3 * s] * d * d;
  }
  m2 = dev::warp_reduce_sum(m2);
  if (lane == 0) {
    const double var = n > 0 ? m2 / n : 0.0;
    stat[0] = static_cast<float>(mean);
    stat[1] = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  }
}

// The general form's merge: one warp a group.
__global__ void group_finalize_kernel(const double* __restrict__ partial, int groups_total, int splits, float eps,
                                      float* __restrict__ stats) {
  const int64_t ng = static_cast<int64_t>(blockIdx.x) * (blockDim.x / warpSize) + threadIdx.x / warpSize;
  if (ng >= groups_total) return;
  merge_group_partials(partial, ng, splits, eps, stats + 2 * ng);
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

// ---- the vector form ----

// kVec consecutive elements of x (dt: its dtype) as fp32, from one 16-byte
// load; the caller checks alignment.
template <int kVec>
__device__ __forceinline__ void ldv(const void* p, int dt, int64_t i, float* v) {
  if constexpr (kVec == 8) {
    dev::ld8_16bit(p, dt, i, v);
  } else {
    const float4 u = *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
    v[0] = u.x;
    v[1] = u.y;
    v[2] = u.z;
    v[3] = u.w;
  }
}

template <int kVec>
__device__ __forceinline__ void stv(void* p, int dt, int64_t i, const float* v) {
  if constexpr (kVec == 8) {
    dev::st8_16bit(p, dt, i, v);
  } else {
    *reinterpret_cast<float4*>(static_cast<float*>(p) + i) = make_float4(v[0], v[1], v[2], v[3]);
  }
}

constexpr int kVecBlock = 256;  // threads a block, both kernels
constexpr int kVecRegs = 4;     // vectors a thread holds in the stats kernel

// Block (group ng, chunk s): the chunk is kVecBlock * kVecRegs vectors, held
// in registers between the mean and the M2 pass.
template <int kVec>
__global__ void __launch_bounds__(kVecBlock) group_stats_vec_kernel(const void* __restrict__ x, int xdt,
                                                                     int64_t group_len, double* __restrict__ partial) {
  __shared__ float scratch[32];
  constexpr int kChunk = kVecBlock * kVecRegs * kVec;
  const int ng = blockIdx.x, s = blockIdx.y;
  const int64_t base = static_cast<int64_t>(ng) * group_len;
  const int64_t lo = static_cast<int64_t>(s) * kChunk;
  const int64_t hi = lo + kChunk < group_len ? lo + kChunk : group_len;
  float v[kVecRegs][kVec];
  float sum = 0.0f;
#pragma unroll
  for (int r = 0; r < kVecRegs; ++r) {
    const int64_t i = lo + static_cast<int64_t>(r * kVecBlock + threadIdx.x) * kVec;
    if (i < hi) {
      ldv<kVec>(x, xdt, base + i, v[r]);
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum += v[r][e];
    }
  }
  const int64_t cnt = hi - lo;
  const float mean = dev::block_reduce_sum(sum, scratch) / static_cast<float>(cnt);
  float m2 = 0.0f;
#pragma unroll
  for (int r = 0; r < kVecRegs; ++r) {
    const int64_t i = lo + static_cast<int64_t>(r * kVecBlock + threadIdx.x) * kVec;
    if (i < hi) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float d = v[r][e] - mean;
        m2 += d * d;
      }
    }
  }
  m2 = dev::block_reduce_sum(m2, scratch);
  if (threadIdx.x == 0) {
    double* p = partial + (static_cast<int64_t>(ng) * gridDim.y + s) * 3;
    p[0] = static_cast<double>(cnt);
    p[1] = mean;
    p[2] = m2;
  }
}

// Block (group ng, piece s of `piece` elements): the first warp merges the
// group's chunk partials (merge_group_partials), then every thread normalises
// kVec elements at a time.
template <int kVec>
__global__ void __launch_bounds__(kVecBlock) group_apply_vec_kernel(
    const void* __restrict__ x, const void* __restrict__ gamma, int gdt, int64_t gs, const void* __restrict__ beta,
    int bdt, int64_t bs, const double* __restrict__ partial, int splits, float eps, void* __restrict__ y, int dt,
    int64_t group_len, int64_t piece, int groups, int cpg, int HW, bool fuse_silu) {
  __shared__ float stat[2];
  const int ng = blockIdx.x;
  if (threadIdx.x < warpSize) merge_group_partials(partial, ng, splits, eps, stat);
  __syncthreads();
  const float mean = stat[0], rstd = stat[1];
  const int64_t base = static_cast<int64_t>(ng) * group_len;
  const int c0 = (ng % groups) * cpg;
  const int64_t lo = static_cast<int64_t>(blockIdx.y) * piece;
  const int64_t hi = lo + piece < group_len ? lo + piece : group_len;
  for (int64_t i = lo + static_cast<int64_t>(threadIdx.x) * kVec; i < hi; i += static_cast<int64_t>(kVecBlock) * kVec) {
    const int c = c0 + static_cast<int>(static_cast<int32_t>(i) / HW);  // group_len < 2^31 (host check)
    const float g = dev::ld(gamma, gdt, c * gs), b = dev::ld(beta, bdt, c * bs);
    float v[kVec];
    ldv<kVec>(x, dt, base + i, v);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      v[e] = (v[e] - mean) * rstd * g + b;
      if (fuse_silu) v[e] = dev::silu(v[e]);
    }
    stv<kVec>(y, dt, base + i, v);
  }
}

// The vector form when x and y allow it; false (nothing launched) otherwise.
template <int kVec>
Result<bool> group_norm_vec(HipContext& ctx, const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                            const GroupNormOptions& o, int64_t groups_total, int64_t group_len, int64_t HW,
                            int64_t cpg) {
  constexpr int64_t kChunk = int64_t{kVecBlock} * kVecRegs * kVec;
  const int64_t splits = (group_len + kChunk - 1) / kChunk;
  if (HW % kVec != 0 || !aligned16(x.data) || !aligned16(y.data) || group_len >= (int64_t{1} << 31) ||
      splits > 65535 || groups_total > 65535)
    return false;
  // Apply pieces: about four vectors a thread, at most 65535 a group.
  int64_t piece = int64_t{kVecBlock} * 4 * kVec;
  piece = std::max(piece, (group_len + 65534) / 65535);
  piece = (piece + kVec - 1) / kVec * kVec;
  const int64_t pieces = (group_len + piece - 1) / piece;
  HIPQ_ASSIGN_OR_RETURN(Buffer scratch,
                        ctx.backend->allocate(static_cast<size_t>(groups_total * splits * 3) * sizeof(double)));
  double* partial = static_cast<double*>(scratch.data());
  group_stats_vec_kernel<kVec><<<dim3(static_cast<unsigned>(groups_total), static_cast<unsigned>(splits)),
                                 kVecBlock, 0, ctx.stream>>>(x.data, static_cast<int>(x.dtype), group_len, partial);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  group_apply_vec_kernel<kVec><<<dim3(static_cast<unsigned>(groups_total), static_cast<unsigned>(pieces)),
                                 kVecBlock, 0, ctx.stream>>>(
      x.data, gamma.data, static_cast<int>(gamma.dtype), gamma.stride[0], beta.data, static_cast<int>(beta.dtype),
      beta.stride[0], partial, static_cast<int>(splits), o.eps, y.data, static_cast<int>(y.dtype), group_len, piece,
      o.groups, static_cast<int>(cpg), static_cast<int>(HW), o.fuse_silu);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return true;
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
  if (x.dtype == y.dtype) {
    Result<bool> done = x.dtype == DType::kF32
                            ? group_norm_vec<4>(ctx, x, gamma, beta, y, o, groups_total, group_len, HW, cpg)
                            : group_norm_vec<8>(ctx, x, gamma, beta, y, o, groups_total, group_len, HW, cpg);
    if (!done.ok()) return done.status();
    if (*done) return Status::Ok();
  }
  // Chunks a group is reduced in: from the group's length alone, never from
  // the batch (N) or the device, so a sample's statistics come out of the
  // same partial sums whatever batch it runs in (docs/batching.md).
  const int64_t splits = std::clamp<int64_t>(group_len / 8192, 1, 16);
  const int64_t chunk = (group_len + splits - 1) / splits;

  HIPQ_ASSIGN_OR_RETURN(Buffer scratch,
                        ctx.backend->allocate(static_cast<size_t>(groups_total * splits * 3) * sizeof(double) +
                                              static_cast<size_t>(groups_total * 2) * sizeof(float)));
  double* partial = static_cast<double*>(scratch.data());
  float* stats = reinterpret_cast<float*>(partial + groups_total * splits * 3);

  group_stats_kernel<<<dim3(static_cast<unsigned>(groups_total), static_cast<unsigned>(splits)), 256, 0,
                       ctx.stream>>>(x.data, static_cast<int>(x.dtype), group_len, chunk, partial);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  const int64_t groups_a_block = 128 / ctx.warp_size;
  group_finalize_kernel<<<static_cast<unsigned>((groups_total + groups_a_block - 1) / groups_a_block), 128, 0,
                          ctx.stream>>>(
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
