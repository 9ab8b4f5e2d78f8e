// conv2d (NCHW) as an implicit GEMM on the tiled core (gemm_tile.h):
// per image, out[o, p] = sum_k W[o, k] * X(k, p) with k = (c, ky, kx) and
// p = (ho, wo); X(k, p) is read straight from the input with padding (no
// im2col buffer). Epilogue adds bias and residual. x must be contiguous
// (a strided x is copied into a pool buffer first). On NVIDIA sm_80+ f16/bf16
// convs run on the matrix-unit GEMM (gemm_mma.h) and fp32 convs on its 3xTF32
// variant (gemm_3xtf32.h) with the same implicit im2col fill.
//
// On Hopper (HipContext::wgmma) f16/bf16 convs whose input channels are a
// multiple of 64 take another route: x is transposed to NHWC and w to
// [O, kh, kw, C] in pool buffers, so that every (pixel, tap) row of the
// implicit im2col is 64 contiguous channels, copied 16 bytes at a time into
// the wgmma GEMM (gemm_wgmma.h); images are folded into the GEMM's N.
//
// Where HipContext::dot2_f16 holds (HIPQ_DOT2=1) f16 convs with C a multiple of 8
// run on the packed-half GEMM (gemm_dot2.h) over the same NHWC copy and
// taps-last weights (launch_conv_dot2_nhwc: each piece of 8 k is 8 channels
// of one input pixel, a 16-byte load); others take their usual route.
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/hip/gemm/gemm_3xtf32.h"
#include "kernels/hip/gemm/gemm_tile.h"
#include "kernels/hip/gemm/gemm_tma.h"
#include "kernels/hip/gemm/gemm_tma_3xtf32.h"
#include "kernels/hip/gemm/gemm_wgmma.h"
#include "kernels/hip/conv_epilogue.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

struct WeightLoader {
  const void* w;
  int dt;
  int64_t K;
  __device__ float operator()(int /*b*/, int m, int k) const { return dev::ld(w, dt, m * K + k); }
};

// H, W: the input the conv sees; up 1: x is [N, C, H / 2, W / 2], read as its
// nearest 2x upsample (Conv2dOptions::upsample_x2).
struct Im2colLoader {
  const void* x;
  int dt;
  int C, H, W, Wo, KH, KW, stride, pad, up;
  __device__ float operator()(int b, int k, int p) const {
    const int khw = KH * KW;
    const int c = k / khw;
    const int r = k - c * khw;
    const int ky = r / KW;
    const int kx = r - ky * KW;
    const int ho = p / Wo;
    const int wo = p - ho * Wo;
    const int hi = ho * stride - pad + ky;
    const int wi = wo * stride - pad + kx;
    if (hi < 0 || hi >= H || wi < 0 || wi >= W) return 0.0f;
    return dev::ld(x, dt, ((static_cast<int64_t>(b) * C + c) * (H >> up) + (hi >> up)) * (W >> up) + (wi >> up));
  }
};

// [N, C, HW] -> [N, HW, C] through 32 x 32 shared-memory tiles; T: uint16_t
// (f16 / bf16) or uint32_t (fp32), moved as raw bits.
// `cstride`: elements between channels of x (HW for whole images; an
// image's H * W for a band of HW pixels of it, one image).
template <typename T>
__global__ void nchw_to_nhwc(const T* __restrict__ x, T* __restrict__ y, int C, int HW, int64_t cstride) {
  __shared__ T t[32][33];
  const int64_t img_in = static_cast<int64_t>(blockIdx.z) * C * cstride;
  const int64_t img = static_cast<int64_t>(blockIdx.z) * C * HW;
  const int c0 = blockIdx.y * 32, p0 = blockIdx.x * 32;
  for (int r = threadIdx.y; r < 32; r += 8) {
    const int c = c0 + r, p = p0 + threadIdx.x;
    if (c < C && p < HW) t[r][threadIdx.x] = x[img_in + static_cast<int64_t>(c) * cstride + p];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < 32; r += 8) {
    const int p = p0 + r, c = c0 + threadIdx.x;
    if (c < C && p < HW) y[img + static_cast<int64_t>(p) * C + c] = t[threadIdx.x][r];
  }
}

// nchw_to_nhwc of x's nearest 2x upsample (Conv2dOptions::upsample_x2): a
// band of HW pixels of the upsampled image (rows from `lo`, Wv wide) read
// from x [N, C, Hs, Ws] at (row / 2, column / 2): the bits the copy of the
// upsampled tensor would hold, with no full-size tensor made.
template <typename T>
__global__ void nchw_to_nhwc_up2(const T* __restrict__ x, T* __restrict__ y, int C, int HW, int Wv, int lo, int Hs,
                                 int Ws) {
  __shared__ T t[32][33];
  const int64_t cstride = static_cast<int64_t>(Hs) * Ws;
  const int64_t img_in = static_cast<int64_t>(blockIdx.z) * C * cstride;
  const int64_t img = static_cast<int64_t>(blockIdx.z) * C * HW;
  const int c0 = blockIdx.y * 32, p0 = blockIdx.x * 32;
  for (int r = threadIdx.y; r < 32; r += 8) {
    const int c = c0 + r, p = p0 + threadIdx.x;
    if (c < C && p < HW) {
      const int row = lo + p / Wv, col = p % Wv;
      t[r][threadIdx.x] = x[img_in + static_cast<int64_t>(c) * cstride + static_cast<int64_t>(row >> 1) * Ws + (col >> 1)];
    }
  }
  __syncthreads();
  for (int r = threadIdx.y; r < 32; r += 8) {
    const int p = p0 + r, c = c0 + threadIdx.x;
    if (c < C && p < HW) y[img + static_cast<int64_t>(p) * C + c] = t[threadIdx.x][r];
  }
}

