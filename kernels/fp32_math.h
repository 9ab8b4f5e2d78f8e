// How fp32 products (matmul, conv2d and attention with fp32 operands) are computed on
// the hip backend, chosen once per backend from the environment:
//   HIPQ_FP32_MATH unset, empty or "3xtf32": on NVIDIA devices with matrix
//     units (sm_80+), 3xTF32: each operand split into two tf32 parts, three
//     tensor-core products per pair accumulated in fp32 (kernels/hip/
//     tf32_split.h says why that keeps fp32's accuracy); fp32 FMA elsewhere;
//   "fma": fp32 FMA on the SIMT cores everywhere.
// The cpu backend always computes fp32 with fp32 arithmetic. Plain C++,
// always built, so `hipq version` can name the mode without a device.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace hipq::kernels {

enum class Fp32Math { k3xTf32, kFma };

inline constexpr const char* kFp32MathEnv = "HIPQ_FP32_MATH";

// "3xtf32" -> k3xTf32, "fma" -> kFma (an empty value is the default,
// k3xTf32); anything else InvalidArgument naming the variable and the values.
Result<Fp32Math> parse_fp32_math(std::string_view value);
// parse_fp32_math of HIPQ_FP32_MATH (k3xTf32 when unset).
Result<Fp32Math> fp32_math_from_env();

// What one backend's fp32 products are, in words: "3xTF32 split on tensor
// cores" when `mode` is k3xTf32 and `matrix_units` (the device has them),
// else "fp32 FMA".
std::string fp32_products(Fp32Math mode, bool matrix_units);

}  // namespace hipq::kernels
