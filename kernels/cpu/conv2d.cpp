// conv2d on the cpu, NCHW: y = conv(x, w) + bias (+ residual).
// Implicit GEMM over tiles of output pixels: for each tile a small column
// block [C*kh*kw, P] is built (never the whole im2col matrix) and multiplied
// by the weights [O, C*kh*kw] in depth blocks, tiles spread over the pool.
// With upsample_x2 the column block reads x's pixel (iy / 2, ix / 2) for the
// upsampled input's (iy, ix): the same values as the conv of the upsampled
// tensor, in the same order.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm_tile.h"
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {
namespace {

constexpr int64_t kBlockK = 256;

// acc_r[p] += w_r[k] * col[k][p] for four output channels over one depth block.
HIPQ_CPU_HOT void tile_kernel4(const float* __restrict w0, const float* __restrict w1, const float* __restrict w2,
                  const float* __restrict w3, const float* __restrict col, int64_t P,
                  float* __restrict c0, float* __restrict c1, float* __restrict c2,
                  float* __restrict c3, int64_t kb) {
  for (int64_t k = 0; k < kb; ++k) {
    const float* __restrict ck = col + k * P;
    const float x0 = w0[k], x1 = w1[k], x2 = w2[k], x3 = w3[k];
    for (int64_t p = 0; p < P; ++p) {
      const float v = ck[p];
      c0[p] += x0 * v;
      c1[p] += x1 * v;
      c2[p] += x2 * v;
      c3[p] += x3 * v;
    }
  }
}

HIPQ_CPU_HOT void tile_kernel1(const float* __restrict w0, const float* __restrict col, int64_t P,
                  float* __restrict c0, int64_t kb) {
  for (int64_t k = 0; k < kb; ++k) {
    const float* __restrict ck = col + k * P;
    const float x0 = w0[k];
    for (int64_t p = 0; p < P; ++p) c0[p] += x0 * ck[p];
  }
}

}  // namespace

Status conv2d(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dOptions& o) {
  constexpr std::string_view op = "conv2d";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_float(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "w", w, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "y", y, "x", x));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "x", x, 4, 4));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "w", w, 4, 4));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  if (o.stride < 1 || o.padding < 0)
    return invalid(op, "stride must be >= 1 and padding >= 0 (got stride " + std::to_string(o.stride) +
                           ", padding " + std::to_string(o.padding) + ")");
  const int up = o.upsample_x2 ? 1 : 0;
  // H, W: the input the conv sees (the upsampled one with upsample_x2); Ws: x's row.
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2] << up, W = x.shape[3] << up, Ws = x.shape[3];
  const int64_t O = w.shape[0], KH = w.shape[2], KW = w.shape[3];
  if (w.shape[1] != C)
    return invalid(op, "operand 'w' " + w.describe() + " expects " + std::to_string(w.shape[1]) +
                           " input channels but 'x' " + x.describe() + " has " + std::to_string(C));
  const int64_t s = o.stride, pad = o.padding;
  if (H + 2 * pad < KH || W + 2 * pad < KW)
    return invalid(op, "kernel " + w.describe() + " is larger than padded input " + x.describe());
  const int64_t Ho = (H + 2 * pad - KH) / s + 1, Wo = (W + 2 * pad - KW) / s + 1;
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, {N, O, Ho, Wo}));
  if (o.bias) {
    HIPQ_RETURN_IF_ERROR(check_like(op, "bias", *o.bias, "x", x));
    HIPQ_RETURN_IF_ERROR(check_shape(op, "bias", *o.bias, {O}));
  }
  if (o.residual) {
    HIPQ_RETURN_IF_ERROR(check_like(op, "residual", *o.residual, "x", x));
    HIPQ_RETURN_IF_ERROR(check_shape(op, "residual", *o.residual, {N, O, Ho, Wo}));
  }
  if (y.numel() == 0) return Status::Ok();

  thread_local std::vector<float> x_buf, w_buf, b_buf, r_buf;
  const float* X = as_f32(x, x_buf);
  const float* Wt = as_f32(w, w_buf);
  const float* bias = o.bias ? as_f32(*o.bias, b_buf) : nullptr;
  const float* res = o.residual ? as_f32(*o.residual, r_buf) : nullptr;
  // A residual that is y itself is fine: each element is read just before it
  // is written. An x that overlaps y is not: other tiles still read it.
  const bool x_aliases_y = overlaps(y, x);
  if (x_aliases_y && X == x.data) {
    x_buf.assign(X, X + x.numel());
    X = x_buf.data();
  }

  const int64_t CK = C * KH * KW;
  const int64_t HW = Ho * Wo;
  const int threads = ThreadPool::global().threads();
  // Tiles small enough that every thread gets work on small images, wide
  // enough for the inner loop to vectorise.
  int64_t P = (HW * N + 2 * threads - 1) / (2 * threads);
  P = std::clamp<int64_t>((P + 15) / 16 * 16, 16, 128);
  const bool use_tile = tile_kernel_available();
  const int64_t tiles_per_image = (HW + P - 1) / P;
  const bool direct_1x1 = KH == 1 && KW == 1 && s == 1 && pad == 0 && up == 0;

  ThreadPool::global().parallel_for(N * tiles_per_image, 1, [&](int64_t t0, int64_t t1) {
    float* col = scratch(0, static_cast<size_t>(std::min(CK, kBlockK) * P));
    float* acc = scratch(1, static_cast<size_t>(O * P));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / tiles_per_image;
      const int64_t p0 = (t % tiles_per_image) * P;
      const int64_t np = std::min(P, HW - p0);
      const float* xn = X + n * C * x.shape[2] * Ws;
      std::memset(acc, 0, static_cast<size_t>(O * P) * sizeof(float));
      for (int64_t k0 = 0; k0 < CK; k0 += kBlockK) {
        const int64_t kb = std::min(kBlockK, CK - k0);
        for (int64_t k = 0; k < kb; ++k) {
          float* ck = col + k * P;
          const int64_t kk = k0 + k;
          if (direct_1x1) {
            std::memcpy(ck, xn + kk * H * W + p0, static_cast<size_t>(np) * sizeof(float));
          } else {
            const int64_t c = kk / (KH * KW), ky = (kk / KW) % KH, kx = kk % KW;
            const float* xc = xn + c * x.shape[2] * Ws;
            for (int64_t p = 0; p < np; ++p) {
              const int64_t oy = (p0 + p) / Wo, ox = (p0 + p) % Wo;
              const int64_t iy = oy * s - pad + ky, ix = ox * s - pad + kx;
              ck[p] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? xc[(iy >> up) * Ws + (ix >> up)] : 0.0f;
            }
          }
          for (int64_t p = np; p < P; ++p) ck[p] = 0.0f;
        }
        int64_t oc = 0;
        for (; oc + 4 <= O; oc += 4) {
          const float* wr = Wt + oc * CK + k0;
          if (use_tile) {
            for (int64_t pp = 0; pp < P; pp += 16) micro_4x16(wr, CK, col + pp, P, acc + oc * P + pp, P, kb);
          } else {
            tile_kernel4(wr, wr + CK, wr + 2 * CK, wr + 3 * CK, col, P, acc + oc * P,
                         acc + (oc + 1) * P, acc + (oc + 2) * P, acc + (oc + 3) * P, kb);
          }
        }
        for (; oc < O; ++oc) tile_kernel1(Wt + oc * CK + k0, col, P, acc + oc * P, kb);
      }
      for (int64_t oc = 0; oc < O; ++oc) {
        const int64_t base = (n * O + oc) * HW + p0;
        for (int64_t p = 0; p < np; ++p) {
          float v = acc[oc * P + p];
          if (bias) v += bias[oc];
          if (res) v += res[base + p];
          store_from_f32(y.data, y.dtype, base + p, v);
        }
      }
    }
  });
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
