// binary on the cpu: y = a (+ - * /) b, with b broadcast to a's shape by numpy
// rules (b's dims right-aligned; each is 1 or equal to a's).
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"

namespace hipq::kernels::cpu {

Status binary(BinaryOp f, const Tensor& a, const Tensor& b, Tensor& y) {
  constexpr std::string_view op = "binary";
  HIPQ_RETURN_IF_ERROR(check_host(op, "a", a));
  HIPQ_RETURN_IF_ERROR(check_float(op, "a", a));
  HIPQ_RETURN_IF_ERROR(check_like(op, "b", b, "a", a));
  HIPQ_RETURN_IF_ERROR(check_like(op, "y", y, "a", a));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, a.shape_vec()));
  if (static_cast<int>(f) > static_cast<int>(BinaryOp::kDiv))
    return invalid(op, "unknown BinaryOp " + std::to_string(static_cast<int>(f)));
  if (b.ndim > a.ndim)
    return invalid(op, "operand 'b' " + b.describe() + " has more dims than 'a' " + a.describe() +
                           "; b must broadcast to a's shape");
  // b as a view of a's shape, stride 0 where it broadcasts.
  Tensor bb = a;
  bb.data = b.data;
  bb.dtype = b.dtype;
  const int lead = a.ndim - b.ndim;
  for (int d = 0; d < a.ndim; ++d) {
    if (d < lead) {
      bb.stride[d] = 0;
      continue;
    }
    const int64_t bs = b.shape[d - lead];
    if (bs == a.shape[d]) {
      bb.stride[d] = b.stride[d - lead];
    } else if (bs == 1) {
      bb.stride[d] = 0;
    } else {
      return invalid(op, "operand 'b' " + b.describe() + " does not broadcast to 'a' " + a.describe() +
                             " (dim " + std::to_string(d - lead) + ")");
    }
  }
  elementwise<2>({a, bb}, y, [f](float* const* buf, int64_t n) {
    float* A = buf[0];
    const float* B = buf[1];
    switch (f) {
      case BinaryOp::kAdd: for (int64_t i = 0; i < n; ++i) A[i] += B[i]; break;
      case BinaryOp::kSub: for (int64_t i = 0; i < n; ++i) A[i] -= B[i]; break;
      case BinaryOp::kMul: for (int64_t i = 0; i < n; ++i) A[i] *= B[i]; break;
      case BinaryOp::kDiv: for (int64_t i = 0; i < n; ++i) A[i] /= B[i]; break;
    }
  });
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
