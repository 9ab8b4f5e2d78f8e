// layer_norm_fp8: a LayerNorm feeding an fp8 Linear writes the Linear's e4m3
// codes and row scale at once, its 16-bit output never stored. The result is
// defined as quantize_fp8_rows(layer_norm(x) rounded to x's dtype), and this
// kernel computes exactly that: layer_norm16_vec8_kernel's statistics and
// affine (layer_norm.hip), each value rounded to x's 16-bit type and read
// back, the row's amax (and NaN flag) over those values, then
// quantize_fp8_rows16_kernel's multiplier and codes (quantize_fp8_rows.hip).
// One block a row, 8 elements a thread from one 16-byte load; 8 codes a
// thread in one 8-byte store. Rows the kernel does not take (f32, D not a
// multiple of 8 or over 8192, unaligned) run layer_norm into pool scratch,
// then quantize_fp8_rows.
#include <string>

#include "kernels/fp8_e4m3.h"
#include "kernels/hip/e4m3x2.h"
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

template <bool kAffine16>
__global__ void layer_norm_fp8_vec8_kernel(const uint4* __restrict__ x, const void* __restrict__ gamma, int gdt,
                                           int64_t gs, const void* __restrict__ beta, int bdt, int64_t bs, int dt,
                                           int D8, float eps, uint8_t* __restrict__ codes,
                                           float* __restrict__ scales) {
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
  float r[8] = {};
  float amax = 0.0f, nan = 0.0f;
  if (active) {
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
    // The values layer_norm would have stored, as quantize_fp8_rows reads them.
#pragma unroll
    for (int e = 0; e < 8; e += 2) {
      const uint32_t w = dev::pack2_16bit(dt, r[e], r[e + 1]);
      r[e] = dev::from_16bit(dt, static_cast<uint16_t>(w));
      r[e + 1] = dev::from_16bit(dt, static_cast<uint16_t>(w >> 16));
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      nan = isnan(r[e]) ? 1.0f : nan;
      amax = fmaxf(amax, fabsf(r[e]));
    }
  }
  nan = dev::block_reduce_max(nan, scratch);
  amax = dev::block_reduce_max(amax, scratch);
  const float s = fp8::row_scale(nan > 0.0f ? dev::f32_from_bits(0x7fc00000u) : amax);
  if (t == 0) scales[blockIdx.x] = fp8::dequant_scale(s);
  if (!active) return;
  *reinterpret_cast<uint2*>(codes + v0 * 8) = dev::e4m3x8(r, s, nan == 0.0f);
}

}  // namespace

Status hip_layer_norm_fp8(HipContext& ctx, const Tensor& x, const Tensor* gamma, const Tensor* beta, float eps,
                          Tensor& codes, Tensor& scales) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x, "layer_norm_fp8", "x"));
  for (const Tensor* t : {&codes, &scales})
    if (t->location != Location::kDevice)
      return Status::InvalidArgument("layer_norm_fp8: " + t->describe() +
                                     " is not device memory (allocate it from the hip backend)");
  HIPQ_RETURN_IF_ERROR(check_layer_norm_fp8(x, codes, scales));
  const int64_t rows = x.shape[0], D = x.shape[1];
  for (const Tensor* p : {gamma, beta}) {
    if (!p) continue;
    HIPQ_RETURN_IF_ERROR(require_device_float(*p, "layer_norm_fp8", "gamma/beta"));
    if (p->ndim != 1 || p->shape[0] != D)
      return shape_mismatch("layer_norm_fp8", "gamma/beta must be [D] (param, x)", *p, x);
  }
  if (rows == 0) return Status::Ok();
  if (rows > 0x7fffffffLL) return Status::InvalidArgument("layer_norm_fp8: too many rows in x " + x.describe());
  const bool vec16 = (x.dtype == DType::kF16 || x.dtype == DType::kBF16) && D % 8 == 0 && D / 8 <= 1024 &&
                     aligned16(x.data) && reinterpret_cast<uintptr_t>(codes.data) % 8 == 0;
  if (!vec16) {
    HIPQ_ASSIGN_OR_RETURN(Buffer hold, ctx.backend->allocate(x.nbytes()));
    Tensor y = Tensor::contiguous(hold.data(), x.dtype, x.shape_vec(), Location::kDevice);
    HIPQ_RETURN_IF_ERROR(hip_layer_norm(ctx, x, gamma, beta, y, eps));
    return hip_quantize_fp8_rows(ctx, y, codes, scales);
  }
  const int D8 = static_cast<int>(D / 8);
  const int warp = ctx.warp_size;
  const int threads = (D8 + warp - 1) / warp * warp;
  const auto affine16 = [&x](const Tensor* p) {
    return p && p->dtype == x.dtype && p->stride[0] == 1 && aligned16(p->data);
  };
  const auto kernel = affine16(gamma) && affine16(beta) ? layer_norm_fp8_vec8_kernel<true>
                                                         : layer_norm_fp8_vec8_kernel<false>;
  kernel<<<static_cast<unsigned>(rows), threads, 0, ctx.stream>>>(
      static_cast<const uint4*>(x.data), gamma ? gamma->data : nullptr, gamma ? static_cast<int>(gamma->dtype) : 0,
      gamma ? gamma->stride[0] : 0, beta ? beta->data : nullptr, beta ? static_cast<int>(beta->dtype) : 0,
      beta ? beta->stride[0] : 0, static_cast<int>(x.dtype), D8, eps, static_cast<uint8_t*>(codes.data),
      static_cast<float*>(scales.data));
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
