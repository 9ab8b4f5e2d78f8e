// conv2d_fp8: a convolution with both operands in e4m3 (Backend::conv2d_fp8,
// docs/kernels.md "fp8").
//  1. image_amax_kernel: each image's largest magnitude, as the bits of a
//     float taken by atomicMax (a maximum does not depend on the order it is
//     taken in; a NaN anywhere makes the image's maximum NaN, as in
//     quantize_fp8_rows).
//  2. quantize_nhwc_kernel: x [N, C, H, W] (or its nearest 2x upsample) to
//     NHWC e4m3 codes with the image's multiplier, through kernels/fp8_e4m3.h
//     (the cpu backend's functions: the same bytes), and the image's
//     dequantization factor.
//  3. On Hopper, the e4m3 TMA kernel of matmul_fp8 (gemm/gemm_tma_fp8.h) with
//     TmaConvLoad's im2col boxes over the code image (images as the batch,
//     128 channels of one tap a k-tile, the weight's padded taps matching the
//     copy engine's zeros past C), the sums times the output channel's and
//     the image's scales in registers, then conv2d's epilogue. Elsewhere (a
//     shape the tensor maps cannot describe) a plain kernel: one thread an
//     output, codes decoded by bit operations.
#include <algorithm>
#include <string>

#include "kernels/fp8_e4m3.h"
#include "kernels/hip/conv_epilogue.h"
#include "kernels/hip/e4m3x2.h"
#include "kernels/hip/gemm/gemm_tma_fp8.h"
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

constexpr int kThreads = 256;
constexpr uint32_t kNanBits = 0x7fc00000u;  // above the bits of every other non-negative float

// amax_bits[n] = max(amax_bits[n], bits of max |x|) over the values of image
// blockIdx.y this block reads (grid-stride over the image).
__global__ void __launch_bounds__(kThreads)
    image_amax_kernel(const uint16_t* __restrict__ x, int dt, int64_t per_image, bool vec8,
                      uint32_t* __restrict__ amax_bits) {
  __shared__ float red[32];
  const uint16_t* img = x + static_cast<int64_t>(blockIdx.y) * per_image;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  float amax = 0.0f, nan = 0.0f;
  if (vec8) {
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < per_image / 8;
         c += step) {
      float v[8];
      dev::ld8_16bit(img, dt, c * 8, v);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        nan = isnan(v[e]) ? 1.0f : nan;
        amax = fmaxf(amax, fabsf(v[e]));
      }
    }
  } else {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < per_image; i += step) {
      const float v = dev::from_16bit(dt, img[i]);
      nan = isnan(v) ? 1.0f : nan;
      amax = fmaxf(amax, fabsf(v));
    }
  }
  nan = dev::block_reduce_max(nan, red);
  amax = dev::block_reduce_max(amax, red);
  if (threadIdx.x == 0) atomicMax(amax_bits + blockIdx.y, nan > 0.0f ? kNanBits : __float_as_uint(amax));
}

// codes [N, Hs, Ws, C] (Hs = H << up, Ws = W << up) of x [N, C, H, W] read
// at (row >> up, column >> up), through 64-channel x 64-pixel tiles in
// shared memory; codes of 8 channels of a pixel stored together. Block
// (0, 0, n) also writes the image's dequantization factor.
__global__ void __launch_bounds__(kThreads)
    quantize_nhwc_kernel(const uint16_t* __restrict__ x, int dt, int C, int H, int W, int up,
                         const uint32_t* __restrict__ amax_bits, uint8_t* __restrict__ codes,
                         float* __restrict__ scales) {
  __shared__ float t[64][65];  // [channel][pixel]
  const int n = blockIdx.z;
  const int Ws = W << up;
  const int64_t HWs = static_cast<int64_t>(H << up) * Ws;
  const uint32_t bits = amax_bits[n];
  const float s = fp8::row_scale(__uint_as_float(bits));
  const bool finite = bits < kNanBits;
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) scales[n] = fp8::dequant_scale(s);
  const int c0 = blockIdx.y * 64;
  const int64_t p0 = static_cast<int64_t>(blockIdx.x) * 64;
  const uint16_t* img = x + static_cast<int64_t>(n) * C * H * W;
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
    const int c = i / 64, q = i % 64;  // consecutive threads: consecutive pixels of one channel
    const int64_t p = p0 + q;
    float v = 0.0f;
    if (c0 + c < C && p < HWs) {
      const int64_t row = p / Ws, col = p - row * Ws;
      v = dev::from_16bit(dt, img[static_cast<int64_t>(c0 + c) * H * W + (row >> up) * W + (col >> up)]);
    }
    t[c][q] = v;
  }
  __syncthreads();
  uint8_t* out = codes + static_cast<int64_t>(n) * HWs * C;
  for (int i = threadIdx.x; i < 64 * 8; i += blockDim.x) {
    const int q = i / 8, j = i % 8;  // pixel q, channels c0 + 8j ..
    const int64_t p = p0 + q;
    const int c = c0 + 8 * j;
    if (p >= HWs || c >= C) continue;
    uint8_t* dst = out + p * C + c;
    if (c + 8 <= C && reinterpret_cast<uintptr_t>(dst) % 8 == 0) {
      float v[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = t[8 * j + e][q];
      *reinterpret_cast<uint2*>(dst) = dev::e4m3x8(v, s, finite);
    } else {
      for (int e = 0; e < 8 && c + e < C; ++e) dst[e] = fp8::quantize(t[8 * j + e][q], s);
    }
  }
}

