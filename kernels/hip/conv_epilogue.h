// The epilogues of conv2d's implicit GEMMs (conv2d.hip, conv2d_fp8.hip):
// y[b, o, p] = acc + bias[o] (+ residual), NCHW, rounded once to y's dtype.
// ConvEpilogue is the general form (any dtypes, element or 8-column calls);
// ConvImageEpilogue adapts it to the TMA kernels' batched calls (images as
// the batch); ConvImageEpilogue16 is their common case with the dtype fixed
// when compiled.
#pragma once

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {

struct ConvEpilogue {
  void* y;
  int dt;
  int64_t O, P;
  const void* bias;
  int bias_dt;
  const void* res;
  int res_dt;
  __device__ void operator()(int b, int o, int p, float acc) const {
    float v = acc;
    if (bias) v += dev::ld(bias, bias_dt, o);
    const int64_t i = (b * O + o) * P + p;
    if (res) v += dev::ld(res, res_dt, i);
    dev::st(y, dt, i, v);
  }
  // The wgmma route (images folded into N = images * P, P a multiple of 8):
  // y[b, o, p .. p+7] for n = b * P + p.
  __device__ __forceinline__ void row8(int /*batch*/, int o, int n, int N, const float* acc) const {
    const int64_t b = n / P, p = n - b * P;
    const int64_t i0 = (b * O + o) * P + p;
    const float bo = bias ? dev::ld(bias, bias_dt, o) : 0.0f;
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = acc[e] + bo + (res && n + e < N ? dev::ld(res, res_dt, i0 + e) : 0.0f);
    if (n + 8 <= N && dt != dev::kDtF32 && (reinterpret_cast<uintptr_t>(y) + 2 * i0) % 16 == 0) {
      dev::st8_16bit(y, dt, i0, v);
      return;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (n + e < N) dev::st(y, dt, i0 + e, v[e]);
  }
};

// The TMA route's epilogue: the GEMM is batched over the images (column n
// is pixel n of image `batch`); ConvEpilogue::row8 takes images folded into n.
struct ConvImageEpilogue {
  ConvEpilogue ep;
  int64_t P, total;  // pixels an image, all images' pixels
  __device__ __forceinline__ void row8(int batch, int o, int n, int /*N*/, const float* acc) const {
    ep.row8(0, o, static_cast<int>(batch * P + n), static_cast<int>(total), acc);
  }
};

// ConvImageEpilogue's common case, its dtype fixed when compiled (as
// MatEpilogue16 in matmul.hip): y, bias and residual all of the kernel's
// 16-bit type kDt, y and the residual 16-byte aligned. A tile's 8-pixel
// pieces never cross an image's edge (prepare_conv_tma: P % 8 == 0), so every
// piece is one 16-byte residual load and one 16-byte store. Same arithmetic,
// in the same order, as ConvEpilogue::row8.
template <int kDt>
struct ConvImageEpilogue16 {
  uint16_t* y;
  const uint16_t* bias;  // [O] or null
  const uint16_t* res;   // y's shape, or null
  int64_t O, P;
  __device__ __forceinline__ void row8(int batch, int o, int n, int /*N*/, const float* acc) const {
    const int64_t i0 = (batch * O + o) * P + n;
    const float bo = bias ? dev::from_16bit(kDt, bias[o]) : 0.0f;
    float rv[8];
    if (res) dev::ld8_16bit(res, kDt, i0, rv);
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = acc[e] + bo + (res ? rv[e] : 0.0f);
    dev::st8_16bit(y, kDt, i0, v);
  }
};

// The compact form of `ep` for the TMA route when its case is
// ConvImageEpilogue16's; false otherwise.
template <int kDt>
bool compact_conv_epilogue(const ConvEpilogue& ep, ConvImageEpilogue16<kDt>& c) {
  if (ep.dt != kDt || !aligned16(ep.y) || ep.P % 8 != 0 || (ep.bias && ep.bias_dt != kDt) ||
      (ep.res && (ep.res_dt != kDt || !aligned16(ep.res))))
    return false;
  c = ConvImageEpilogue16<kDt>{static_cast<uint16_t*>(ep.y), static_cast<const uint16_t*>(ep.bias),
                               static_cast<const uint16_t*>(ep.res), ep.O, ep.P};
  return true;
}

}  // namespace hipq::kernels
