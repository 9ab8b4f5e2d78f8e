// scale on the cpu: y = alpha * x + beta elementwise (fp32 arithmetic).
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {

Status scale(const Tensor& x, Tensor& y, float alpha, float beta) {
  constexpr std::string_view op = "scale";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_float(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "y", y, "x", x));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, x.shape_vec()));
  const int64_t n = x.numel();
  if (n == 0) return Status::Ok();
  float* buf = scratch(0, static_cast<size_t>(n));
  gather_f32(x, buf);
  ThreadPool::global().parallel_for(n, 32768, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) buf[i] = alpha * buf[i] + beta;
  });
  scatter_f32(buf, y);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
