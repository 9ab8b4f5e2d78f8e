// diffusers/schedulers/scheduling_euler_ancestral_discrete.py
// (EulerAncestralDiscreteScheduler.step): AUTOMATIC1111's "Euler a".
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "engine/sampler.h"
#include "engine/samplers/step_noise.h"
#include "engine/samplers/step_ops.h"

namespace hipq::engine {

using kernels::Backend;
using kernels::Tensor;
using samplers::check_inputs;
using samplers::StepOps;

Status sample_euler_ancestral(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                              const Denoiser& denoise, const StepNoiseSource& noise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "euler_ancestral"));
  if (cfg.prediction_type == "sample")
    return Status::Unimplemented("euler_ancestral: prediction_type \"sample\" (diffusers does not implement it either)");
  const int n = static_cast<int>(schedule.timesteps.size());
  // Per step: the input scale sqrt(sigma^2 + 1), sigma, sigma^2 + 1.
  std::vector<float> divisors;
  for (int i = 0; i < n; ++i) {
    const float sigma = schedule.sigmas[static_cast<size_t>(i)];
    divisors.insert(divisors.end(), {std::sqrt(sigma * sigma + 1.0f), sigma, sigma * sigma + 1.0f});
  }
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 4, divisors, 3));
  // randn_tensor(model_output.shape, dtype=model_output.dtype, generator=g): the
  // pipeline's precision.
  HIPQ_ASSIGN_OR_RETURN(samplers::StepNoise step_noise,
                        samplers::StepNoise::make(be, noise.generators(), noise.model_dtype, x, n));
  Tensor &input = ops.tmp(0), &out = ops.tmp(1), &pred = ops.tmp(2), &t = ops.tmp(3);
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  for (int i = 0; i < n; ++i) {
    const float sigma = schedule.sigmas[static_cast<size_t>(i)];
    HIPQ_RETURN_IF_ERROR(ops.div(x, i, 0, input));  // scale_model_input: x / sqrt(sigma^2 + 1)
    HIPQ_RETURN_IF_ERROR(denoise(input, {i, n, schedule.timesteps[static_cast<size_t>(i)], sigma}, out));
    if (cfg.prediction_type == "epsilon") {  // pred = x - sigma * out
      HIPQ_RETURN_IF_ERROR(ops.scale(out, sigma, t));
      HIPQ_RETURN_IF_ERROR(ops.sub(x, t, pred));
    } else {  // v_prediction: pred = out * (-sigma / sqrt(sigma^2 + 1)) + x / (sigma^2 + 1)
      HIPQ_RETURN_IF_ERROR(ops.scale(out, -sigma / std::sqrt(sigma * sigma + 1.0f), t));
      HIPQ_RETURN_IF_ERROR(ops.div(x, i, 2, pred));
      HIPQ_RETURN_IF_ERROR(ops.add(t, pred, pred));
    }
    // The 0-d fp32 tensors of the step, in diffusers' order:
    // sigma_up = sqrt(to^2 * (from^2 - to^2) / from^2), sigma_down = sqrt(to^2 - up^2).
    const float from = sigma, to = schedule.sigmas[static_cast<size_t>(i) + 1];
    const float sigma_up = std::sqrt(to * to * (from * from - to * to) / (from * from));
    const float sigma_down = std::sqrt(to * to - sigma_up * sigma_up);
    const float dt = sigma_down - sigma;
    // derivative = (x - pred) / sigma; x = x + derivative * dt; x = x + noise * sigma_up
    HIPQ_RETURN_IF_ERROR(ops.sub(x, pred, t));
    HIPQ_RETURN_IF_ERROR(ops.div(t, i, 1, t));
    HIPQ_RETURN_IF_ERROR(ops.scale(t, dt, t));
    HIPQ_RETURN_IF_ERROR(ops.add(x, t, x));
    HIPQ_ASSIGN_OR_RETURN(const Tensor z, step_noise.next());
    HIPQ_RETURN_IF_ERROR(ops.scale(z, sigma_up, t));
    HIPQ_RETURN_IF_ERROR(ops.add(x, t, x));
  }
  return Status::Ok();
}

}  // namespace hipq::engine
