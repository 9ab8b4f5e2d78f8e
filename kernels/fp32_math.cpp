#include "kernels/fp32_math.h"

#include <cstdlib>

namespace hipq::kernels {

Result<Fp32Math> parse_fp32_math(std::string_view value) {
  if (value.empty() || value == "3xtf32") return Fp32Math::k3xTf32;
  if (value == "fma") return Fp32Math::kFma;
  return Status::InvalidArgument(std::string(kFp32MathEnv) + "=" + std::string(value) +
                                 ": unknown fp32 math mode; use 3xtf32 (the default: split products on tensor "
                                 "cores where the device has them, fp32 FMA elsewhere; docs/kernels-hip.md) or "
                                 "fma (fp32 FMA on the SIMT cores everywhere)");
}

Result<Fp32Math> fp32_math_from_env() {
  const char* v = std::getenv(kFp32MathEnv);
  return parse_fp32_math(v ? std::string_view(v) : std::string_view());
}

std::string fp32_products(Fp32Math mode, bool matrix_units) {
  return mode == Fp32Math::k3xTf32 && matrix_units ? "3xTF32 split on tensor cores" : "fp32 FMA";
}

}  // namespace hipq::kernels