// The 16-bit form of nchw_to_nhwc for C and HW multiples of 8: 64 x 64
// tiles, read and written as 16-byte pieces (8 pixels of one channel in, 8
// channels of one pixel out; eight threads write a pixel's 128 bytes).
__global__ void __launch_bounds__(256) nchw_to_nhwc16_vec8(const uint16_t* __restrict__ x, uint16_t* __restrict__ y,
                                                             int C, int HW) {
  __shared__ uint16_t t[64][65];  // [channel][pixel], odd pitch: the column reads below do not collide
  const int64_t img = static_cast<int64_t>(blockIdx.z) * C * HW;
  const int c0 = blockIdx.y * 64, p0 = blockIdx.x * 64;
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int idx = threadIdx.x + 256 * k, c = idx / 8, q = idx % 8;
    if (c0 + c < C && p0 + 8 * q < HW) {
      const uint4 u = *reinterpret_cast<const uint4*>(x + img + static_cast<int64_t>(c0 + c) * HW + p0 + 8 * q);
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) t[c][8 * q + e] = static_cast<uint16_t>(w[e / 2] >> (16 * (e % 2)));
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int idx = threadIdx.x + 256 * k, p = idx / 8, j = idx % 8;
    if (p0 + p < HW && c0 + 8 * j < C) {
      uint32_t w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e)
        w[e] = static_cast<uint32_t>(t[8 * j + 2 * e][p]) | (static_cast<uint32_t>(t[8 * j + 2 * e + 1][p]) << 16);
      *reinterpret_cast<uint4*>(y + img + static_cast<int64_t>(p0 + p) * C + c0 + 8 * j) =
          make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

// w [O, C, T] -> [O, T, C] (T = kh * kw taps), raw bits as above.
template <typename E>
__global__ void weights_to_taps_last(const E* __restrict__ w, E* __restrict__ y, int64_t n, int C, int T) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % C, t = (i / C) % T, o = i / (static_cast<int64_t>(C) * T);
    y[i] = w[(o * C + c) * T + t];
  }
}

