// Which kernel family runs a matmul on the hip backend: a pure function of
// the problem (dtypes, sizes, strides, alignment) and of the device (its
// matrix units, the product modes and route switches read when the backend
// started). matmul.hip asks it once a call and hands the problem to that
// route's launcher. Plain C++ (no HIP): built on every flavour and tested on
// the cpu over the SDXL shapes (tests/kernels/hip/gemm_route_test.cpp).
//
// The kernels, most specific first:
//   kTmaWgmma   f16/bf16, both operands K-major and plain, Hopper (sm_90a
//               build on a compute capability 9.0 device): gemm/gemm_tma.h,
//               tile 128 x tile_n. Where the driver cannot describe an
//               operand as a tensor map after all (no entry point, an
//               encoding the driver declines) the launcher takes kWgmma.
//   kWgmma      the same operands on the cp.async kernel (gemm/gemm_wgmma.h):
//               where the TMA kernel does not take them, or HIPQ_GEMM_TMA=0.
//   kTf32Wgmma  fp32 as 3xTF32 on Hopper, both operands split into K-major
//               copies first (gemm/gemm_tma_3xtf32.h). Where the pool cannot
//               hold the copies or the driver declines a tensor map, the
//               launcher takes kTf32Mma.
//   kTf32Mma    fp32 as 3xTF32 on mma.sync (gemm/gemm_3xtf32.h), sm_80+.
//   kMma        f16/bf16 (both the same) on mma.sync (gemm/gemm_mma.h), sm_80+.
//   kDot2       f16 on the packed-half kernel (gemm/gemm_dot2.h) where
//               HIPQ_DOT2 holds: AMD's f16 route, on NVIDIA too when asked.
//   kSimt       everything else: the fp32 SIMT core (gemm/gemm_tile.h),
//               tile_n 128 (128 x 128 tile, 8 x 8 a thread) when the
//               problem's big tiles fill the device, else 64 (64 x 64, 4 x 4).
//   kFp8TmaWgmma matmul_fp8 (e4m3 codes of both operands, u8, K-major) on
//               Hopper: gemm/gemm_tma_fp8.h (TMA + mbarrier stages, wgmma
//               m64n128k32 e4m3, 128 x 128 tile), K a multiple of 16 and
//               both operands 16-byte aligned. Where the driver cannot
//               describe an operand as a tensor map after all, or
//               HIPQ_GEMM_TMA=0, kFp8Wgmma.
//   kFp8Wgmma   the same operands on the cp.async kernel
//               (gemm/gemm_wgmma_fp8.h).
//   kFp8Simt    matmul_fp8 otherwise on a device with fp8 products (edges,
//               HIPQ_NO_WGMMA): the plain decode-and-FMA kernel of
//               matmul_fp8.hip. fp8 products exist only on compute capability
//               9.0 of an sm_90a build (GemmDevice::fp8); elsewhere
//               matmul_fp8 is refused (fp8_refusal) and never routed.
// A geglu_pairs product is fused into the epilogue on the wgmma kernels
// only (geglu_fused); elsewhere it goes through a scratch product in out's
// dtype and hip_geglu_pairs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernels/dtype.h"

