#include "kernels/backend.h"

#include <cstdlib>
#include <string>

#include "base/byte_size.h"
#include "kernels/cpu/cpu_backend.h"
#if HIPQ_HAVE_GPU
#include "kernels/hip/hip_backend.h"
#endif

namespace hipq::kernels {

Buffer::~Buffer() {
  if (owner_ && data_) owner_->release(data_, bytes_);
}

Buffer::Buffer(Buffer&& o) noexcept : owner_(o.owner_), data_(o.data_), bytes_(o.bytes_) {
  o.owner_ = nullptr;
  o.data_ = nullptr;
  o.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (owner_ && data_) owner_->release(data_, bytes_);
    owner_ = o.owner_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.owner_ = nullptr;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

Tensor Buffer::tensor(DType dtype, const std::vector<int64_t>& shape) const {
  Location loc = (owner_ && owner_->info().name != "cpu") ? Location::kDevice : Location::kHost;
  Tensor t = Tensor::contiguous(data_, dtype, shape, loc);
  HIPQ_CHECK(t.nbytes() <= bytes_);
  return t;
}

std::vector<std::string> available_backends() {
#if HIPQ_HAVE_GPU
  return {"cpu", "hip"};
#else
  return {"cpu"};
#endif
}

int gpu_device_count() {
#if HIPQ_HAVE_GPU
  return hip_device_count();
#else
  return 0;
#endif
}

Status check_matmul_options(const MatmulOptions& o, int64_t N, const Tensor& b) {
  if (o.geglu_pairs && (N % 2 != 0 || o.residual || o.activation != Activation::kNone))
    return Status::InvalidArgument("matmul: geglu_pairs needs an even N (got " + std::to_string(N) +
                                   "), no residual and no activation; b " + b.describe());
  return Status::Ok();
}

namespace {

Result<std::unique_ptr<Backend>> with_env_limit(Result<std::unique_ptr<Backend>> made) {
  if (!made.ok()) return made;
  const char* env = std::getenv(kDeviceMemoryLimitEnv);
  if (env == nullptr || *env == '\0') return made;
  auto limit = parse_byte_size(env);
  if (!limit.ok()) return limit.status().WithContext(kDeviceMemoryLimitEnv);
  HIPQ_RETURN_IF_ERROR((*made)->set_memory_limit(*limit));
  return made;
}

}  // namespace

Result<std::unique_ptr<Backend>> make_backend(std::string_view name, int device) {
  if (name == "cpu") return with_env_limit(make_cpu_backend());
  if (name == "hip") {
#if HIPQ_HAVE_GPU
    return with_env_limit(make_hip_backend(device));
#else
    return Status::NotFound("backend 'hip' is not built into this binary (configure with -DHIPQ_GPU=amd or -DHIPQ_GPU=nvidia)");
#endif
  }
  return Status::NotFound("unknown backend '" + std::string(name) + "' (available: cpu" +
#if HIPQ_HAVE_GPU
                          std::string(", hip") +
#else
                          std::string() +
#endif
                          ")");
}

}  // namespace hipq::kernels
