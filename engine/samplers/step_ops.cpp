#include "engine/samplers/step_ops.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace hipq::engine::samplers {

using kernels::DType;
using kernels::Tensor;

AlphaSigma alpha_sigma(float s) {
  const float alpha = 1.0f / std::sqrt(s * s + 1.0f);
  const float sigma = s * alpha;
  return {alpha, sigma, std::log(alpha) - std::log(sigma)};
}

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

Status StepOps::dpm_x0(const std::string& prediction_type, const AlphaSigma& cur, int step, int alpha_which,
                      const Tensor& x, const Tensor& out, Tensor& t1, Tensor& t2, Tensor& x0) {
  if (prediction_type == "epsilon") {
    HIPQ_RETURN_IF_ERROR(scale(out, cur.sigma, t1));
    HIPQ_RETURN_IF_ERROR(sub(x, t1, t1));
    return div(t1, step, alpha_which, x0);
  }
  if (prediction_type == "v_prediction") {
    HIPQ_RETURN_IF_ERROR(scale(x, cur.alpha, t1));
    HIPQ_RETURN_IF_ERROR(scale(out, cur.sigma, t2));
    return sub(t1, t2, x0);
  }
  return copy(out, x0);
}

Status StepOps::div(const Tensor& a, int step, int which, Tensor& y) {
  return be_->binary(kernels::BinaryOp::kDiv, a, table_.t.slice(0, int64_t{step} * per_step_ + which, 1), y);
}

Result<const Tensor*> k_pred_original(StepOps& ops, std::string_view who, const std::string& prediction,
                                      const Tensor& x, const Tensor& out, float sigma, int step, int which,
                                      Tensor& pred, Tensor& tmp) {
  if (prediction == "epsilon") {
    HIPQ_RETURN_IF_ERROR(ops.scale(out, sigma, tmp));
    HIPQ_RETURN_IF_ERROR(ops.sub(x, tmp, pred));
    return &pred;
  }
  if (prediction == "v_prediction") {
    HIPQ_RETURN_IF_ERROR(ops.scale(out, -sigma / std::sqrt(sigma * sigma + 1.0f), tmp));
    HIPQ_RETURN_IF_ERROR(ops.div(x, step, which, pred));
    HIPQ_RETURN_IF_ERROR(ops.add(tmp, pred, pred));
    return &pred;
  }
  if (prediction == "sample") return &out;
  return Status::InvalidArgument(std::string(who) + ": prediction_type \"" + prediction +
                                 "\" is not one of epsilon, v_prediction, sample");
}

Status clamp_on_host(kernels::Backend& be, Tensor& x0, float range) {
  HIPQ_ASSIGN_OR_RETURN(std::vector<float> host, to_host_f32(be, x0));
  for (float& v : host) v = std::clamp(v, -range, range);
  return be.copy_to_device(host.data(), x0.data, x0.nbytes());
}

}  // namespace hipq::engine::samplers
