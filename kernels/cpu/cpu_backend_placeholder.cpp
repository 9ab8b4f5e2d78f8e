// Placeholder until the cpu backend lands (replaced by cpu_backend.cpp).
#include "kernels/cpu/cpu_backend.h"
namespace hipq::kernels {
Result<std::unique_ptr<Backend>> make_cpu_backend() { return Status::Unimplemented("cpu backend not built yet"); }
}  // namespace hipq::kernels
