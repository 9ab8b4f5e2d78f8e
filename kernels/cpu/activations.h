// Scalar activation functions of the cpu ops, with PyTorch's definitions:
//   gelu        0.5 x (1 + erf(x / sqrt 2))              (nn.GELU())
//   gelu_tanh   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (approximate="tanh")
//   silu        x sigmoid(x)
//   quick_gelu  x sigmoid(1.702 x)                        (CLIP's QuickGELU)
// Thread safety: pure functions.
#pragma once

#include <cmath>

#include "kernels/backend.h"

namespace hipq::kernels::cpu {

inline float gelu_erf(float x) {
  return static_cast<float>(0.5 * x * (1.0 + std::erf(static_cast<double>(x) * 0.70710678118654752440)));
}
inline float gelu_tanh(float x) {
  const double xd = x;
  return static_cast<float>(0.5 * xd * (1.0 + std::tanh(0.79788456080286535588 * (xd + 0.044715 * xd * xd * xd))));
}
inline float sigmoid(float x) { return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x)))); }
inline float silu(float x) { return x * sigmoid(x); }
inline float quick_gelu(float x) { return x * sigmoid(1.702f * x); }

inline float apply_activation(Activation a, float x) {
  switch (a) {
    case Activation::kNone: return x;
    case Activation::kGelu: return gelu_erf(x);
    case Activation::kGeluTanh: return gelu_tanh(x);
    case Activation::kSilu: return silu(x);
    case Activation::kQuickGelu: return quick_gelu(x);
  }
  return x;
}

}  // namespace hipq::kernels::cpu
