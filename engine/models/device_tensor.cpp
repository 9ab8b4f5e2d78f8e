#include "engine/models/device_tensor.h"

#include <string>

namespace hipq::engine {

using kernels::DType;
using kernels::Location;
using kernels::Tensor;

Result<DeviceTensor> DeviceTensor::make(kernels::Backend& backend, DType dtype,
                                        const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return Status::InvalidArgument("DeviceTensor::make: negative dimension in shape");
    n *= d;
  }
  size_t bytes = static_cast<size_t>(n) * kernels::dtype_size(dtype);
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer buf, backend.allocate(bytes == 0 ? 1 : bytes));
  DeviceTensor out;
  out.t = buf.tensor(dtype, shape);
  out.buffer = std::move(buf);
  return out;
}

Result<DeviceTensor> DeviceTensor::from_host(kernels::Backend& backend, const float* data,
                                             const std::vector<int64_t>& shape, DType dtype) {
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor f32, make(backend, DType::kF32, shape));
  HIPQ_RETURN_IF_ERROR(backend.copy_to_device(data, f32.t.data, f32.t.nbytes()));
  if (dtype == DType::kF32) return f32;
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor out, make(backend, dtype, shape));
  HIPQ_RETURN_IF_ERROR(backend.copy(f32.t, out.t));
  return out;
}

Result<DeviceTensor> DeviceTensor::from_host_i32(kernels::Backend& backend, const int32_t* data,
                                                 const std::vector<int64_t>& shape) {
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor out, make(backend, DType::kI32, shape));
  HIPQ_RETURN_IF_ERROR(backend.copy_to_device(data, out.t.data, out.t.nbytes()));
  return out;
}

Result<std::vector<float>> to_host_f32(kernels::Backend& backend, const Tensor& t) {
  if (!kernels::is_float(t.dtype) || t.dtype == DType::kF64)
    return Status::InvalidArgument("to_host_f32: tensor " + t.describe() + " is not f32/f16/bf16");
  std::vector<float> host(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::kF32 && t.is_contiguous()) {
    HIPQ_RETURN_IF_ERROR(backend.copy_to_host(t.data, host.data(), t.nbytes()));
    return host;
  }
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor f32, contiguous_copy(backend, t, DType::kF32));
  HIPQ_RETURN_IF_ERROR(backend.copy_to_host(f32.t.data, host.data(), f32.t.nbytes()));
  return host;
}

Result<DeviceTensor> contiguous_copy(kernels::Backend& backend, const Tensor& src, DType dtype) {
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor out, DeviceTensor::make(backend, dtype, src.shape_vec()));
  HIPQ_RETURN_IF_ERROR(backend.copy(src, out.t));
  return out;
}

}  // namespace hipq::engine
