// fill on the cpu: every element of y (any strides) = value, rounded once to
// y's dtype.
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"

namespace hipq::kernels::cpu {

Status fill(Tensor& y, float value) {
  constexpr std::string_view op = "fill";
  HIPQ_RETURN_IF_ERROR(check_host(op, "y", y));
  void* data = y.data;
  const DType dt = y.dtype;
  for_each_offset(y.ndim, y.shape.data(), y.stride.data(),
                  [&](int64_t, int64_t off) { store_from_f32(data, dt, off, value); });
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