// y[n, o, p] for one output a thread (blockIdx.z the image, blockIdx.y the
// output channel): the fp32 sum over taps and channels of the decoded codes
// of x (NHWC [N, Hs, Ws, C]) and w ([O, KH, KW, Cp]), times the channel's and
// the image's scales, then conv2d's epilogue.
__global__ void __launch_bounds__(kThreads)
    conv2d_fp8_simt_kernel(const uint8_t* __restrict__ xq, const uint8_t* __restrict__ wq,
                           const float* __restrict__ ws, const float* __restrict__ xs, int C, int Cp, int Hs,
                           int Ws, int KH, int KW, int pad, int Wo, int64_t P, ConvEpilogue ep) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= P) return;
  const int o = blockIdx.y, n = blockIdx.z;
  const int ho = static_cast<int>(p / Wo), wo = static_cast<int>(p % Wo);
  const uint8_t* img = xq + static_cast<int64_t>(n) * Hs * Ws * C;
  const uint8_t* wo_taps = wq + static_cast<int64_t>(o) * KH * KW * Cp;
  float acc = 0.0f;
  for (int ky = 0; ky < KH; ++ky) {
    const int iy = ho - pad + ky;
    if (iy < 0 || iy >= Hs) continue;
    for (int kx = 0; kx < KW; ++kx) {
      const int ix = wo - pad + kx;
      if (ix < 0 || ix >= Ws) continue;
      const uint8_t* xp = img + (static_cast<int64_t>(iy) * Ws + ix) * C;
      const uint8_t* wp = wo_taps + (ky * KW + kx) * Cp;
      for (int c = 0; c < C; ++c) acc = fmaf(fp8::f32_from_e4m3(xp[c]), fp8::f32_from_e4m3(wp[c]), acc);
    }
  }
  ep(n, o, static_cast<int>(p), acc * ws[o] * xs[n]);
}

}  // namespace