// x -> NHWC and w -> [O, kh, kw, C] in pool buffers held by xt / wt (the
// NHWC routes of the matrix units); E: the element's bits.
template <typename E>
Status to_nhwc_input(HipContext& ctx, const Tensor& x, Buffer& xt) {
  const int N = static_cast<int>(x.shape[0]), C = static_cast<int>(x.shape[1]);
  const int HW = static_cast<int>(x.shape[2] * x.shape[3]);
  HIPQ_ASSIGN_OR_RETURN(xt, ctx.backend->allocate(x.nbytes()));
  if constexpr (sizeof(E) == 2) {
    if (C % 8 == 0 && HW % 8 == 0 && aligned16(x.data)) {
      nchw_to_nhwc16_vec8<<<dim3((HW + 63) / 64, (C + 63) / 64, N), 256, 0, ctx.stream>>>(
          static_cast<const uint16_t*>(x.data), static_cast<uint16_t*>(xt.data()), C, HW);
      HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
      return Status::Ok();
    }
  }
  dim3 tgrid((HW + 31) / 32, (C + 31) / 32, N);
  nchw_to_nhwc<E><<<tgrid, dim3(32, 8), 0, ctx.stream>>>(static_cast<const E*>(x.data), static_cast<E*>(xt.data()),
                                                         C, HW, HW);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

template <typename E>
Status to_taps_last(HipContext& ctx, const Tensor& w, Buffer& wt) {
  const int C = static_cast<int>(w.shape[1]), T = static_cast<int>(w.shape[2] * w.shape[3]);
  HIPQ_ASSIGN_OR_RETURN(wt, ctx.backend->allocate(w.nbytes()));
  const int64_t wn = w.numel();
  weights_to_taps_last<E><<<ctx.grid_for(wn, 256), 256, 0, ctx.stream>>>(static_cast<const E*>(w.data),
                                                                         static_cast<E*>(wt.data()), wn, C, T);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

template <typename E>
Status to_nhwc_operands(HipContext& ctx, const Tensor& x, const Tensor& w, Buffer& xt, Buffer& wt) {
  HIPQ_RETURN_IF_ERROR(to_nhwc_input<E>(ctx, x, xt));
  return to_taps_last<E>(ctx, w, wt);
}

// 16-bit weights [O, kh, kw, C] for the matrix-unit conv: for a constant w
// (Backend::hold_constant) the form derived on its first use and kept by the
// backend (kernels/constant_forms.h; not kept while the stream is captured),
// else a copy in the pool buffer held by `wt`.
Result<const uint16_t*> taps_last_16bit(HipContext& ctx, const Tensor& w, Buffer& wt) {
  ConstantForms* forms = ctx.forms;
  const bool constant = forms != nullptr && forms->is_constant(w.data, w.nbytes());
  const ConstantForms::Shape shape{w.shape[0], w.shape[1], w.shape[2], w.shape[3]};
  if (constant) {
    if (const void* p = forms->find(w.data, ConstantForms::kTapsLast16, shape))
      return static_cast<const uint16_t*>(p);
  }
  HIPQ_RETURN_IF_ERROR(to_taps_last<uint16_t>(ctx, w, wt));
  const auto* p = static_cast<const uint16_t*>(wt.data());
  if (constant) {
    hipStreamCaptureStatus capture = hipStreamCaptureStatusNone;
    HIPQ_HIP_RETURN_IF_ERROR(hipStreamIsCapturing(ctx.stream, &capture));
    if (capture == hipStreamCaptureStatusNone) forms->put(w.data, ConstantForms::kTapsLast16, shape, std::move(wt));
  }
  return p;
}

// f16 on the packed-half kernel (gemm_dot2.h, HIPQ_DOT2=1) over an
// NHWC copy of x and the taps-last weights, C a multiple of 8: a 16-byte
// piece of k is then 8 channels of one input pixel (Dot2NhwcConvFill), and
// the weights are a plain k-major operand. C[image] = W X^T as in the
// loader route, the same epilogue.
Status launch_conv_dot2_nhwc(HipContext& ctx, const Tensor& x, const Tensor& w, const ConvEpilogue& ep, int N,
                             int O, int Ho, int Wo, const Conv2dOptions& o) {
  const int C = static_cast<int>(x.shape[1]), H = static_cast<int>(x.shape[2]), W = static_cast<int>(x.shape[3]);
  const int KH = static_cast<int>(w.shape[2]), KW = static_cast<int>(w.shape[3]);
  const int K = C * KH * KW, P = Ho * Wo;
  Buffer xt, wt;
  HIPQ_RETURN_IF_ERROR(to_nhwc_input<uint16_t>(ctx, x, xt));
  HIPQ_ASSIGN_OR_RETURN(const uint16_t* wp, taps_last_16bit(ctx, w, wt));
  const dev::Dot2PlainFill fa{dev::PlainOperand{wp, 0, K}, /*k_fast=*/true, O, K};
  const dev::Dot2NhwcConvFill fb{static_cast<const uint16_t*>(xt.data()), C, H, W, Wo, KW, o.stride, o.padding,
                                 P, K};
  dev::launch_gemm_dot2(ctx.stream, ctx.multiprocessors, N, O, P, K, fa, fb, ep);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

#if HIPQ_VENDOR_NVIDIA
// The implicit im2col B tile for the matrix-unit GEMMs (gemm_mma.h; with
// TC = float and PAD = 4, gemm_3xtf32.h): rows k = (c, ky, kx), columns the
// block's 128 output pixels. Each thread keeps
// one pixel (column tid % 128) for the whole block, so its input window
// origin is computed once, and walks its rows k, k + 2, ... by carrying kx
// into ky into c instead of dividing per element.
template <typename TC, int PAD = 8>
struct Im2colFill : dev::MmaFillBase<32, 128, /*kIsA=*/false, /*kColIsK=*/false, PAD> {
  static_assert(sizeof(TC) == 2 || sizeof(TC) == 4, "f16/bf16 or fp32 operands; values are moved as raw bits");
  using Bits = std::conditional_t<sizeof(TC) == 4, uint32_t, uint16_t>;
  static constexpr int kElems = 32 * 128 / 256;
  static constexpr int kRowStep = 256 / 128;
  // 16-bit: 16 staged values and one pixel's window origin fit two blocks an
  // SM; the fp32 3xTF32 kernel with plain weights spills at 128 registers.
  static constexpr bool kCompact = sizeof(TC) == 2;
  const Bits* x = nullptr;  // the input's bits (f16/bf16 or fp32)
  int C = 0, H = 0, W = 0, Wo = 0, KH = 0, KW = 0, stride = 1, pad = 0, P = 0;
  const Bits* xb = nullptr;
  int hi0 = 0, wi0 = 0;
  bool col_ok = false;
  Bits regs[kElems];
  __device__ __forceinline__ void begin(int batch, int n0, int N, int K, int tid) {
    this->set_origin(n0, N, K);
    xb = x + static_cast<int64_t>(batch) * C * H * W;
    const int p = n0 + tid % 128;
    col_ok = p < P;
    const int ho = p / Wo, wo = p - ho * Wo;
    hi0 = ho * stride - pad;
    wi0 = wo * stride - pad;
  }
  __device__ __forceinline__ void issue(TC*, int k0, int tid) {
    int k = k0 + tid / 128;
    const int khw = KH * KW;
    int c = k / khw;
    int ky = (k - c * khw) / KW;
    int kx = k - c * khw - ky * KW;
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      const int hi = hi0 + ky, wi = wi0 + kx;
      const bool in = col_ok && k < this->row_lim && hi >= 0 && hi < H && wi >= 0 && wi < W;
      regs[e] = in ? xb[(static_cast<int64_t>(c) * H + hi) * W + wi] : Bits{0};  // +0.0 in every type
      k += kRowStep;
      kx += kRowStep;
      while (kx >= KW) {
        kx -= KW;
        if (++ky == KH) {
          ky = 0;
          ++c;
        }
      }
    }
  }
  __device__ __forceinline__ void finish(TC* tile, int tid) const {
    Bits* t = reinterpret_cast<Bits*>(tile);
#pragma unroll
    for (int e = 0; e < kElems; ++e) t[(tid / 128 + e * kRowStep) * this->kLd + tid % 128] = regs[e];
  }
};

// The B operand of the wgmma route: row n = (image, output pixel), column
// k = (ky, kx, c) of an NHWC input; C is a multiple of 64, so one k-tile of 64
// lies inside one tap. Rows outside the image (padding) are zero-filled.
struct NhwcFill {
  const uint16_t* x = nullptr;  // [images, H, W, C]
  int C = 0, H = 0, W = 0, Wo = 0, P = 0, rows = 0, KW = 1, stride = 1, pad = 0;
  const uint16_t* img[4];
  int hi0[4], wi0[4];
  __device__ __forceinline__ void begin(int /*batch*/, int row0, int tid) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = row0 + tid / 8 + 32 * j;
      const bool ok = n < rows;
      const int b = ok ? n / P : 0, q = ok ? n - b * P : 0;
      const int ho = q / Wo, wo = q - ho * Wo;
      img[j] = x + static_cast<int64_t>(b) * H * W * C + (tid % 8) * 8;
      hi0[j] = ok ? ho * stride - pad : -(1 << 28);  // out-of-range rows never pass the bounds test
      wi0[j] = wo * stride - pad;
    }
  }
  __device__ __forceinline__ void issue(uint32_t tile, int k0, int tid) const {
    const int tap = k0 / C, c0 = k0 - tap * C;
    const int ky = tap / KW, kx = tap - ky * KW;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int hi = hi0[j] + ky, wi = wi0[j] + kx;
      const bool v = hi >= 0 && hi < H && wi >= 0 && wi < W;
      const uint16_t* src = v ? img[j] + (static_cast<int64_t>(hi) * W + wi) * C + c0 : x;
      dev::cp_async16_shared(tile + dev::swizzle128(tid / 8 + 32 * j, tid % 8), src, v);
    }
  }
};

