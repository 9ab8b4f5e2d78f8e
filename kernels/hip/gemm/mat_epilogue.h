// MatEpilogue: matmul's epilogue on the hip backend (alpha, bias,
// activation, residual, or GEGLU over (value, gate) column pairs), per
// element (operator()) or per 8-column row piece (row8, the wgmma kernels).
// Shared by matmul.hip and matmul_fp8.hip, which hands it the scaled sums.
#pragma once

#include "kernels/hip/hip_common.h"

namespace hipq::kernels {

struct MatEpilogue {
  void* out;
  int dt;
  int64_t ob, om;
  const void* bias;
  int bias_dt;
  int64_t bias_s;
  const void* res;
  int res_dt;
  int64_t rb, rm, rn;
  float alpha;
  int act;
  int geglu = 0;  // MatmulOptions::geglu_pairs: ob, om count out's N / 2 columns
  // Out of line: inlined 64 times per thread (activation included) the
  // kernel takes minutes in ptxas for no speed gain at the end of the tile.
  __device__ __noinline__ void operator()(int b, int m, int n, float acc) const {
    float v = alpha * acc;
    if (bias) v += dev::ld(bias, bias_dt, n * bias_s);
    v = dev::activate(act, v);
    if (res) v += dev::ld(res, res_dt, b * rb + m * rm + n * rn);
    dev::st(out, dt, b * ob + m * om + n, v);
  }
  // C[m][n .. n+7] (fewer at the right edge) for the wgmma kernel's epilogue:
  // one 16-byte store when out is 16-bit and the row piece is aligned.
  __device__ __forceinline__ void row8(int b, int m, int n, int N, const float* acc) const {
    if (geglu) {
      geglu_row8(b, m, n, N, acc);
      return;
    }
    const int64_t i0 = b * ob + m * om + n;
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float x = alpha * acc[e];
      if (n + e < N) {
        if (bias) x += dev::ld(bias, bias_dt, (n + e) * bias_s);
        x = dev::activate(act, x);
        if (res) x += dev::ld(res, res_dt, b * rb + m * rm + (n + e) * rn);
      }
      v[e] = x;
    }
    if (n + 8 <= N && dt != dev::kDtF32 && (reinterpret_cast<uintptr_t>(out) + 2 * i0) % 16 == 0) {
      dev::st8_16bit(out, dt, i0, v);
      return;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (n + e < N) dev::st(out, dt, i0 + e, v[e]);
  }
  // geglu_pairs: columns n .. n+7 (n even) are four (value, gate) pairs ->
  // out[m][n/2 .. n/2+3] = value * gelu(gate); one 8-byte store when 16-bit
  // and aligned. The 2F-wide product is never written.
  __device__ __forceinline__ void geglu_row8(int b, int m, int n, int N, const float* acc) const {
    const int64_t i0 = b * ob + m * om + n / 2;
    float y[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int c = n + 2 * e;
      float v = alpha * acc[2 * e], g = alpha * acc[2 * e + 1];
      if (bias && c + 1 < N) {
        v += dev::ld(bias, bias_dt, c * bias_s);
        g += dev::ld(bias, bias_dt, (c + 1) * bias_s);
      }
      y[e] = v * dev::gelu(g);
    }
    if (n + 8 <= N && dt != dev::kDtF32 && (reinterpret_cast<uintptr_t>(out) + 2 * i0) % 8 == 0) {
      *reinterpret_cast<uint2*>(static_cast<uint16_t*>(out) + i0) =
          make_uint2(dev::pack2_16bit(dt, y[0], y[1]), dev::pack2_16bit(dt, y[2], y[3]));
      return;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (n + 2 * e + 1 < N) dev::st(out, dt, i0 + e, y[e]);
  }
};

}  // namespace hipq::kernels