namespace hipq::kernels {

// C[batch](m, n) = sum_k A(batch, m, k) B(batch, k, n), element strides:
// A(b, m, k) = a[b * a_sb + m * a_sm + k * a_sk],
// B(b, k, n) = b[b * b_sb + k * b_sk + n * b_sn] (batch stride 0: broadcast).
struct GemmProblem {
  DType a_dtype = DType::kF32, b_dtype = DType::kF32;
  int64_t batch = 1, M = 0, N = 0, K = 0;
  int64_t a_sb = 0, a_sm = 0, a_sk = 0;
  int64_t b_sb = 0, b_sk = 0, b_sn = 0;
  bool a_aligned16 = true, b_aligned16 = true;  // data pointer set and 16-byte aligned
  bool geglu_pairs = false;                     // MatmulOptions::geglu_pairs
};

// What the route choice reads of the device (HipContext) and its switches.
struct GemmDevice {
  int multiprocessors = 1;
  bool matrix_units = false;  // NVIDIA sm_80+: mma.sync
  bool wgmma = false;         // ... compute capability 9.0 of an sm_90a build (HIPQ_NO_WGMMA unset)
  bool fp32_3xtf32 = false;   // fp32 products as 3xTF32 (matrix units, HIPQ_FP32_MATH not fma)
  bool dot2_f16 = false;      // HIPQ_DOT2: f16 products on the packed-half kernels
  bool fp32_wgmma = true;     // RouteSwitches::fp32_wgmma
  int gemm_tma = -1;          // RouteSwitches::gemm_tma
  bool fp8 = false;           // e4m3 products: compute capability 9.0 of an sm_90a build
};

enum class GemmKernel {
  kTmaWgmma,
  kWgmma,
  kTf32Wgmma,
  kTf32Mma,
  kMma,
  kDot2,
  kSimt,
  kFp8TmaWgmma,
  kFp8Wgmma,
  kFp8Simt
};

// An operand the 16-bit kernels may copy straight to shared memory: unit
// stride along its contiguous index, every 8-element row piece a 16-byte
// aligned copy. ld: the stride between its rows (along the other index).
struct GemmPlainOperand {
  bool plain = false;
  int64_t ld = 0;
};

struct GemmRoute {
  GemmKernel kernel = GemmKernel::kSimt;
  int tile_n = 0;            // kTmaWgmma: 256 / 192 / 160 / 128; kSimt: 128 or 64; kFp8TmaWgmma: 128; else 0
  bool geglu_fused = false;  // geglu_pairs in the kernel's epilogue
  bool a_k_fast = false;     // k is A's unit-stride index
  bool b_k_fast = false;     // k is B's unit-stride index (and n is not)
  GemmPlainOperand a, b;     // set only for 16-bit operands of one dtype
};

GemmRoute choose_gemm_route(const GemmProblem& p, const GemmDevice& d);

// matmul_fp8's route: a and b u8 (e4m3 codes) K-major, a_sk = b_sk = 1
// (GemmProblem's b_sk/b_sn as for matmul with trans_b). kFp8TmaWgmma,
// kFp8Wgmma or kFp8Simt; only asked where d.fp8 holds. geglu is fused on all.
GemmRoute choose_fp8_route(const GemmProblem& p, const GemmDevice& d);

// Why a device has no fp8 products ("" when it has them): what the precision
// fp8 is refused with. vendor_nvidia / sm90a_build: the build; major.minor:
// the device's compute capability (AMD: 0.0); device: its name.
std::string fp8_refusal(bool vendor_nvidia, bool sm90a_build, int major, int minor, const std::string& device);

// The name of a kernel family ("tma_wgmma", "wgmma", "3xtf32_wgmma",
// "3xtf32_mma", "mma", "dot2", "simt", "fp8_tma_wgmma", "fp8_wgmma",
// "fp8_simt").
const char* gemm_kernel_name(GemmKernel k);

// Whether data whose contiguous index (extent `contiguous`) has unit
// stride is plain in pieces of `vec` elements (16 bytes): aligned, batch
// stride sb and row stride ld multiples of vec, contiguous a multiple too.
inline bool gemm_plain(bool aligned16, int64_t sb, int64_t ld, int64_t contiguous, int64_t vec) {
  return aligned16 && sb % vec == 0 && ld % vec == 0 && ld >= 0 && sb >= 0 && contiguous % vec == 0;
}

// The TMA GEMM's block tile width: the one of 256, 192, 160 and 128 that
// finishes in the fewest tile-widths of waves (one block a multiprocessor
// for each; a wave of 160-wide tiles takes about 160 / 256 of a 256-wide
// one), the wider on a tie. E.g. 2048 rows (16 row tiles) and N = 1280 on
// 132 SMs: 80 tiles of 256 are one wave of 256 = 256 units, 160 tiles of 128
// two waves = 256, 128 tiles of 160 one wave = 160; N = 640 over 8192 rows:
// 256 -> 2 waves (512), 128 -> 3 waves (384), 160 -> 2 waves (320).
// `allowed(bn)` filters the widths (the conv route takes only those whose
// tiles are whole output rows or pieces of one); 0 when none is allowed.
template <class Allowed>
int gemm_tma_tile_n(int64_t batch, int64_t M, int64_t N, int multiprocessors, Allowed allowed) {
  const int64_t sms = multiprocessors > 0 ? multiprocessors : 1;
  const int64_t mt = (M + 127) / 128;
  int best = 0;
  int64_t best_cost = -1;
  for (const int bn : {256, 192, 160, 128}) {
    if (!allowed(bn)) continue;
    const int64_t waves = (batch * mt * ((N + bn - 1) / bn) + sms - 1) / sms;
    const int64_t cost = waves * bn;
    if (best_cost < 0 || cost < best_cost) best = bn, best_cost = cost;
  }
  return best;
}
inline int gemm_tma_tile_n(int64_t batch, int64_t M, int64_t N, int multiprocessors) {
  return gemm_tma_tile_n(batch, M, N, multiprocessors, [](int) { return true; });
}

// Blocks of the persistent grid over 128 x bn tiles: min(tiles,
// multiprocessors); false past 2^31 - 1 tiles.
inline bool tma_grid_blocks(int64_t batch, int64_t M, int64_t N, int bn, int multiprocessors, int& blocks) {
  const int64_t tiles = batch * ((M + 127) / 128) * ((N + bn - 1) / bn);
  if (tiles > (int64_t{1} << 31) - 1) return false;
  const int64_t sms = multiprocessors > 0 ? multiprocessors : 1;
  blocks = static_cast<int>(tiles < sms ? tiles : sms);
  return true;
}

}  // namespace hipq::kernels