template <typename TC>
Status launch_conv_wgmma(HipContext& ctx, const Tensor& x, const Tensor& w, const ConvEpilogue& ep, int N, int O,
                         int Ho, int Wo, const Conv2dOptions& o) {
  // H, W: the image the conv sees (x's nearest 2x upsample with upsample_x2,
  // whose NHWC copy is made from the half-size x: no upsampled tensor).
  const int up = o.upsample_x2 ? 1 : 0;
  const int C = static_cast<int>(x.shape[1]), H = static_cast<int>(x.shape[2]) << up,
            W = static_cast<int>(x.shape[3]) << up;
  const int KH = static_cast<int>(w.shape[2]), KW = static_cast<int>(w.shape[3]);
  const int T = KH * KW, K = C * T, P = Ho * Wo;
  Buffer xt, wt;
  if (up) {
    HIPQ_ASSIGN_OR_RETURN(xt, ctx.backend->allocate(x.nbytes() * 4));
    const int HW = H * W;
    nchw_to_nhwc_up2<uint16_t><<<dim3((HW + 31) / 32, (C + 31) / 32, static_cast<unsigned>(N)), dim3(32, 8), 0,
                                 ctx.stream>>>(static_cast<const uint16_t*>(x.data), static_cast<uint16_t*>(xt.data()),
                                               C, HW, W, 0, static_cast<int>(x.shape[2]), static_cast<int>(x.shape[3]));
    HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  } else {
    HIPQ_RETURN_IF_ERROR(to_nhwc_input<uint16_t>(ctx, x, xt));
  }
  HIPQ_ASSIGN_OR_RETURN(const uint16_t* wp, taps_last_16bit(ctx, w, wt));
  dev::RowsFill fa{};
  fa.p = wp;
  fa.ld = K;
  fa.rows = O;
  fa.K = K;
  // Stride 1: the warp-specialised TMA kernel with the im2col boxes of
  // TmaConvLoad (images as the GEMM's batch); else, or when TMA cannot
  // describe the input, the cp.async kernel below.
  dev::GemmTmaPlan plan;
  dev::TmaConvLoad bl;
  if (o.stride == 1 && dev::prepare_conv_tma(plan, bl, std::is_same_v<TC, __nv_bfloat16>, fa,
                                             static_cast<const uint16_t*>(xt.data()), N, H, W, C, Ho, Wo, KW,
                                             o.padding, ctx.multiprocessors, ctx.switches.gemm_tma)) {
    constexpr int kDt = std::is_same_v<TC, __nv_bfloat16> ? dev::kDtBF16 : dev::kDtF16;
    ConvImageEpilogue16<kDt> cep;
    if (compact_conv_epilogue(ep, cep)) {
      HIPQ_HIP_RETURN_IF_ERROR(dev::launch_gemm_tma<TC>(ctx.stream, plan, N, O, P, K, bl, cep));
      return Status::Ok();
    }
    const ConvImageEpilogue iep{ep, P, static_cast<int64_t>(N) * P};
    HIPQ_HIP_RETURN_IF_ERROR(dev::launch_gemm_tma<TC>(ctx.stream, plan, N, O, P, K, bl, iep));
    return Status::Ok();
  }
  NhwcFill fb{};
  fb.x = static_cast<const uint16_t*>(xt.data());
  fb.C = C;
  fb.H = H;
  fb.W = W;
  fb.Wo = Wo;
  fb.P = P;
  fb.rows = N * P;
  fb.KW = KW;
  fb.stride = o.stride;
  fb.pad = o.padding;
  HIPQ_HIP_RETURN_IF_ERROR(dev::launch_gemm_wgmma<TC>(ctx.stream, 1, O, N * P, K, fa, fb, ep));
  return Status::Ok();
}

// conv2d on the matrix units: weights [O, K] plain (or through their loader
// when K is not a multiple of 8); the input plain for a 1x1, stride-1,
// unpadded conv (X(c, p) = x[b, c, p]), else the implicit im2col fill.
template <typename TC>
void launch_conv_mma(hipStream_t stream, const Tensor& x, const Tensor& w, const WeightLoader& la,
                     const ConvEpilogue& ep, int N, int O, int Ho, int Wo, int K, const Conv2dOptions& o) {
  using S = dev::MmaShape<true, false>;
  const int C = static_cast<int>(x.shape[1]), H = static_cast<int>(x.shape[2]), W = static_cast<int>(x.shape[3]);
  const int KH = static_cast<int>(w.shape[2]), KW = static_cast<int>(w.shape[3]);
  const int P = Ho * Wo;
  const dev::PlainOperand pa = dev::plain_operand_16bit(w.data, 0, K, K);
  const dev::PlainOperand pb = KH == 1 && KW == 1 && o.stride == 1 && o.padding == 0
                                   ? dev::plain_operand_16bit(x.data, int64_t{C} * H * W, int64_t{H} * W, H * W)
                                   : dev::PlainOperand{};
  auto with_b = [&](const auto& fa) {
    if (pb.p) {
      dev::PlainFill<TC, S::kBRows, S::kBCols, false, false> fb{};
      fb.plain = pb;
      dev::launch_gemm_mma_fills<TC, true, false>(stream, N, O, P, K, fa, fb, ep);
    } else {
      Im2colFill<TC> fb{};
      fb.x = static_cast<const uint16_t*>(x.data);
      fb.C = C;
      fb.H = H;
      fb.W = W;
      fb.Wo = Wo;
      fb.KH = KH;
      fb.KW = KW;
      fb.stride = o.stride;
      fb.pad = o.padding;
      fb.P = P;
      dev::launch_gemm_mma_fills<TC, true, false>(stream, N, O, P, K, fa, fb, ep);
    }
  };
  if (pa.p) {
    dev::PlainFill<TC, S::kARows, S::kACols, true, true> fa{};
    fa.plain = pa;
    with_b(fa);
  } else {
    dev::LoaderFill<TC, S::kARows, S::kACols, true, true, WeightLoader> fa{};
    fa.load = la;
    with_b(fa);
  }
}

// The B operand of the fp32 NHWC route (3xTF32, gemm_3xtf32.h with both
// operands k-contiguous): row n = an output pixel of image `batch`, column
// k = (ky, kx, c) of an NHWC input. C is a multiple of 32, so one k-tile of 32
// lies inside one tap and a row's 32 values are contiguous: 16-byte cp.async
// copies of 4 floats (8 a row, 4 rows a thread), rows in the padding and past
// the image zero-filled. The tile layout is PlainFill's for this shape.
struct NhwcF32Fill : dev::MmaFillBase<128, 32, /*kIsA=*/false, /*kColIsK=*/true, /*PAD=*/8> {
  static constexpr bool kCompact = true;
  const float* x = nullptr;  // [images, H, W, C]
  int C = 0, H = 0, W = 0, Wo = 0, KW = 1, stride = 1, pad = 0;
  const float* img = nullptr;
  int hi0[4], wi0[4];
  __device__ __forceinline__ void begin(int batch, int n0, int N, int K, int tid) {
    this->set_origin(n0, N, K);
    img = x + static_cast<int64_t>(batch) * H * W * C + (tid % 8) * 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + tid / 8 + 32 * j;
      const int ho = n / Wo, wo = n - ho * Wo;
      hi0[j] = n < N ? ho * stride - pad : -(1 << 28);  // rows past the image never pass the bounds test
      wi0[j] = wo * stride - pad;
    }
  }
  __device__ __forceinline__ void issue(float* tile, int k0, int tid) const {
    const int tap = k0 / C, c0 = k0 - tap * C;
    const int ky = tap / KW, kx = tap - ky * KW;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int hi = hi0[j] + ky, wi = wi0[j] + kx;
      const bool v = hi >= 0 && hi < H && wi >= 0 && wi < W;
      const float* src = v ? img + (static_cast<int64_t>(hi) * W + wi) * C + c0 : x;
      dev::cp_async16(tile + (tid / 8 + 32 * j) * kLd + (tid % 8) * 4, src, v);
    }
  }
  __device__ __forceinline__ void finish(float*, int) const {}
};

