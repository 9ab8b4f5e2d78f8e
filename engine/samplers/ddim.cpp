// diffusers/schedulers/scheduling_ddim.py (DDIMScheduler.step, eta = 0).
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine/models/device_tensor.h"
#include "engine/samplers/step_ops.h"

namespace hipq::engine {

using kernels::Backend;
using kernels::Tensor;
using samplers::check_inputs;
using samplers::StepOps;

Status sample_ddim(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                   const Denoiser& denoise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "ddim"));
  if (schedule.alphas_cumprod.empty()) return Status::InvalidArgument("ddim: schedule has no alphas_cumprod");
  const int n = static_cast<int>(schedule.timesteps.size());
  const int64_t stride = static_cast<int64_t>(schedule.alphas_cumprod.size()) / inference_steps(schedule);
  struct Coefficients {
    float sqrt_a, sqrt_b, sqrt_a_prev, dir_scale;
  };
  std::vector<Coefficients> co;
  std::vector<float> divisors;  // per step: sqrt(a_t), sqrt(1 - a_t)
  for (int i = 0; i < n; ++i) {
    const auto t = static_cast<int64_t>(schedule.timesteps[static_cast<size_t>(i)]);
    const int64_t prev = t - stride;
    if (t < 0 || t >= static_cast<int64_t>(schedule.alphas_cumprod.size()))
      return Status::InvalidArgument("ddim: timestep " + std::to_string(t) + " outside the training range");
    const float a_t = schedule.alphas_cumprod[static_cast<size_t>(t)];
    const float a_prev = prev >= 0 ? schedule.alphas_cumprod[static_cast<size_t>(prev)] : schedule.final_alpha_cumprod;
    const float b_t = 1.0f - a_t;
    // eta = 0: std_dev_t is 0, so the direction keeps all of 1 - a_prev.
    co.push_back({std::sqrt(a_t), std::sqrt(b_t), std::sqrt(a_prev), std::sqrt((1.0f - a_prev) - 0.0f)});
    divisors.insert(divisors.end(), {co.back().sqrt_a, co.back().sqrt_b});
  }
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 5, divisors, 2));
  Tensor &out = ops.tmp(0), &x0_buf = ops.tmp(1), &eps_buf = ops.tmp(2), &t1 = ops.tmp(3), &t2 = ops.tmp(4);
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  const float clip = static_cast<float>(cfg.clip_sample_range);
  for (int i = 0; i < n; ++i) {
    const auto t = schedule.timesteps[static_cast<size_t>(i)];
    HIPQ_RETURN_IF_ERROR(denoise(x, {i, n, static_cast<float>(static_cast<int64_t>(t)),
                                     schedule.sigmas[static_cast<size_t>(i)]},
                                 out));
    const Coefficients& c = co[static_cast<size_t>(i)];
    Tensor* x0 = &x0_buf;
    const Tensor* eps = &eps_buf;
    if (cfg.prediction_type == "epsilon") {  // x0 = (x - sqrt_b * out) / sqrt_a; eps = out
      HIPQ_RETURN_IF_ERROR(ops.scale(out, c.sqrt_b, t1));
      HIPQ_RETURN_IF_ERROR(ops.sub(x, t1, t1));
      HIPQ_RETURN_IF_ERROR(ops.div(t1, i, 0, x0_buf));
      eps = &out;
    } else if (cfg.prediction_type == "v_prediction") {
      // x0 = sqrt_a * x - sqrt_b * out; eps = sqrt_a * out + sqrt_b * x
      HIPQ_RETURN_IF_ERROR(ops.scale(x, c.sqrt_a, t1));
      HIPQ_RETURN_IF_ERROR(ops.scale(out, c.sqrt_b, t2));
      HIPQ_RETURN_IF_ERROR(ops.sub(t1, t2, x0_buf));
      HIPQ_RETURN_IF_ERROR(ops.scale(out, c.sqrt_a, t1));
      HIPQ_RETURN_IF_ERROR(ops.scale(x, c.sqrt_b, t2));
      HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, eps_buf));
    } else {  // x0 = out; eps = (x - sqrt_a * x0) / sqrt_b
      x0 = &out;
      HIPQ_RETURN_IF_ERROR(ops.scale(out, c.sqrt_a, t1));
      HIPQ_RETURN_IF_ERROR(ops.sub(x, t1, t1));
      HIPQ_RETURN_IF_ERROR(ops.div(t1, i, 1, eps_buf));
    }
    if (cfg.clip_sample) HIPQ_RETURN_IF_ERROR(samplers::clamp_on_host(be, *x0, clip));
    // x = sqrt_a_prev * x0 + dir_scale * eps
    HIPQ_RETURN_IF_ERROR(ops.scale(*x0, c.sqrt_a_prev, t1));
    HIPQ_RETURN_IF_ERROR(ops.scale(*eps, c.dir_scale, t2));
    HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, x));
  }
  return Status::Ok();
}

}  // namespace hipq::engine
