// layer_norm over the last dim: one block per row, two passes (mean, then
// the centred sum of squares) for accuracy, then y = xhat * gamma + beta.
// 16-bit rows of a multiple of 8 take a vector kernel that reads x once
// (and gamma / beta as 16-byte pieces when they are x's type).
// gamma/beta may be null (no affine). x is made contiguous first if needed.
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__global__ void layer_norm_kernel(const void* __restrict__ x, int xdt, const void* __restrict__ gamma, int gdt,
                                  int64_t gs, const void* __restrict__ beta, int bdt, int64_t bs,
                                  void* __restrict__ y, int ydt, int64_t D, float eps) {
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * D;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) sum += dev::ld(x, xdt, base + i);
  const float mean = dev::block_reduce_sum(sum, scratch) / static_cast<float>(D);
  float m2 = 0.0f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float d = dev::ld(x, xdt, base + i) - mean;
    m2 += d * d;
  }
  const float rstd = rsqrtf(dev::block_reduce_sum(m2, scratch) / static_cast<float>(D) + eps);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    float v = (dev::ld(x, xdt, base + i) - mean) * rstd;
    if (gamma) v *= dev::ld(gamma, gdt, i * gs);
    if (beta) v += dev::ld(beta, bdt, i * bs);
    dev::st(y, ydt, base + i, v);
  }
}

// x and y in one 16-bit type, D a multiple of 8 (every SD/SDXL width): a
// block of D / 8 threads (rounded up to warps) per row, each holding 8
// elements from one 16-byte load, so x is read once; the same two-pass
// statistics over the registers.
// kAffine16: gamma and beta both given, contiguous, 16-byte aligned and of
// x's type, read as one 16-byte piece each instead of 16 scalar loads.
template <bool kAffine16>
__global__ void layer_norm16_vec8_kernel(const uint4* __restrict__ x, const void* __restrict__ gamma, int gdt,
                                         int64_t gs, const void* __restrict__ beta, int bdt, int64_t bs,
                                         void* __restrict__ y, int dt, int D8, float eps) {
  __shared__ float scratch[32];
  const int t = threadIdx.x;
  const bool active = t < D8;
  const int64_t v0 = static_cast<int64_t>(blockIdx.x) * D8 + t;  // this thread's 16-byte piece
  float v[8] = {};
  if (active) {
    const uint4 raw = x[v0];
    const uint16_t* h = reinterpret_cast<const uint16_t*>(&raw);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = dev::from_16bit(dt, h[e]);
  }
  const float inv_d = 1.0f / static_cast<float>(8 * D8);
  float sum = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) sum += v[e];
  const float mean = dev::block_reduce_sum(sum, scratch) * inv_d;
  float m2 = 0.0f;
  if (active) {
#pragma unroll
    for (int e = 0; e < 8; ++e) m2 += (v[e] - mean) * (v[e] - mean);
  }
  const float rstd = rsqrtf(dev::block_reduce_sum(m2, scratch) * inv_d + eps);
  if (!active) return;
  float r[8];
  if constexpr (kAffine16) {
    float g[8], b[8];
    dev::ld8_16bit(gamma, dt, static_cast<int64_t>(t) * 8, g);
    dev::ld8_16bit(beta, dt, static_cast<int64_t>(t) * 8, b);
#pragma unroll
    for (int e = 0; e < 8; ++e) r[e] = (v[e] - mean) * rstd * g[e] + b[e];
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int64_t i = static_cast<int64_t>(t) * 8 + e;
      r[e] = (v[e] - mean) * rstd;
      if (gamma) r[e] *= dev::ld(gamma, gdt, i * gs);
      if (beta) r[e] += dev::ld(beta, bdt, i * bs);
    }
  }
  dev::st8_16bit(y, dt, v0 * 8, r);
}

}  // namespace

Status hip_layer_norm(HipContext& ctx, const Tensor& x_in, const Tensor* gamma, const Tensor* beta, Tensor& y,
                      float eps) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x_in, "layer_norm", "x"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "layer_norm", "y"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(y, "layer_norm", "y"));
  if (x_in.ndim < 1 || !x_in.same_shape(y)) return shape_mismatch("layer_norm", "x and y shapes differ", x_in, y);
  const int64_t D = x_in.dim(-1);
  for (const Tensor* p : {gamma, beta}) {
    if (!p) continue;
    HIPQ_RETURN_IF_ERROR(require_device_float(*p, "layer_norm", "gamma/beta"));
    if (p->ndim != 1 || p->shape[0] != D) return shape_mismatch("layer_norm", "gamma/beta must be [D] (param, x)", *p, x_in);
  }
  const int64_t rows = D ? x_in.numel() / D : 0;
  if (rows == 0) return Status::Ok();
  if (rows > 0x7fffffffLL) return Status::InvalidArgument("layer_norm: too many rows in x " + x_in.describe());
  Buffer hold;
  HIPQ_ASSIGN_OR_RETURN(Tensor x, contiguous_or_copy(ctx, x_in, hold));
  const bool one_16bit_type = x.dtype == y.dtype && (x.dtype == DType::kF16 || x.dtype == DType::kBF16);
  if (one_16bit_type && D % 8 == 0 && D / 8 <= 1024 && aligned16(x.data) && aligned16(y.data)) {
    const int D8 = static_cast<int>(D / 8);
    const int warp = ctx.warp_size;
    const int threads = (D8 + warp - 1) / warp * warp;
    const auto affine16 = [&x](const Tensor* p) {
      return p && p->dtype == x.dtype && p->stride[0] == 1 && aligned16(p->data);
    };
    const auto kernel = affine16(gamma) && affine16(beta) ? layer_norm16_vec8_kernel<true>
                                                           : layer_norm16_vec8_kernel<false>;
    kernel<<<static_cast<unsigned>(rows), threads, 0, ctx.stream>>>(
        static_cast<const uint4*>(x.data), gamma ? gamma->data : nullptr, gamma ? static_cast<int>(gamma->dtype) : 0,
        gamma ? gamma->stride[0] : 0, beta ? beta->data : nullptr, beta ? static_cast<int>(beta->dtype) : 0,
        beta ? beta->stride[0] : 0, y.data, static_cast<int>(y.dtype), D8, eps);
    HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
    return Status::Ok();
  }
  const int block = D >= 1024 ? 512 : (D >= 256 ? 256 : 128);
  layer_norm_kernel<<<static_cast<unsigned>(rows), block, 0, ctx.stream>>>(
      x.data, static_cast<int>(x.dtype), gamma ? gamma->data : nullptr, gamma ? static_cast<int>(gamma->dtype) : 0,
      gamma ? gamma->stride[0] : 0, beta ? beta->data : nullptr, beta ? static_cast<int>(beta->dtype) : 0,
      beta ? beta->stride[0] : 0, y.data, static_cast<int>(y.dtype), D, eps);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