// Bytes the Hopper 3xTF32 conv's input copies (the NHWC copy of x and its
// small halves) may take each: a single image larger than this is convolved
// in bands of output rows, each over its own rows of input (plus the rows
// its taps reach), so the decode of a 1024 px image in fp32 does not hold two
// extra copies of a 1 GiB activation. Every output is the same sum in the
// same order as unbanded: the bands change which tile computes it, never how.
constexpr int64_t kConvStagingBytes = int64_t{128} << 20;

// Output rows of one band for an image of Ho rows whose input rows are
// `row_bytes` each: whole tiles (bh rows), Ho when it all fits.
int conv_band_rows(int Ho, int H, int KH, int64_t row_bytes, int bh, int Wo) {
  const int64_t fit = kConvStagingBytes / std::max<int64_t>(row_bytes, 1) - (KH - 1);
  if (fit >= H) return Ho;
  int rows = static_cast<int>(fit) / bh * bh;
  while (rows > 0 && (static_cast<int64_t>(rows) * Wo) % 8 != 0) rows -= bh;
  return rows > 0 ? rows : Ho;
}

// The Hopper 3xTF32 route of a stride-1 fp32 conv: x to NHWC and the weights
// to [O, kh * kw * C], both split in place into their big halves plus small
// copies, then gemm_tma_3xtf32_kernel with TmaConvLoad boxes (images as the
// batch; a 128-pixel tile is whole output rows or a piece of one). One image
// larger than kConvStagingBytes goes in bands (above). `launched` stays
// false, with nothing queued, when the tile cannot be laid out over Wo, TMA
// cannot describe an operand or the pool cannot hold the copies. With
// o.upsample_x2 the copies are of x's nearest 2x upsample (nchw_to_nhwc_up2),
// the bands and everything after them those of the upsampled tensor.
Status conv_3xtf32_wgmma(HipContext& ctx, const Tensor& x, const Tensor& w, const ConvEpilogue& ep, int N, int O,
                         int Ho, int Wo, const Conv2dOptions& o, bool& launched) {
  launched = false;
  const int up = o.upsample_x2 ? 1 : 0;
  const int C = static_cast<int>(x.shape[1]), H = static_cast<int>(x.shape[2]) << up,
            W = static_cast<int>(x.shape[3]) << up;
  const int KH = static_cast<int>(w.shape[2]), KW = static_cast<int>(w.shape[3]), K = C * KH * KW;
  constexpr int kBn = dev::Tma3xTf32Shape::BN;
  if (C % 32 != 0 || (static_cast<int64_t>(Ho) * Wo) % 8 != 0 || !dev::conv_tile_fits(kBn, Wo)) return Status::Ok();
  const int bw = std::min(kBn, Wo), bh = kBn / bw;
  const int64_t row_bytes = static_cast<int64_t>(W) * C * sizeof(float);
  const int band = N == 1 ? conv_band_rows(Ho, H, KH, row_bytes, bh, Wo) : Ho;
  // Input rows the largest band reads.
  const int band_in = band == Ho ? H : std::min(H, band + KH - 1);
  const int64_t x_elems = static_cast<int64_t>(N) * band_in * W * C, w_elems = w.numel();
  auto exhausted = [](const Status& st) { return st.code() == StatusCode::kResourceExhausted; };
  Buffer xt, wt;
  if (Status st = to_taps_last<uint32_t>(ctx, w, wt); !st.ok()) return exhausted(st) ? Status::Ok() : st;
  Result<Buffer> ws = ctx.backend->allocate(static_cast<size_t>(w_elems) * sizeof(float));
  if (!ws.ok()) return exhausted(ws.status()) ? Status::Ok() : ws.status();
  Result<Buffer> xb = ctx.backend->allocate(static_cast<size_t>(x_elems) * sizeof(float));
  if (!xb.ok()) return exhausted(xb.status()) ? Status::Ok() : xb.status();
  Result<Buffer> xs = ctx.backend->allocate(static_cast<size_t>(x_elems) * sizeof(float));
  if (!xs.ok()) return exhausted(xs.status()) ? Status::Ok() : xs.status();
  float* wbig = static_cast<float*>(wt.data());
  float* xbig = static_cast<float*>(xb->data());
  dev::GemmTf32Plan plan;
  plan.a_batch = 0;
  if (!dev::encode_f32_rows_map(plan.a_big, wbig, O, K, 1, 128) ||
      !dev::encode_f32_rows_map(plan.a_small, static_cast<float*>(ws->data()), O, K, 1, 128))
    return Status::Ok();
  struct Band {
    int r0, rows, lo, hi;  // output rows [r0, r0 + rows), input rows [lo, hi)
  };
  std::vector<Band> bands;
  for (int r0 = 0; r0 < Ho; r0 += band) {
    const int rows = std::min(band, Ho - r0);
    const int lo = std::max(0, r0 - o.padding), hi = std::min(H, r0 + rows - o.padding + KH - 1);
    bands.push_back({r0, rows, lo, hi});
  }
  // Every map is made before anything is queued, so `launched` false means nothing ran.
  std::vector<dev::GemmTf32Plan> plans(bands.size(), plan);
  for (size_t i = 0; i < bands.size(); ++i) {
    const Band& b = bands[i];
    const int in_rows = bands.size() == 1 ? H : b.hi - b.lo;
    if (!dev::set_tf32_grid(plans[i], N, O, b.rows * Wo, ctx.multiprocessors) ||
        !dev::encode_f32_nhwc_map(plans[i].b_big, xbig, N, in_rows, W, C, bw, bh) ||
        !dev::encode_f32_nhwc_map(plans[i].b_small, static_cast<float*>(xs->data()), N, in_rows, W, C, bw, bh))
      return Status::Ok();
  }
  // In place: each element is read, then its big half written over it.
  dev::split_tf32_rows_kernel<<<ctx.grid_for(w_elems, 256), 256, 0, ctx.stream>>>(
      wbig, 0, K, 1, O, K, K, w_elems, wbig, static_cast<float*>(ws->data()));
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  launched = true;
  const auto* xin = static_cast<const uint32_t*>(x.data);
  const int64_t HW = static_cast<int64_t>(H) * W;
  for (size_t i = 0; i < bands.size(); ++i) {
    const Band& b = bands[i];
    const int in_rows = bands.size() == 1 ? H : b.hi - b.lo;
    const int band_hw = in_rows * W;
    const int64_t elems = static_cast<int64_t>(N) * band_hw * C;
    dim3 tgrid((band_hw + 31) / 32, (C + 31) / 32, N);
    const int lo = bands.size() == 1 ? 0 : b.lo;
    if (up)
      nchw_to_nhwc_up2<uint32_t><<<tgrid, dim3(32, 8), 0, ctx.stream>>>(
          xin, static_cast<uint32_t*>(xb->data()), C, band_hw, W, lo, static_cast<int>(x.shape[2]),
          static_cast<int>(x.shape[3]));
    else
      nchw_to_nhwc<uint32_t><<<tgrid, dim3(32, 8), 0, ctx.stream>>>(xin + static_cast<int64_t>(b.lo) * W,
                                                                    static_cast<uint32_t*>(xb->data()), C, band_hw, HW);
    HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
    dev::split_tf32_rows_kernel<<<ctx.grid_for(elems, 256), 256, 0, ctx.stream>>>(
        xbig, 0, C, 1, static_cast<int>(elems / C), C, C, elems, xbig, static_cast<float*>(xs->data()));
    HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
    dev::TmaConvLoad bl;
    bl.cblocks = C / 32;
    bl.bk = 32;
    bl.KW = KW;
    bl.pad = o.padding;
    bl.pad_y = o.padding - (b.r0 - b.lo);
    bl.Wo = Wo;
    // The band's outputs: rows r0.. of every channel plane (one image when banded).
    ConvEpilogue bep = ep;
    const int64_t off = static_cast<int64_t>(b.r0) * Wo;
    bep.y = static_cast<char*>(ep.y) + off * dtype_size(static_cast<DType>(ep.dt));
    if (ep.res) bep.res = static_cast<const char*>(ep.res) + off * dtype_size(static_cast<DType>(ep.res_dt));
    const int64_t P = static_cast<int64_t>(b.rows) * Wo;
    const ConvImageEpilogue iep{bep, bands.size() == 1 ? P : static_cast<int64_t>(Ho) * Wo,
                                bands.size() == 1 ? static_cast<int64_t>(N) * P : P};
    HIPQ_HIP_RETURN_IF_ERROR(dev::launch_gemm_tma_3xtf32(ctx.stream, plans[i], N, O, static_cast<int>(P), K, bl, iep));
  }
  return Status::Ok();
}

