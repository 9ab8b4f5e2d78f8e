#include "kernels/cpu/op_checks.h"

namespace hipq::kernels::cpu {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Status invalid(std::string_view op, std::string_view message) {
  return Status::InvalidArgument(std::string(op) + ": " + std::string(message));
}

static std::string operand(std::string_view name, const Tensor& t) {
  return "operand '" + std::string(name) + "' " + t.describe();
}

Status check_view(std::string_view op, std::string_view name, const Tensor& t) {
  if (t.ndim < 0 || t.ndim > kMaxDims)
    return invalid(op, "operand '" + std::string(name) + "' has " + std::to_string(t.ndim) +
                           " dims (1.." + std::to_string(kMaxDims) + " supported)");
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] < 0) return invalid(op, operand(name, t) + " has a negative size");
  return Status::Ok();
}

Status check_host(std::string_view op, std::string_view name, const Tensor& t) {
  HIPQ_RETURN_IF_ERROR(check_view(op, name, t));
  if (t.location != Location::kHost)
    return invalid(op, operand(name, t) + " is device memory; the cpu backend works on host tensors");
  if (t.data == nullptr && t.numel() > 0) return invalid(op, operand(name, t) + " has no data");
  return Status::Ok();
}

Status check_float(std::string_view op, std::string_view name, const Tensor& t) {
  if (!is_float(t.dtype))
    return invalid(op, operand(name, t) + " must be a floating dtype (f32, f16, bf16, f64)");
  return Status::Ok();
}

Status check_like(std::string_view op, std::string_view name, const Tensor& t,
                  std::string_view ref_name, const Tensor& ref) {
  HIPQ_RETURN_IF_ERROR(check_host(op, name, t));
  HIPQ_RETURN_IF_ERROR(check_float(op, name, t));
  if (t.dtype != ref.dtype)
    return invalid(op, operand(name, t) + " has dtype " + std::string(dtype_name(t.dtype)) +
                           " but '" + std::string(ref_name) + "' " + ref.describe() + " has " +
                           std::string(dtype_name(ref.dtype)) + "; convert with copy() first");
  return Status::Ok();
}

Status check_contiguous(std::string_view op, std::string_view name, const Tensor& t) {
  if (!t.is_contiguous())
    return invalid(op, operand(name, t) + " must be contiguous");
  return Status::Ok();
}

Status check_ndim(std::string_view op, std::string_view name, const Tensor& t, int min_ndim,
                  int max_ndim) {
  if (t.ndim < min_ndim || t.ndim > max_ndim) {
    std::string want = min_ndim == max_ndim ? std::to_string(min_ndim)
                                            : std::to_string(min_ndim) + ".." + std::to_string(max_ndim);
    return invalid(op, operand(name, t) + " must have " + want + " dims");
  }
  return Status::Ok();
}

Status check_shape(std::string_view op, std::string_view name, const Tensor& t,
                   const std::vector<int64_t>& expected) {
  if (t.shape_vec() != expected)
    return invalid(op, operand(name, t) + " has the wrong shape; expected " + shape_str(expected));
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
