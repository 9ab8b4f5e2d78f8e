// embedding on the cpu: y[i, :] = table[ids[i], :]; ids i32/i64 of any shape,
// table [V, D], y [ids..., D]. An id outside [0, V) is InvalidArgument naming
// its position and value (nothing is written then).
#include <algorithm>
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"

namespace hipq::kernels::cpu {

Status embedding(const Tensor& ids, const Tensor& table, Tensor& y) {
  constexpr std::string_view op = "embedding";
  HIPQ_RETURN_IF_ERROR(check_host(op, "ids", ids));
  HIPQ_RETURN_IF_ERROR(check_host(op, "table", table));
  HIPQ_RETURN_IF_ERROR(check_float(op, "table", table));
  HIPQ_RETURN_IF_ERROR(check_like(op, "y", y, "table", table));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  if (ids.dtype != DType::kI32 && ids.dtype != DType::kI64)
    return invalid(op, "operand 'ids' " + ids.describe() + " must be i32 or i64");
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "table", table, 2, 2));
  if (ids.ndim + 1 > kMaxDims) return invalid(op, "operand 'ids' " + ids.describe() + " has too many dims");
  const int64_t V = table.shape[0], D = table.shape[1];
  std::vector<int64_t> want = ids.shape_vec();
  want.push_back(D);
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, want));
  const int64_t n = ids.numel();
  std::vector<int64_t> idx(static_cast<size_t>(n));
  const bool i64 = ids.dtype == DType::kI64;
  for_each_offset(ids.ndim, ids.shape.data(), ids.stride.data(), [&](int64_t i, int64_t off) {
    idx[static_cast<size_t>(i)] = i64 ? static_cast<const int64_t*>(ids.data)[off]
                                      : static_cast<const int32_t*>(ids.data)[off];
  });
  for (int64_t i = 0; i < n; ++i)
    if (idx[static_cast<size_t>(i)] < 0 || idx[static_cast<size_t>(i)] >= V)
      return invalid(op, "ids[" + std::to_string(i) + "] = " + std::to_string(idx[static_cast<size_t>(i)]) +
                             " is outside the table " + table.describe() + " (0.." + std::to_string(V - 1) + ")");
  if (y.numel() == 0) return Status::Ok();
  thread_local std::vector<float> t_buf;
  const float* T = as_f32(table, t_buf);
  std::vector<float> out(static_cast<size_t>(y.numel()));
  for (int64_t i = 0; i < n; ++i) {
    const float* src = T + idx[static_cast<size_t>(i)] * D;
    std::copy(src, src + D, out.data() + i * D);
  }
  scatter_f32(out.data(), y);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