// fp32 conv2d with C % 32 == 0 as 3xTF32 over NHWC operands: the weights
// [O, kh * kw * C] and the NHWC input both k-contiguous, one image a grid z.
Status launch_conv_3xtf32_nhwc(HipContext& ctx, const Tensor& x, const Tensor& w, const ConvEpilogue& ep, int N,
                               int O, int Ho, int Wo, const Conv2dOptions& o) {
  using F = dev::Tf32x3Fills<true, true>;
  static_assert(F::S::kBRows == NhwcF32Fill::kRows && F::S::kBCols == NhwcF32Fill::kCols &&
                    F::S::kBPad == 8,
                "NhwcF32Fill has the B tile shape of the k-contiguous 3xTF32 layout");
  const int C = static_cast<int>(x.shape[1]), K = C * static_cast<int>(w.shape[2] * w.shape[3]);
  if (ctx.wgmma && ctx.switches.fp32_wgmma && o.stride == 1) {
    bool launched = false;
    HIPQ_RETURN_IF_ERROR(conv_3xtf32_wgmma(ctx, x, w, ep, N, O, Ho, Wo, o, launched));
    if (launched) return Status::Ok();
  }
  Buffer xt, wt;
  HIPQ_RETURN_IF_ERROR(to_nhwc_operands<uint32_t>(ctx, x, w, xt, wt));
  typename F::PlainA fa{};
  fa.plain = dev::plain_operand_f32(wt.data(), 0, K, K);
  NhwcF32Fill fb{};
  fb.x = static_cast<const float*>(xt.data());
  fb.C = C;
  fb.H = static_cast<int>(x.shape[2]);
  fb.W = static_cast<int>(x.shape[3]);
  fb.Wo = Wo;
  fb.KW = static_cast<int>(w.shape[3]);
  fb.stride = o.stride;
  fb.pad = o.padding;
  const hipError_t launched = dev::launch_gemm_3xtf32_fills<true, true>(ctx.stream, N, O, Ho * Wo, K, fa, fb, ep);
  HIPQ_HIP_RETURN_IF_ERROR(launched);
  return Status::Ok();
}

// conv2d with fp32 x and w on the matrix units as 3xTF32 (gemm_3xtf32.h):
// the operands of launch_conv_mma with fp32 tiles; the weights [O, K] plain
// when K is a multiple of 4, else through StridedF32Fill.
hipError_t launch_conv_3xtf32(hipStream_t stream, const Tensor& x, const Tensor& w, const ConvEpilogue& ep, int N,
                              int O, int Ho, int Wo, int K, const Conv2dOptions& o) {
  using F = dev::Tf32x3Fills<true, false>;
  const int C = static_cast<int>(x.shape[1]), H = static_cast<int>(x.shape[2]), W = static_cast<int>(x.shape[3]);
  const int KH = static_cast<int>(w.shape[2]), KW = static_cast<int>(w.shape[3]);
  const int P = Ho * Wo;
  const dev::PlainOperand pa = dev::plain_operand_f32(w.data, 0, K, K);
  const dev::PlainOperand pb = KH == 1 && KW == 1 && o.stride == 1 && o.padding == 0
                                   ? dev::plain_operand_f32(x.data, int64_t{C} * H * W, int64_t{H} * W, H * W)
                                   : dev::PlainOperand{};
  auto with_b = [&](const auto& fa) {
    if (pb.p) {
      typename F::PlainB fb{};
      fb.plain = pb;
      return dev::launch_gemm_3xtf32_fills<true, false>(stream, N, O, P, K, fa, fb, ep);
    }
    Im2colFill<float, F::S::kBPad> fb{};
    fb.x = static_cast<const uint32_t*>(x.data);
    fb.C = C;
    fb.H = H;
    fb.W = W;
    fb.Wo = Wo;
    fb.KH = KH;
    fb.KW = KW;
    fb.stride = o.stride;
    fb.pad = o.padding;
    fb.P = P;
    return dev::launch_gemm_3xtf32_fills<true, false>(stream, N, O, P, K, fa, fb, ep);
  };
  if (pa.p) {
    typename F::PlainA fa{};
    fa.plain = pa;
    return with_b(fa);
  }
  typename F::StridedA fa{};
  fa.p = static_cast<const float*>(w.data);
  fa.s_row = K;
  fa.s_col = 1;
  return with_b(fa);
}
#endif

}  // namespace

