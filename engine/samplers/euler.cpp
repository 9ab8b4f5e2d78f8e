// diffusers/schedulers/scheduling_euler_discrete.py (EulerDiscreteScheduler.step).
#include "engine/sampler.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine/samplers/step_ops.h"

namespace hipq::engine {

using kernels::Backend;
using kernels::Tensor;
using samplers::check_inputs;
using samplers::StepOps;

Status sample_euler(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                    const Denoiser& denoise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "euler"));
  const int n = static_cast<int>(schedule.timesteps.size());
  // Per step: the input scale sqrt(sigma^2 + 1), sigma, sigma^2 + 1.
  std::vector<float> divisors;
  for (int i = 0; i < n; ++i) {
    const float sigma = schedule.sigmas[static_cast<size_t>(i)];
    divisors.insert(divisors.end(), {std::sqrt(sigma * sigma + 1.0f), sigma, sigma * sigma + 1.0f});
  }
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 4, divisors, 3));
  Tensor &input = ops.tmp(0), &out = ops.tmp(1), &pred = ops.tmp(2), &t = ops.tmp(3);
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  for (int i = 0; i < n; ++i) {
    const float sigma = schedule.sigmas[static_cast<size_t>(i)];
    HIPQ_RETURN_IF_ERROR(ops.div(x, i, 0, input));  // scale_model_input: x / sqrt(sigma^2 + 1)
    HIPQ_RETURN_IF_ERROR(denoise(input, {i, n, schedule.timesteps[static_cast<size_t>(i)], sigma}, out));
    const float dt = schedule.sigmas[static_cast<size_t>(i) + 1] - sigma;
    const float v_scale = -sigma / std::sqrt(sigma * sigma + 1.0f);
    const Tensor* p = &pred;
    if (cfg.prediction_type == "epsilon") {  // pred = x - sigma * out
      HIPQ_RETURN_IF_ERROR(ops.scale(out, sigma, t));
      HIPQ_RETURN_IF_ERROR(ops.sub(x, t, pred));
    } else if (cfg.prediction_type == "v_prediction") {  // pred = out * v_scale + x / (sigma^2 + 1)
      HIPQ_RETURN_IF_ERROR(ops.scale(out, v_scale, t));
      HIPQ_RETURN_IF_ERROR(ops.div(x, i, 2, pred));
      HIPQ_RETURN_IF_ERROR(ops.add(t, pred, pred));
    } else {
      p = &out;
    }
    // derivative = (x - pred) / sigma; x = x + derivative * dt
    HIPQ_RETURN_IF_ERROR(ops.sub(x, *p, t));
    HIPQ_RETURN_IF_ERROR(ops.div(t, i, 1, t));
    HIPQ_RETURN_IF_ERROR(ops.scale(t, dt, t));
    HIPQ_RETURN_IF_ERROR(ops.add(x, t, x));
  }
  return Status::Ok();
}

}  // namespace hipq::engine
