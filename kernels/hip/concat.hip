// concat: y = cat(xs, dim). Each input is a strided copy into its slice of y
// (copy.hip), so inputs may be strided and of any float dtype.
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {

Status hip_concat(HipContext& ctx, std::span<const Tensor> xs, int dim, Tensor& y) {
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "concat", "y"));
  if (xs.empty()) return Status::InvalidArgument("concat: no inputs");
  if (dim < 0) dim += y.ndim;
  if (dim < 0 || dim >= y.ndim)
    return Status::InvalidArgument("concat: dim " + std::to_string(dim) + " out of range for y " + y.describe());
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    HIPQ_RETURN_IF_ERROR(require_device_float(x, "concat", "input"));
    bool ok = x.ndim == y.ndim;
    for (int d = 0; ok && d < y.ndim; ++d) ok = d == dim || x.shape[d] == y.shape[d];
    if (!ok) return shape_mismatch("concat", ("input " + std::to_string(i) + " differs from y outside dim").c_str(), x, y);
    total += x.shape[dim];
  }
  if (total != y.shape[dim])
    return Status::InvalidArgument("concat: inputs sum to " + std::to_string(total) + " along dim " +
                                   std::to_string(dim) + " but y " + y.describe() + " has " +
                                   std::to_string(y.shape[dim]));
  int64_t offset = 0;
  for (const Tensor& x : xs) {
    if (x.shape[dim] > 0) {
      Tensor part = y.slice(dim, offset, x.shape[dim]);
      HIPQ_RETURN_IF_ERROR(hip_copy(ctx, x, part));
    }
    offset += x.shape[dim];
  }
  return Status::Ok();
}

}  // namespace hipq::kernels