Status hip_conv2d(HipContext& ctx, const Tensor& x_in, const Tensor& w_in, Tensor& y, const Conv2dOptions& o) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x_in, "conv2d", "x"));
  HIPQ_RETURN_IF_ERROR(require_device_float(w_in, "conv2d", "w"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "conv2d", "y"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(y, "conv2d", "y"));
  if (x_in.ndim != 4 || w_in.ndim != 4 || y.ndim != 4)
    return Status::InvalidArgument("conv2d: x, w and y must be 4-D (NCHW, OCkk): x " + x_in.describe() + ", w " +
                                   w_in.describe() + ", y " + y.describe());
  if (o.stride < 1 || o.padding < 0)
    return Status::InvalidArgument("conv2d: stride must be >= 1 and padding >= 0 (got stride " +
                                   std::to_string(o.stride) + ", padding " + std::to_string(o.padding) + ")");
  // H, W: the input the conv sees (x's nearest 2x upsample with upsample_x2).
  const int up = o.upsample_x2 ? 1 : 0;
  const int64_t N = x_in.shape[0], C = x_in.shape[1], H = x_in.shape[2] << up, W = x_in.shape[3] << up;
  const int64_t O = w_in.shape[0], KH = w_in.shape[2], KW = w_in.shape[3];
  if (w_in.shape[1] != C) return shape_mismatch("conv2d", "input channels of x and w differ", x_in, w_in);
  const int64_t Ho = (H + 2 * o.padding - KH) / o.stride + 1;
  const int64_t Wo = (W + 2 * o.padding - KW) / o.stride + 1;
  if (Ho <= 0 || Wo <= 0 || y.shape[0] != N || y.shape[1] != O || y.shape[2] != Ho || y.shape[3] != Wo)
    return Status::InvalidArgument("conv2d: y " + y.describe() + " must be [" + std::to_string(N) + ", " +
                                   std::to_string(O) + ", " + std::to_string(Ho) + ", " + std::to_string(Wo) +
                                   "] for x " + x_in.describe() + ", w " + w_in.describe());
  ConvEpilogue ep{y.data, static_cast<int>(y.dtype), O, Ho * Wo, nullptr, 0, nullptr, 0};
  if (o.bias) {
    HIPQ_RETURN_IF_ERROR(require_device_float(*o.bias, "conv2d", "bias"));
    if (o.bias->numel() != O || !o.bias->is_contiguous())
      return shape_mismatch("conv2d", "bias must be contiguous [O] (bias, y)", *o.bias, y);
    ep.bias = o.bias->data;
    ep.bias_dt = static_cast<int>(o.bias->dtype);
  }
  Buffer res_hold, x_hold, w_hold;
  if (o.residual) {
    HIPQ_RETURN_IF_ERROR(require_device_float(*o.residual, "conv2d", "residual"));
    if (!o.residual->same_shape(y)) return shape_mismatch("conv2d", "residual must have y's shape", *o.residual, y);
    HIPQ_ASSIGN_OR_RETURN(Tensor r, contiguous_or_copy(ctx, *o.residual, res_hold));
    ep.res = r.data;
    ep.res_dt = static_cast<int>(r.dtype);
  }
  if (N == 0 || O == 0) return Status::Ok();
  if (N > 65535 || C * KH * KW > (int64_t{1} << 30) || C * H * W * N > (int64_t{1} << 40))
    return Status::InvalidArgument("conv2d: problem too large for one launch: x " + x_in.describe());
  HIPQ_ASSIGN_OR_RETURN(Tensor x, contiguous_or_copy(ctx, x_in, x_hold));
  HIPQ_ASSIGN_OR_RETURN(Tensor w, contiguous_or_copy(ctx, w_in, w_hold));
  [[maybe_unused]] const bool plain_1x1 = KH == 1 && KW == 1 && o.stride == 1 && o.padding == 0;
  const int mma_dtype = x.dtype == w.dtype && x.dtype != DType::kF32 ? static_cast<int>(x.dtype) : -1;
  if (up) {
    // The routes that read x through Im2colLoader (the SIMT core: AMD, and
    // fp32 with HIPQ_FP32_MATH=fma) and the fp32 and 16-bit convs on Hopper
    // (their input copies are of the upsampled image) read the half-size x:
    // the route the upsampled tensor would take, the same values. Every
    // other route convolves the upsampled tensor, made here.
    bool generic = !(ctx.dot2_f16 && mma_dtype == dev::kDtF16 && C % 8 == 0);
#if HIPQ_VENDOR_NVIDIA
    if (ctx.wgmma && mma_dtype >= 0 && C % 64 == 0 && (Ho * Wo) % 8 == 0 && N * Ho * Wo < (int64_t{1} << 31))
      generic = false;
    if (ctx.matrix_units && mma_dtype >= 0) generic = false;
    if (ctx.fp32_3xtf32 && x.dtype == DType::kF32 && w.dtype == DType::kF32) {
      generic = false;
      bool launched = false;
      if (ctx.switches.conv_nhwc && ctx.wgmma && ctx.switches.fp32_wgmma && o.stride == 1 && C % 32 == 0 &&
          !plain_1x1)
        HIPQ_RETURN_IF_ERROR(conv_3xtf32_wgmma(ctx, x, w, ep, static_cast<int>(N), static_cast<int>(O),
                                               static_cast<int>(Ho), static_cast<int>(Wo), o, launched));
      if (launched) return Status::Ok();
    }
#endif
    if (generic) {
      WeightLoader la{w.data, static_cast<int>(w.dtype), C * KH * KW};
      Im2colLoader lb{x.data, static_cast<int>(x.dtype), static_cast<int>(C), static_cast<int>(H),
                      static_cast<int>(W), static_cast<int>(Wo), static_cast<int>(KH), static_cast<int>(KW),
                      o.stride, o.padding, 1};
      const hipError_t launched = dev::launch_gemm</*kAllowMma=*/false, /*kAllowDot2=*/false>(
          ctx.stream, ctx.multiprocessors, ctx.matrix_units, /*dot2_ok=*/false, mma_dtype, static_cast<int>(N),
          static_cast<int>(O), static_cast<int>(Ho * Wo), static_cast<int>(C * KH * KW), la, true, lb, false, ep);
      HIPQ_HIP_RETURN_IF_ERROR(launched);
      return Status::Ok();
    }
#if HIPQ_VENDOR_NVIDIA
    // The 16-bit Hopper conv: its NHWC copy is made from the half-size x
    // (the route the upsampled tensor would take below, the same bits).
    if (!(ctx.dot2_f16 && mma_dtype == dev::kDtF16 && C % 8 == 0) && ctx.wgmma && mma_dtype >= 0 && C % 64 == 0 &&
        (Ho * Wo) % 8 == 0 && N * Ho * Wo < (int64_t{1} << 31)) {
      if (x.dtype == DType::kF16)
        return launch_conv_wgmma<__half>(ctx, x, w, ep, static_cast<int>(N), static_cast<int>(O), static_cast<int>(Ho),
                                         static_cast<int>(Wo), o);
      return launch_conv_wgmma<__nv_bfloat16>(ctx, x, w, ep, static_cast<int>(N), static_cast<int>(O),
                                              static_cast<int>(Ho), static_cast<int>(Wo), o);
    }
#endif
    HIPQ_ASSIGN_OR_RETURN(Buffer up_hold, ctx.backend->allocate(x.nbytes() * 4));
    Tensor xu = up_hold.tensor(x.dtype, {N, C, H, W});
    HIPQ_RETURN_IF_ERROR(hip_upsample_nearest2x(ctx, x, xu));
    Conv2dOptions plain = o;
    plain.upsample_x2 = false;
    return hip_conv2d(ctx, xu, w, y, plain);
  }
  const int64_t K = C * KH * KW;
  WeightLoader la{w.data, static_cast<int>(w.dtype), K};
  Im2colLoader lb{x.data, static_cast<int>(x.dtype), static_cast<int>(C), static_cast<int>(H), static_cast<int>(W),
                  static_cast<int>(Wo), static_cast<int>(KH), static_cast<int>(KW), o.stride, o.padding, 0};
  // f16 on the packed-half kernel (HipContext::dot2_f16) over NHWC operands
  // where C allows; other convs (SDXL: only conv_in, C = 4) take the route
  // they take without it.
  if (ctx.dot2_f16 && mma_dtype == dev::kDtF16 && C % 8 == 0)
    return launch_conv_dot2_nhwc(ctx, x, w, ep, static_cast<int>(N), static_cast<int>(O), static_cast<int>(Ho),
                                 static_cast<int>(Wo), o);
#if HIPQ_VENDOR_NVIDIA
  if (ctx.wgmma && mma_dtype >= 0 && C % 64 == 0 && (Ho * Wo) % 8 == 0 && N * Ho * Wo < (int64_t{1} << 31)) {
    if (x.dtype == DType::kF16)
      return launch_conv_wgmma<__half>(ctx, x, w, ep, static_cast<int>(N), static_cast<int>(O), static_cast<int>(Ho),
                                       static_cast<int>(Wo), o);
    return launch_conv_wgmma<__nv_bfloat16>(ctx, x, w, ep, static_cast<int>(N), static_cast<int>(O),
                                            static_cast<int>(Ho), static_cast<int>(Wo), o);
  }
  if (ctx.matrix_units && mma_dtype >= 0) {
    if (x.dtype == DType::kF16)
      launch_conv_mma<__half>(ctx.stream, x, w, la, ep, static_cast<int>(N), static_cast<int>(O),
                              static_cast<int>(Ho), static_cast<int>(Wo), static_cast<int>(K), o);
    else
      launch_conv_mma<__nv_bfloat16>(ctx.stream, x, w, la, ep, static_cast<int>(N), static_cast<int>(O),
                                     static_cast<int>(Ho), static_cast<int>(Wo), static_cast<int>(K), o);
    HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
    return Status::Ok();
  }
  // fp32 x and w: 3xTF32 on the matrix units, unless HIPQ_FP32_MATH=fma;
  // through NHWC operands where C allows it and the input is not already a
  // plain matrix (1x1, stride 1, no padding), unless HIPQ_CONV_NHWC=0.
  if (ctx.fp32_3xtf32 && ctx.switches.conv_nhwc && x.dtype == DType::kF32 && w.dtype == DType::kF32 && C % 32 == 0 &&
      !plain_1x1) {
    const Status nhwc = launch_conv_3xtf32_nhwc(ctx, x, w, ep, static_cast<int>(N), static_cast<int>(O),
                                                static_cast<int>(Ho), static_cast<int>(Wo), o);
    // The NHWC copies are an optimisation: where the pool cannot hold them
    // (refused before anything is launched), the gather below needs no memory.
    if (nhwc.code() != StatusCode::kResourceExhausted) return nhwc;
  }
  if (ctx.fp32_3xtf32 && x.dtype == DType::kF32 && w.dtype == DType::kF32) {
    HIPQ_HIP_RETURN_IF_ERROR(launch_conv_3xtf32(ctx.stream, x, w, ep, static_cast<int>(N), static_cast<int>(O),
                                                static_cast<int>(Ho), static_cast<int>(Wo), static_cast<int>(K), o));
    return Status::Ok();
  }
#endif
  const hipError_t launched = dev::launch_gemm</*kAllowMma=*/false, /*kAllowDot2=*/false>(
      ctx.stream, ctx.multiprocessors, ctx.matrix_units, /*dot2_ok=*/false, mma_dtype, static_cast<int>(N),
      static_cast<int>(O), static_cast<int>(Ho * Wo), static_cast<int>(K), la, true, lb, false, ep);
  HIPQ_HIP_RETURN_IF_ERROR(launched);
  return Status::Ok();
}

}  // namespace hipq::kernels
