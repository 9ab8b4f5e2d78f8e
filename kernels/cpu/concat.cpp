// concat on the cpu: y = cat(xs, dim); every input matches y except along dim.
#include <string>
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"

namespace hipq::kernels::cpu {

Status concat(std::span<const Tensor> xs, int dim, Tensor& y) {
  constexpr std::string_view op = "concat";
  if (xs.empty()) return invalid(op, "no inputs");
  HIPQ_RETURN_IF_ERROR(check_host(op, "y", y));
  HIPQ_RETURN_IF_ERROR(check_float(op, "y", y));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  if (dim < 0) dim += y.ndim;
  if (dim < 0 || dim >= y.ndim)
    return invalid(op, "dim " + std::to_string(dim) + " is out of range for 'y' " + y.describe());
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const std::string name = "xs[" + std::to_string(i) + "]";
    HIPQ_RETURN_IF_ERROR(check_like(op, name, xs[i], "y", y));
    HIPQ_RETURN_IF_ERROR(check_ndim(op, name, xs[i], y.ndim, y.ndim));
    std::vector<int64_t> want = y.shape_vec();
    want[static_cast<size_t>(dim)] = xs[i].shape[dim];
    HIPQ_RETURN_IF_ERROR(check_shape(op, name, xs[i], want));
    total += xs[i].shape[dim];
  }
  if (total != y.shape[dim])
    return invalid(op, "inputs add up to " + std::to_string(total) + " along dim " + std::to_string(dim) +
                           " but 'y' " + y.describe() + " has " + std::to_string(y.shape[dim]));
  // Gather everything before writing so an input that aliases y reads intact.
  std::vector<std::vector<float>> parts(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    parts[i].resize(static_cast<size_t>(xs[i].numel()));
    gather_f32(xs[i], parts[i].data());
  }
  int64_t start = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t len = xs[i].shape[dim];
    scatter_f32(parts[i].data(), y.slice(dim, start, len));
    start += len;
  }
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
