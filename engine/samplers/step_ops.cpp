#include "engine/samplers/step_ops.h"

#include <string>
#include <utility>

namespace hipq::engine::samplers {

using kernels::DType;
using kernels::Tensor;

Status check_inputs(const Schedule& s, const Tensor& x, std::string_view who) {
  if (s.timesteps.empty() || s.sigmas.size() != s.timesteps.size() + 1)
    return Status::InvalidArgument(std::string(who) + ": schedule has " + std::to_string(s.timesteps.size()) +
                                   " timesteps and " + std::to_string(s.sigmas.size()) + " sigmas (need n and n+1)");
  if (x.numel() == 0) return Status::InvalidArgument(std::string(who) + ": empty latents");
  if (x.dtype != DType::kF32 || !x.is_contiguous())
    return Status::InvalidArgument(std::string(who) + ": latents must be a contiguous f32 tensor, got " +
                                   x.describe());
  return Status::Ok();
}

Result<StepOps> StepOps::make(kernels::Backend& be, const Tensor& like, int temps, const std::vector<float>& divisors,
                              int per_step) {
  StepOps ops;
  ops.be_ = &be;
  ops.per_step_ = per_step;
  for (int i = 0; i < temps; ++i) {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor t, DeviceTensor::make(be, DType::kF32, like.shape_vec()));
    ops.temps_.push_back(std::move(t));
  }
  if (!divisors.empty()) {
    HIPQ_ASSIGN_OR_RETURN(ops.table_, DeviceTensor::from_host(be, divisors.data(),
                                                             {static_cast<int64_t>(divisors.size())}, DType::kF32));
  }
  return ops;
}

Status StepOps::div(const Tensor& a, int step, int which, Tensor& y) {
  return be_->binary(kernels::BinaryOp::kDiv, a, table_.t.slice(0, int64_t{step} * per_step_ + which, 1), y);
}

}  // namespace hipq::engine::samplers
