// How f16 products (matmul, conv2d and attention with f16 operands) are
// computed on the hip backend, chosen once per backend from the environment:
//   NVIDIA sm_80+: on the tensor cores (wgmma on Hopper builds, mma.sync
//     elsewhere) with fp32 accumulators; fp32 FMA on older devices;
//   AMD (no matrix units on RDNA2): the fp32 SIMT core, or with HIPQ_DOT2=1
//     the packed-half kernels (kernels/hip/gemm/gemm_dot2.h, attention_dot2.h),
//     two f16 products into an fp32 accumulator per instruction
//     (v_dot2_f32_f16 on RDNA2, two fmaf on targets without it).
//   HIPQ_DOT2=1 on NVIDIA: f16 on the packed-half kernels in place of the
//     tensor cores (not faster there: it runs their parity cases on a GPU at
//     hand). HIPQ_DOT2=0: off everywhere.
// The packed-half kernels are AMD's default: their light and SDXL-shape
// parity cases (matmul, conv2d, attention in f16) all passed on an H200 with
// HIPQ_DOT2=1 (2026-12-05, docs/benchmarks.md); no AMD GPU has run them yet.
// bf16 products take the tensor cores on NVIDIA and the fp32 SIMT core on
// AMD (RDNA2 has no bf16 dot instruction). Plain C++, always built, so
// `hipq version` can name the mode without a device.
#pragma once

#include <string>
#include <string_view>

namespace hipq::kernels {

inline constexpr const char* kDot2Env = "HIPQ_DOT2";
inline constexpr bool kDot2DefaultOnAmd = true;

// Whether f16 products take the packed-half kernels on a hip backend of the
// given vendor, for HIPQ_DOT2 = `value`: "1" yes, "0" no, anything else
// (unset: empty) the vendor's default: kDot2DefaultOnAmd on AMD, no on
// NVIDIA.
bool dot2_f16(bool amd, std::string_view value);
// dot2_f16 of HIPQ_DOT2.
bool dot2_f16_from_env(bool amd);

// One backend's f16 products in words: "packed-half dot2 into fp32" (dot2),
// "tensor cores (wgmma), fp32 accumulate", "tensor cores (mma.sync), fp32
// accumulate", or "fp32 FMA".
std::string f16_products(bool dot2, bool matrix_units, bool wgmma);

}  // namespace hipq::kernels
