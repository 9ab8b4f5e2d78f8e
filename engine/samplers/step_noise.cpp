#include "engine/samplers/step_noise.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace hipq::engine::samplers {

using kernels::DType;
using kernels::Tensor;

Result<StepNoise> StepNoise::make(kernels::Backend& be, const std::vector<TorchGenerator*>& generators, DType dtype,
                                  const Tensor& like, int steps, int64_t chunk_bytes) {
  if (generators.empty() || std::find(generators.begin(), generators.end(), nullptr) != generators.end())
    return Status::InvalidArgument("this sampler draws noise every step and needs the job's generator");
  const int64_t count = static_cast<int64_t>(generators.size());
  if (count > 1 && (like.ndim == 0 || like.dim(0) % count != 0))
    return Status::InvalidArgument("step noise: " + std::to_string(count) + " generators for latents " +
                                   like.describe() + " (one per latent of the batch)");
  StepNoise n;
  n.be_ = &be;
  n.gens_ = generators;
  n.dtype_ = dtype;
  n.shape_ = like.shape_vec();
  n.numel_ = like.numel();
  n.steps_left_ = std::max(steps, 0);
  const int64_t step_bytes = std::max<int64_t>(n.numel_ * 4, 1);
  n.chunk_steps_ = static_cast<int>(std::clamp<int64_t>(chunk_bytes / step_bytes, 1, std::max(steps, 1)));
  return n;
}

Status StepNoise::fill() {
  const int count = std::min(chunk_steps_, steps_left_);
  if (count <= 0) return Status::Internal("StepNoise: more steps asked for than the sampler announced");
  std::vector<float> host;
  host.reserve(static_cast<size_t>(count * numel_));
  const int64_t share = numel_ / static_cast<int64_t>(gens_.size());
  for (int i = 0; i < count; ++i) {
    for (TorchGenerator* g : gens_) {
      const std::vector<float> draw = g->randn(share, dtype_);
      host.insert(host.end(), draw.begin(), draw.end());
    }
  }
  std::vector<int64_t> shape = {count};
  shape.insert(shape.end(), shape_.begin(), shape_.end());
  if (chunk_.t.numel() == static_cast<int64_t>(host.size())) {
    // The steps queued so far may still read the chunk being overwritten.
    HIPQ_RETURN_IF_ERROR(be_->synchronize());
    HIPQ_RETURN_IF_ERROR(be_->copy_to_device(host.data(), chunk_.t.data, host.size() * sizeof(float)));
  } else {
    chunk_ = DeviceTensor{};
    HIPQ_ASSIGN_OR_RETURN(chunk_, DeviceTensor::from_host(*be_, host.data(), shape, DType::kF32));
  }
  steps_left_ -= count;
  in_chunk_ = count;
  used_ = 0;
  return Status::Ok();
}

Result<Tensor> StepNoise::next() {
  if (used_ == in_chunk_) HIPQ_RETURN_IF_ERROR(fill());
  return chunk_.t.slice(0, used_++, 1).reshape(shape_);
}

}  // namespace hipq::engine::samplers
