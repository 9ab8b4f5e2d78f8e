// scale on the cpu: y = alpha * x + beta elementwise (fp32 arithmetic).
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"

namespace hipq::kernels::cpu {

Status scale(const Tensor& x, Tensor& y, float alpha, float beta) {
  constexpr std::string_view op = "scale";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_float(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "y", y, "x", x));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, x.shape_vec()));
  elementwise<1>({x}, y, [alpha, beta](float* const* b, int64_t n) {
    float* v = b[0];
    for (int64_t i = 0; i < n; ++i) v[i] = alpha * v[i] + beta;
  });
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
