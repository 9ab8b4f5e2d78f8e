// softmax on the cpu over the last dim of x, after scaling by `scale`. With
// `causal`, on the last two dims [R, C], row r keeps columns j <= r + (C - R)
// (the attention convention) and masked entries are 0; a fully masked row is
// all zeros.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {

Status softmax(const Tensor& x, Tensor& y, float scale, bool causal) {
  constexpr std::string_view op = "softmax";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_float(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "y", y, "x", x));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "x", x, causal ? 2 : 1, kMaxDims));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, x.shape_vec()));
  if (x.numel() == 0) return Status::Ok();
  const int64_t C = x.dim(-1);
  const int64_t R = causal ? x.dim(-2) : 1;
  const int64_t rows = x.numel() / C;
  thread_local std::vector<float> x_buf;
  const float* X = as_f32_input(x, y, x_buf);
  const bool direct = y.dtype == DType::kF32;
  float* Y = direct ? static_cast<float*>(y.data) : scratch(2, static_cast<size_t>(y.numel()));
  ThreadPool::global().parallel_for(rows, std::max<int64_t>(1, 8192 / C), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = X + r * C;
      float* yr = Y + r * C;
      const int64_t keep = causal ? std::clamp<int64_t>(r % R + (C - R) + 1, 0, C) : C;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < keep; ++j) mx = std::max(mx, xr[j] * scale);
      double sum = 0.0;
      for (int64_t j = 0; j < keep; ++j) {
        const float e = std::exp(xr[j] * scale - mx);
        yr[j] = e;
        sum += e;
      }
      const float inv = keep > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
      for (int64_t j = 0; j < keep; ++j) yr[j] *= inv;
      for (int64_t j = keep; j < C; ++j) yr[j] = 0.0f;
    }
  });
  if (!direct) scatter_f32(Y, y);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
