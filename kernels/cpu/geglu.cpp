// geglu on the cpu, as diffusers' GEGLU after its projection:
// x [..., 2F] -> y [..., F] = x[..., :F] * gelu(x[..., F:]) (erf gelu).
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {

Status geglu(const Tensor& x, Tensor& y) {
  constexpr std::string_view op = "geglu";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_float(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "y", y, "x", x));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "x", x, 1, kMaxDims));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  if (x.dim(-1) % 2 != 0)
    return invalid(op, "the last dim of 'x' " + x.describe() + " must be even (2F)");
  const int64_t F = x.dim(-1) / 2;
  std::vector<int64_t> want = x.shape_vec();
  want.back() = F;
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, want));
  if (y.numel() == 0) return Status::Ok();
  const int64_t rows = y.numel() / F;
  thread_local std::vector<float> x_buf;
  const float* X = as_f32(x, x_buf);
  float* Y = scratch(0, static_cast<size_t>(y.numel()));
  ThreadPool::global().parallel_for(rows, std::max<int64_t>(1, 8192 / F), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = X + r * 2 * F;
      float* yr = Y + r * F;
      for (int64_t i = 0; i < F; ++i) yr[i] = xr[i] * gelu_erf(xr[F + i]);
    }
  });
  scatter_f32(Y, y);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
