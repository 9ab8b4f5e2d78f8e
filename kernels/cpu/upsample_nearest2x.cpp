// upsample_nearest2x on the cpu: [N, C, H, W] -> [N, C, 2H, 2W], each input
// pixel copied to a 2x2 block (F.interpolate(scale_factor=2, mode="nearest")).
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {

Status upsample_nearest2x(const Tensor& x, Tensor& y) {
  constexpr std::string_view op = "upsample_nearest2x";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_float(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_like(op, "y", y, "x", x));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "x", x, 4, 4));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, {N, C, 2 * H, 2 * W}));
  if (y.numel() == 0) return Status::Ok();
  thread_local std::vector<float> x_buf;
  const float* X = as_f32(x, x_buf);
  if (X == x.data && overlaps(x, y)) {
    x_buf.assign(X, X + x.numel());
    X = x_buf.data();
  }
  float* Y = scratch(0, static_cast<size_t>(y.numel()));
  ThreadPool::global().parallel_for(N * C * H, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = X + r * W;
      float* y0 = Y + r * 4 * W;  // rows 2h and 2h+1 of the same plane
      float* y1 = y0 + 2 * W;
      for (int64_t i = 0; i < W; ++i) y0[2 * i] = y0[2 * i + 1] = y1[2 * i] = y1[2 * i + 1] = xr[i];
    }
  });
  scatter_f32(Y, y);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
