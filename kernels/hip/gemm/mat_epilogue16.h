// MatEpilogue16: MatEpilogue's common case with its 16-bit dtype fixed when
// compiled, for the TMA kernels (matmul.hip's f16/bf16 route and
// matmul_fp8.hip's), and compact_epilogue, which says when it applies.
#pragma once

#include "kernels/hip/gemm/mat_epilogue.h"

namespace hipq::kernels {

#if HIPQ_VENDOR_NVIDIA
// MatEpilogue's common case for the TMA kernel, its dtype fixed when
// compiled: out, bias and residual all of the kernel's 16-bit type kDt,
// contiguous rows (residual rows too), no activation. Every load and store of
// a whole 8-column piece is one 16-byte access and no dtype switch is
// inlined: the epilogue's code is a fraction of MatEpilogue::row8's (whose
// per-element switches made the TMA kernel wait on instruction fetch:
// kernels/dev/README.md). Same arithmetic, in the same order, as row8.
template <int kDt>
struct MatEpilogue16 {
  uint16_t* out;
  int64_t ob, om;
  const uint16_t* bias;  // [N] or null
  const uint16_t* res;   // rows of rm elements, batch stride rb, or null
  int64_t rb, rm;
  float alpha;
  int geglu;  // as MatEpilogue::geglu (out N / 2 wide)
  __device__ __forceinline__ void row8(int b, int m, int n, int N, const float* acc) const {
    if (n + 8 > N) {  // the right edge: element by element
      if (geglu) {
        for (int e = 0; n + 2 * e + 1 < N; ++e) {
          float v = alpha * acc[2 * e], g = alpha * acc[2 * e + 1];
          if (bias) v += dev::from_16bit(kDt, bias[n + 2 * e]), g += dev::from_16bit(kDt, bias[n + 2 * e + 1]);
          dev::st(out, kDt, b * ob + m * om + n / 2 + e, v * dev::gelu(g));
        }
        return;
      }
      for (int e = 0; n + e < N; ++e) {
        float x = alpha * acc[e];
        if (bias) x += dev::from_16bit(kDt, bias[n + e]);
        if (res) x += dev::from_16bit(kDt, res[b * rb + m * rm + n + e]);
        dev::st(out, kDt, b * ob + m * om + n + e, x);
      }
      return;
    }
    float bv[8];
    if (bias) dev::ld8_16bit(bias, kDt, n, bv);
    if (geglu) {
      float y[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = alpha * acc[2 * e], g = alpha * acc[2 * e + 1];
        if (bias) v += bv[2 * e], g += bv[2 * e + 1];
        y[e] = v * dev::gelu(g);
      }
      *reinterpret_cast<uint2*>(out + b * ob + m * om + n / 2) =
          make_uint2(dev::pack2_16bit(kDt, y[0], y[1]), dev::pack2_16bit(kDt, y[2], y[3]));
      return;
    }
    float rv[8];
    if (res) dev::ld8_16bit(res, kDt, b * rb + m * rm + n, rv);
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float x = alpha * acc[e];
      if (bias) x += bv[e];
      if (res) x += rv[e];
      v[e] = x;
    }
    dev::st8_16bit(out, kDt, b * ob + m * om + n, v);
  }
};

// MatEpilogue16 for the TMA kernels' register epilogue (gemm_tma.h
// tma_store_tile16: the arithmetic on the accumulators in registers, 16-bit
// results staged): the fp8 kernel's for every case, the 16-bit kernel's for
// GEGLU only, where each measured faster than row8 (docs/benchmarks.md).
// kGroup: column pairs whose bias / residual loads are issued together
// (0: 8, or 10 for a 160-wide tile; 1: each pair's loads just before its
// arithmetic, the faster form beside the 16-bit kernel's 128 accumulators).
template <int kDt, int kGroup>
struct RegisterEpilogue16 : MatEpilogue16<kDt> {};

// The compact form of `ep` when its case is MatEpilogue16's (dt: the
// kernel's 16-bit type); false otherwise.
template <int kDt>
bool compact_epilogue(const MatEpilogue& ep, MatEpilogue16<kDt>& c) {
  if (ep.dt != kDt || ep.act != dev::kActNone || !aligned16(ep.out) || ep.om % 8 != 0 || ep.ob % 8 != 0) return false;
  if (ep.bias && (ep.bias_dt != kDt || ep.bias_s != 1 || !aligned16(ep.bias))) return false;
  if (ep.res && (ep.res_dt != kDt || ep.rn != 1 || ep.rm % 8 != 0 || ep.rb % 8 != 0 || !aligned16(ep.res)))
    return false;
  c = MatEpilogue16<kDt>{static_cast<uint16_t*>(ep.out), ep.ob, ep.om, static_cast<const uint16_t*>(ep.bias),
                         static_cast<const uint16_t*>(ep.res), ep.rb, ep.rm, ep.alpha, ep.geglu};
  return true;
}

// Which register epilogue a kernel takes (kernels/dev/README.md "Measured").
enum class RegisterUse { kEveryCase, kGegluOnly };

// launch(epilogue) with the fastest form of `ep` its case allows: where out,
// bias and residual are one 16-bit type kDt (compact_epilogue),
// RegisterEpilogue16<kDt, kGroup> for every case (kEveryCase: the fp8
// kernel) or for GEGLU with MatEpilogue16 otherwise (kGegluOnly: the 16-bit
// kernel); else the general `ep`.
template <int kDt, RegisterUse kUse, int kGroup, class Launch>
auto launch_with_epilogue16(const MatEpilogue& ep, const Launch& launch) {
  MatEpilogue16<kDt> compact;
  if (!compact_epilogue(ep, compact)) return launch(ep);
  if constexpr (kUse == RegisterUse::kEveryCase) {
    return launch(RegisterEpilogue16<kDt, kGroup>{compact});
  } else {
    if (compact.geglu) return launch(RegisterEpilogue16<kDt, kGroup>{compact});
    return launch(compact);
  }
}
#endif

}  // namespace hipq::kernels
