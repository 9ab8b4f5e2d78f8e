// The cpu backend: plain C++ reference implementations of every op.
#pragma once

#include <memory>

#include "base/result.h"
#include "kernels/backend.h"

namespace hipq::kernels {
Result<std::unique_ptr<Backend>> make_cpu_backend();
}  // namespace hipq::kernels
