// DeviceTensor: a tensor together with the Buffer that holds its memory.
//
// Model forwards return DeviceTensors so the caller owns every activation it
// receives; intermediate activations are DeviceTensors that go back to the
// backend's pool when they go out of scope. Move-only (the Buffer is). The
// Backend that allocated it must outlive it.
// Thread safety: none; used by the backend's one thread.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "kernels/backend.h"

namespace hipq::engine {

struct DeviceTensor {
  kernels::Buffer buffer;
  kernels::Tensor t;  // contiguous view over buffer

  // A contiguous tensor of `shape` and `dtype` from the backend's pool
  // (uninitialised). ResourceExhausted when the device is full.
  static Result<DeviceTensor> make(kernels::Backend& backend, kernels::DType dtype,
                                   const std::vector<int64_t>& shape);
  // Copies `n` host floats into a new device tensor of `dtype` (cast on the
  // device when dtype is not f32).
  static Result<DeviceTensor> from_host(kernels::Backend& backend, const float* data,
                                        const std::vector<int64_t>& shape, kernels::DType dtype);
  // Copies host int32 ids into a new i32 device tensor.
  static Result<DeviceTensor> from_host_i32(kernels::Backend& backend, const int32_t* data,
                                            const std::vector<int64_t>& shape);
};

// Copies any float tensor of the backend to a host vector of floats (cast on
// the device first when needed; waits for the copy).
Result<std::vector<float>> to_host_f32(kernels::Backend& backend, const kernels::Tensor& t);

// A contiguous copy of `src` (any strides) in `dtype`.
Result<DeviceTensor> contiguous_copy(kernels::Backend& backend, const kernels::Tensor& src,
                                     kernels::DType dtype);

}  // namespace hipq::engine