Status hip_conv2d_fp8(HipContext& ctx, const Tensor& x, const Fp8ConvWeight& w, Tensor& y,
                      const Conv2dOptions& o) {
  const Tensor* all[] = {&x, &w.codes, &w.scales, &y, o.bias, o.residual};
  for (const Tensor* t : all)
    if (t && t->location != Location::kDevice)
      return Status::InvalidArgument("conv2d_fp8: " + t->describe() +
                                     " is not device memory (allocate it from the hip backend)");
  HIPQ_RETURN_IF_ERROR(check_conv2d_fp8(x, w, y, o));
  if (!ctx.fp8) return Status::FailedPrecondition("conv2d_fp8: " + ctx.fp8_refusal);
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.codes.shape[0], KH = w.codes.shape[1], KW = w.codes.shape[2], Cp = w.codes.shape[3];
  const int up = o.upsample_x2 ? 1 : 0;
  const int64_t Hs = H << up, Ws = W << up, Ho = y.shape[2], Wo = y.shape[3], P = Ho * Wo;
  if (N == 0 || O == 0 || P == 0) return Status::Ok();
  if (N > 65535 || O > 65535 || C > (int64_t{1} << 24) || KH * KW * Cp > (int64_t{1} << 30) ||
      N * C * Hs * Ws > (int64_t{1} << 40) || Hs * Ws > (int64_t{1} << 31) || P > (int64_t{1} << 31) - 1)
    return Status::InvalidArgument("conv2d_fp8: problem too large for one launch: x " + x.describe() +
                                   ", w.codes " + w.codes.describe());

  // The code image and, per image, the maximum's bits and the dequantization factor.
  const int64_t per_image = C * H * W;
  HIPQ_ASSIGN_OR_RETURN(Buffer xq, ctx.backend->allocate(static_cast<size_t>(N * C * Hs * Ws)));
  HIPQ_ASSIGN_OR_RETURN(Buffer meta, ctx.backend->allocate(static_cast<size_t>(N) * 8));
  auto* amax_bits = static_cast<uint32_t*>(meta.data());
  auto* xs = reinterpret_cast<float*>(amax_bits + N);
  HIPQ_HIP_RETURN_IF_ERROR(hipMemsetAsync(amax_bits, 0, static_cast<size_t>(N) * 4, ctx.stream));
  const int dt = static_cast<int>(x.dtype);
  const bool vec8 = per_image % 8 == 0 && aligned16(x.data);
  const int64_t work = vec8 ? per_image / 8 : per_image;
  const unsigned chunks = static_cast<unsigned>(
      std::clamp<int64_t>((work + kThreads * 8 - 1) / (kThreads * 8), 1, 4 * ctx.multiprocessors));
  image_amax_kernel<<<dim3(chunks, static_cast<unsigned>(N)), kThreads, 0, ctx.stream>>>(
      static_cast<const uint16_t*>(x.data), dt, per_image, vec8, amax_bits);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  const dim3 qgrid(static_cast<unsigned>((Hs * Ws + 63) / 64), static_cast<unsigned>((C + 63) / 64),
                   static_cast<unsigned>(N));
  quantize_nhwc_kernel<<<qgrid, kThreads, 0, ctx.stream>>>(
      static_cast<const uint16_t*>(x.data), dt, static_cast<int>(C), static_cast<int>(H), static_cast<int>(W),
      up, amax_bits, static_cast<uint8_t*>(xq.data()), xs);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();

  const ConvEpilogue ep{y.data,
                        static_cast<int>(y.dtype),
                        O,
                        P,
                        o.bias ? o.bias->data : nullptr,
                        o.bias ? static_cast<int>(o.bias->dtype) : 0,
                        o.residual ? o.residual->data : nullptr,
                        o.residual ? static_cast<int>(o.residual->dtype) : 0};
  const auto* wscale = static_cast<const float*>(w.scales.data);
#if HIPQ_VENDOR_NVIDIA
  if (ctx.wgmma) {
    dev::CodeRowsFill fa;
    fa.p = static_cast<const uint8_t*>(w.codes.data);
    fa.ld = static_cast<int>(KH * KW * Cp);
    fa.rows = static_cast<int>(O);
    fa.K = static_cast<int>(KH * KW * Cp);
    dev::GemmTmaFp8Plan plan;
    dev::TmaConvLoad bl;
    if (dev::prepare_conv_tma_fp8(plan, bl, fa, static_cast<const uint8_t*>(xq.data()), static_cast<int>(N),
                                  static_cast<int>(Hs), static_cast<int>(Ws), static_cast<int>(C),
                                  static_cast<int>(Cp), static_cast<int>(Ho), static_cast<int>(Wo),
                                  static_cast<int>(KW), o.padding, ctx.multiprocessors)) {
      const auto launch = [&](const auto& epilogue) {  // one column scale an image: xs[image]
        return dev::launch_gemm_tma_fp8(ctx.stream, plan, static_cast<int>(N), static_cast<int>(O),
                                        static_cast<int>(P), static_cast<int>(KH * KW * Cp), bl, wscale, xs,
                                        epilogue);
      };
      hipError_t e;
      ConvImageEpilogue16<dev::kDtF16> c16;
      ConvImageEpilogue16<dev::kDtBF16> b16;
      if (compact_conv_epilogue(ep, c16))
        e = launch(c16);
      else if (compact_conv_epilogue(ep, b16))
        e = launch(b16);
      else
        e = launch(ConvImageEpilogue{ep, P, N * P});
      HIPQ_HIP_RETURN_IF_ERROR(e);
      return Status::Ok();
    }
  }
#endif
  const dim3 grid(static_cast<unsigned>((P + kThreads - 1) / kThreads), static_cast<unsigned>(O),
                  static_cast<unsigned>(N));
  conv2d_fp8_simt_kernel<<<grid, kThreads, 0, ctx.stream>>>(
      static_cast<const uint8_t*>(xq.data()), static_cast<const uint8_t*>(w.codes.data), wscale, xs,
      static_cast<int>(C), static_cast<int>(Cp), static_cast<int>(Hs), static_cast<int>(Ws),
      static_cast<int>(KH), static_cast<int>(KW), o.padding, static_cast<int>(Wo), P, ep);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
