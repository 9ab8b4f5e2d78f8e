// diffusers/schedulers/scheduling_k_dpm_2_discrete.py (KDPM2DiscreteScheduler.step,
// AUTOMATIC1111's "DPM2") and scheduling_k_dpm_2_ancestral_discrete.py
// (KDPM2AncestralDiscreteScheduler.step, "DPM2 a").
//
// Each step but the last takes an Euler step from s_k to an interpolated sigma
// i_k, calls the model there and takes the step from s_k with that derivative
// (DPM-Solver-2's midpoint): to s_{k+1} (KDPM2), or to sigma_down_k plus
// sigma_up_k times fresh noise (ancestral). The last step is an Euler step to
// 0. Schedule.sigmas holds the sigma of each model call, then 0:
// [s_0, i_0, s_1, i_1, ..., s_{n-1}, 0] (engine/scheduler.cpp), so call j is a
// first-order call at s = S[j] heading for i = S[j + 1] when j is even, and the
// second call of the step from S[j - 1] at i = S[j] when j is odd (the step
// ends at S[j + 1], whose sigma_up / sigma_down the ancestral step uses).
#include <cmath>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/samplers/step_noise.h"
#include "engine/samplers/step_ops.h"

namespace hipq::engine {

using kernels::Backend;
using kernels::Tensor;
using samplers::check_inputs;
using samplers::StepOps;

Status sample_dpm2(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                   const Denoiser& denoise, const StepNoiseSource* noise) {
  const bool ancestral = noise != nullptr;
  const char* who = ancestral ? "dpm2_ancestral" : "dpm2";
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, who));
  if (schedule.timesteps.size() % 2 != 1)
    return Status::InvalidArgument(std::string(who) + ": schedule has " + std::to_string(schedule.timesteps.size()) +
                                   " model calls (a DPM2 schedule has an odd number)");
  if (cfg.prediction_type == "sample")
    return Status::Unimplemented(std::string(who) +
                                 ": prediction_type \"sample\" (diffusers does not implement it either)");
  const int calls = static_cast<int>(schedule.timesteps.size());
  const auto& S = schedule.sigmas;
  // Per call: the input scale sqrt(sigma^2 + 1), the call's sigma (the
  // derivative's divisor: sigma_hat first, sigma_interpol second), sigma^2 + 1.
  std::vector<float> divisors;
  for (int j = 0; j < calls; ++j) {
    const float sigma = S[static_cast<size_t>(j)];
    divisors.insert(divisors.end(), {std::sqrt(sigma * sigma + 1.0f), sigma, sigma * sigma + 1.0f});
  }
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 5, divisors, 3));
  std::optional<samplers::StepNoise> step_noise;
  if (ancestral) {
    // randn_tensor(model_output.shape, dtype=model_output.dtype, generator=g) on
    // each second-order call.
    HIPQ_ASSIGN_OR_RETURN(samplers::StepNoise made, samplers::StepNoise::make(be, noise->generators(), noise->model_dtype,
                                                                               x, calls / 2));
    step_noise.emplace(std::move(made));
  }
  Tensor &input = ops.tmp(0), &out = ops.tmp(1), &pred = ops.tmp(2), &t = ops.tmp(3), &prev_sample = ops.tmp(4);
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  for (int j = 0; j < calls; ++j) {
    const size_t u = static_cast<size_t>(j);
    const float sigma_call = S[u];
    HIPQ_RETURN_IF_ERROR(ops.div(x, j, 0, input));  // scale_model_input: x / sqrt(sigma^2 + 1)
    HIPQ_RETURN_IF_ERROR(denoise(input, {j, calls, schedule.timesteps[u], sigma_call}, out));
    HIPQ_ASSIGN_OR_RETURN(const Tensor* p, samplers::k_pred_original(ops, who, cfg.prediction_type, x, out,
                                                                     sigma_call, j, 2, pred, t));
    // derivative = (x - pred) / sigma_call
    HIPQ_RETURN_IF_ERROR(ops.sub(x, *p, t));
    HIPQ_RETURN_IF_ERROR(ops.div(t, j, 1, t));
    if (j % 2 == 0) {
      // dt = sigma_interpol - sigma_hat; x = x + derivative * dt
      const float dt = S[u + 1] - sigma_call;
      if (j != calls - 1) HIPQ_RETURN_IF_ERROR(ops.copy(x, prev_sample));
      HIPQ_RETURN_IF_ERROR(ops.scale(t, dt, t));
      HIPQ_RETURN_IF_ERROR(ops.add(x, t, x));
    } else if (!ancestral) {
      // dt = sigma_next - sigma_hat; x = prev_sample + derivative * dt
      const float dt = S[u + 1] - S[u - 1];
      HIPQ_RETURN_IF_ERROR(ops.scale(t, dt, t));
      HIPQ_RETURN_IF_ERROR(ops.add(prev_sample, t, x));
    } else {
      // The step's sigma_up / sigma_down as diffusers computes its fp32 tables:
      // up = sqrt(next^2 * (s^2 - next^2) / s^2), down = sqrt(next^2 - up^2).
      const float s = S[u - 1], next = S[u + 1];
      const float s2 = s * s, next2 = next * next;
      const float sigma_up = std::sqrt(next2 * (s2 - next2) / s2);
      const float sigma_down = std::sqrt(next2 - sigma_up * sigma_up);
      // x = prev_sample + derivative * (sigma_down - sigma_hat); x = x + noise * sigma_up
      HIPQ_RETURN_IF_ERROR(ops.scale(t, sigma_down - s, t));
      HIPQ_RETURN_IF_ERROR(ops.add(prev_sample, t, x));
      HIPQ_ASSIGN_OR_RETURN(const Tensor z, step_noise->next());
      HIPQ_RETURN_IF_ERROR(ops.scale(z, sigma_up, t));
      HIPQ_RETURN_IF_ERROR(ops.add(x, t, x));
    }
  }
  return Status::Ok();
}

}  // namespace hipq::engine
