// group_norm on the cpu, as torch.nn.GroupNorm: per (sample, group) mean and
// biased variance in fp64, y = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c],
// then SiLU when fused.
#include <cmath>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {

Status group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                  const GroupNormOptions& o) {
  constexpr std::string_view op = "group_norm";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_float(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "gamma", gamma, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "beta", beta, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "y", y, "x", x));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "x", x, 2, kMaxDims));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, x.shape_vec()));
  const int64_t N = x.shape[0], C = x.shape[1];
  HIPQ_RETURN_IF_ERROR(check_shape(op, "gamma", gamma, {C}));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "beta", beta, {C}));
  if (o.groups < 1 || C % o.groups != 0)
    return invalid(op, "groups = " + std::to_string(o.groups) + " does not divide the " +
                           std::to_string(C) + " channels of 'x' " + x.describe());
  if (!(o.eps >= 0.0f)) return invalid(op, "eps must be >= 0");
  if (x.numel() == 0) return Status::Ok();
  const int64_t G = o.groups, cpg = C / G;
  const int64_t spatial = x.numel() / (N * C);
  const int64_t group_size = cpg * spatial;

  thread_local std::vector<float> x_buf, g_buf, b_buf;
  const float* X = as_f32_input(x, y, x_buf);
  const float* gm = as_f32(gamma, g_buf);
  const float* bt = as_f32(beta, b_buf);
  const bool direct = y.dtype == DType::kF32;
  float* Y = direct ? static_cast<float*>(y.data) : scratch(2, static_cast<size_t>(y.numel()));
  ThreadPool::global().parallel_for(N * G, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t ng = i0; ng < i1; ++ng) {
      const float* xg = X + ng * group_size;
      double sum = 0.0;
      for (int64_t i = 0; i < group_size; ++i) sum += xg[i];
      const double mean = sum / static_cast<double>(group_size);
      double sq = 0.0;
      for (int64_t i = 0; i < group_size; ++i) {
        const double d = xg[i] - mean;
        sq += d * d;
      }
      const double var = sq / static_cast<double>(group_size);
      const double rstd = 1.0 / std::sqrt(var + static_cast<double>(o.eps));
      const int64_t c0 = (ng % G) * cpg;
      float* yg = Y + ng * group_size;
      for (int64_t c = 0; c < cpg; ++c) {
        const float a = static_cast<float>(rstd * gm[c0 + c]);
        const float b = static_cast<float>(bt[c0 + c] - mean * rstd * gm[c0 + c]);
        const float* xc = xg + c * spatial;
        float* yc = yg + c * spatial;
        for (int64_t i = 0; i < spatial; ++i) {
          const float v = xc[i] * a + b;
          yc[i] = o.fuse_silu ? silu(v) : v;
        }
      }
    }
  });
  if (!direct) scatter_f32(Y, y);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
