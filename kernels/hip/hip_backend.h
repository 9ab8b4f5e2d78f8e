// The hip backend: HIP kernels for AMD (ROCm) and NVIDIA (kernels/hip/vendors/nvidia).
// This header is plain C++ (no HIP includes) so host code can create one.
#pragma once

#include <memory>

#include "base/result.h"
#include "kernels/backend.h"

namespace hipq::kernels {
// Visible GPUs (0 when the runtime reports none or no driver).
int hip_device_count();
Result<std::unique_ptr<Backend>> make_hip_backend(int device);
}  // namespace hipq::kernels
