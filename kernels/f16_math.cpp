#include "kernels/f16_math.h"

#include <cstdlib>

namespace hipq::kernels {

bool dot2_f16(bool amd, std::string_view value) {
  if (value == "1") return true;
  if (value == "0") return false;
  return amd && kDot2DefaultOnAmd;
}

bool dot2_f16_from_env(bool amd) {
  const char* v = std::getenv(kDot2Env);
  return dot2_f16(amd, v ? std::string_view(v) : std::string_view());
}

std::string f16_products(bool dot2, bool matrix_units, bool wgmma) {
  if (dot2) return "packed-half dot2 into fp32";
  if (wgmma) return "tensor cores (wgmma), fp32 accumulate";
  if (matrix_units) return "tensor cores (mma.sync), fp32 accumulate";
  return "fp32 FMA";
}

}  // namespace hipq::kernels
