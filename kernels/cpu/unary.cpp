// unary on the cpu: y = f(x) elementwise for gelu (erf), gelu_tanh, silu,
// quick_gelu, neg, exp (definitions in activations.h).
#include <cmath>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

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
  const int64_t n = x.numel();
  if (n == 0) return Status::Ok();
  float* buf = scratch(0, static_cast<size_t>(n));
  gather_f32(x, buf);
  ThreadPool::global().parallel_for(n, 16384, [&](int64_t b, int64_t e) {
    switch (f) {
      case UnaryOp::kGelu: for (int64_t i = b; i < e; ++i) buf[i] = gelu_erf(buf[i]); break;
      case UnaryOp::kGeluTanh: for (int64_t i = b; i < e; ++i) buf[i] = gelu_tanh(buf[i]); break;
      case UnaryOp::kSilu: for (int64_t i = b; i < e; ++i) buf[i] = silu(buf[i]); break;
      case UnaryOp::kQuickGelu: for (int64_t i = b; i < e; ++i) buf[i] = quick_gelu(buf[i]); break;
      case UnaryOp::kNeg: for (int64_t i = b; i < e; ++i) buf[i] = -buf[i]; break;
      case UnaryOp::kExp: for (int64_t i = b; i < e; ++i) buf[i] = std::exp(buf[i]); break;
    }
  });
  scatter_f32(buf, y);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
