// unary on the cpu: y = f(x) elementwise for gelu (erf), gelu_tanh, silu,
// quick_gelu, neg, exp (definitions in activations.h).
#include <cmath>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"

namespace hipq::kernels::cpu {

Status unary(UnaryOp f, const Tensor& x, Tensor& y) {
  constexpr std::string_view op = "unary";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_float(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "y", y, "x", x));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, x.shape_vec()));
  if (static_cast<int>(f) > static_cast<int>(UnaryOp::kExp))
    return invalid(op, "unknown UnaryOp " + std::to_string(static_cast<int>(f)));
  elementwise<1>({x}, y, [f](float* const* b, int64_t n) {
    float* v = b[0];
    switch (f) {
      case UnaryOp::kGelu: for (int64_t i = 0; i < n; ++i) v[i] = gelu_erf(v[i]); break;
      case UnaryOp::kGeluTanh: for (int64_t i = 0; i < n; ++i) v[i] = gelu_tanh(v[i]); break;
      case UnaryOp::kSilu: for (int64_t i = 0; i < n; ++i) v[i] = silu(v[i]); break;
      case UnaryOp::kQuickGelu: for (int64_t i = 0; i < n; ++i) v[i] = quick_gelu(v[i]); break;
      case UnaryOp::kNeg: for (int64_t i = 0; i < n; ++i) v[i] = -v[i]; break;
      case UnaryOp::kExp: for (int64_t i = 0; i < n; ++i) v[i] = std::exp(v[i]); break;
    }
  });
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
