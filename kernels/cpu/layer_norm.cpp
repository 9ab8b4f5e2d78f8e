// layer_norm on the cpu, as torch.nn.functional.layer_norm over the last dim:
// mean and biased variance per row in fp64, optional gamma and beta.
#include <cmath>
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {

Status layer_norm(const Tensor& x, const Tensor* gamma, const Tensor* beta, Tensor& y, float eps) {
  constexpr std::string_view op = "layer_norm";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_float(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "y", y, "x", x));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "x", x, 1, kMaxDims));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, x.shape_vec()));
  const int64_t D = x.dim(-1);
  if (gamma) {
    HIPQ_RETURN_IF_ERROR(check_like(op, "gamma", *gamma, "x", x));
    HIPQ_RETURN_IF_ERROR(check_shape(op, "gamma", *gamma, {D}));
  }
  if (beta) {
    HIPQ_RETURN_IF_ERROR(check_like(op, "beta", *beta, "x", x));
    HIPQ_RETURN_IF_ERROR(check_shape(op, "beta", *beta, {D}));
  }
  if (!(eps >= 0.0f)) return invalid(op, "eps must be >= 0");
  if (x.numel() == 0) return Status::Ok();
  const int64_t rows = x.numel() / D;
  thread_local std::vector<float> x_buf, g_buf, b_buf;
  const float* X = as_f32_input(x, y, x_buf);
  const float* gm = gamma ? as_f32(*gamma, g_buf) : nullptr;
  const float* bt = beta ? as_f32(*beta, b_buf) : nullptr;
  const bool direct = y.dtype == DType::kF32;
  float* Y = direct ? static_cast<float*>(y.data) : scratch(2, static_cast<size_t>(y.numel()));
  ThreadPool::global().parallel_for(rows, std::max<int64_t>(1, 8192 / D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = X + r * D;
      double sum = 0.0;
      for (int64_t i = 0; i < D; ++i) sum += xr[i];
      const double mean = sum / static_cast<double>(D);
      double sq = 0.0;
      for (int64_t i = 0; i < D; ++i) {
        const double d = xr[i] - mean;
        sq += d * d;
      }
      const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(D) + static_cast<double>(eps));
      float* yr = Y + r * D;
      for (int64_t i = 0; i < D; ++i) {
        double v = (xr[i] - mean) * rstd;
        if (gm) v *= gm[i];
        if (bt) v += bt[i];
        yr[i] = static_cast<float>(v);
      }
    }
  });
  if (!direct) scatter_f32(Y, y);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
