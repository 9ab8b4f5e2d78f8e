// diffusers/schedulers/scheduling_heun_discrete.py (HeunDiscreteScheduler.step):
// AUTOMATIC1111's "Heun". Each step but the last is an Euler step to the next
// sigma followed by a second model call there and the trapezoidal correction;
// the last step (to sigma 0) is a plain Euler step. Schedule.timesteps and
// Schedule.sigmas hold one entry per model call (diffusers' own interleaved
// tables): call j is a first-order call for even j and the correction of the
// step begun at j - 1 for odd j.
#include <cmath>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/samplers/step_ops.h"

namespace hipq::engine {

using kernels::Backend;
using kernels::Tensor;
using samplers::check_inputs;
using samplers::StepOps;

Status sample_heun(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                   const Denoiser& denoise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "heun"));
  if (schedule.timesteps.size() % 2 != 1)
    return Status::InvalidArgument("heun: schedule has " + std::to_string(schedule.timesteps.size()) +
                                   " model calls (a Heun schedule has an odd number)");
  if (cfg.clip_sample) return Status::Unimplemented("heun: scheduler config clip_sample = true");
  const int calls = static_cast<int>(schedule.timesteps.size());
  const auto& S = schedule.sigmas;
  // Per call: the input scale sqrt(sigma^2 + 1), sigma, sigma^2 + 1 (sigma of
  // the call: the step's sigma on a first-order call, sigma_next on the second).
  std::vector<float> divisors;
  for (int j = 0; j < calls; ++j) {
    const float sigma = S[static_cast<size_t>(j)];
    divisors.insert(divisors.end(), {std::sqrt(sigma * sigma + 1.0f), sigma, sigma * sigma + 1.0f});
  }
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 6, divisors, 3));
  Tensor &input = ops.tmp(0), &out = ops.tmp(1), &pred = ops.tmp(2), &t = ops.tmp(3);
  Tensor &prev_derivative = ops.tmp(4), &prev_sample = ops.tmp(5);
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  float dt = 0;
  for (int j = 0; j < calls; ++j) {
    const float sigma_call = S[static_cast<size_t>(j)];
    HIPQ_RETURN_IF_ERROR(ops.div(x, j, 0, input));  // scale_model_input: x / sqrt(sigma^2 + 1)
    HIPQ_RETURN_IF_ERROR(denoise(input, {j, calls, schedule.timesteps[static_cast<size_t>(j)], sigma_call}, out));
    // pred_original_sample at sigma_hat (first order) or sigma_next (second): both the call's sigma.
    HIPQ_ASSIGN_OR_RETURN(const Tensor* p, samplers::k_pred_original(ops, "heun", cfg.prediction_type, x, out,
                                                                     sigma_call, j, 2, pred, t));
    if (j % 2 == 0) {
      // derivative = (x - pred) / sigma; dt = sigma_next - sigma; x = x + derivative * dt
      const bool last = j == calls - 1;
      Tensor& derivative = last ? t : prev_derivative;
      dt = S[static_cast<size_t>(j) + 1] - sigma_call;
      HIPQ_RETURN_IF_ERROR(ops.sub(x, *p, derivative));
      HIPQ_RETURN_IF_ERROR(ops.div(derivative, j, 1, derivative));
      if (!last) HIPQ_RETURN_IF_ERROR(ops.copy(x, prev_sample));
      HIPQ_RETURN_IF_ERROR(ops.scale(derivative, dt, t));
      HIPQ_RETURN_IF_ERROR(ops.add(x, t, x));
    } else {
      // derivative = ((x - pred) / sigma_next + prev_derivative) / 2; x = prev_sample + derivative * dt
      HIPQ_RETURN_IF_ERROR(ops.sub(x, *p, t));
      HIPQ_RETURN_IF_ERROR(ops.div(t, j, 1, t));
      HIPQ_RETURN_IF_ERROR(ops.add(prev_derivative, t, t));
      HIPQ_RETURN_IF_ERROR(ops.scale(t, 0.5f, t));
      HIPQ_RETURN_IF_ERROR(ops.scale(t, dt, t));
      HIPQ_RETURN_IF_ERROR(ops.add(prev_sample, t, x));
    }
  }
  return Status::Ok();
}

}  // namespace hipq::engine
