// diffusers/schedulers/scheduling_ddpm.py (DDPMScheduler.step, variance_type
// fixed_small or fixed_large): ancestral sampling of the DDPM posterior
// q(x_{t'} | x_t, x0) between the schedule's timesteps (DDIM's table). Every
// step whose timestep is above 0 adds sqrt(variance) times fresh noise drawn
// in the model's dtype from the job's generator, the last one included (its
// variance is clamped to 1e-20).
#include <cmath>
#include <optional>
#include <string>
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

Status sample_ddpm(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                   const Denoiser& denoise, const StepNoiseSource& noise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "ddpm"));
  if (schedule.alphas_cumprod.empty()) return Status::InvalidArgument("ddpm: schedule has no alphas_cumprod");
  if (cfg.variance_type != "fixed_small" && cfg.variance_type != "fixed_large")
    return Status::Unimplemented("ddpm: scheduler config variance_type \"" + cfg.variance_type +
                                 "\" (fixed_small and fixed_large are supported)");
  const int n = static_cast<int>(schedule.timesteps.size());
  struct Coefficients {
    float sqrt_a, sqrt_b, c_x0, c_x, noise_scale;
    bool draws;
  };
  std::vector<Coefficients> co;
  std::vector<float> divisors;  // per step: sqrt(alpha_prod_t)
  int draws = 0;
  for (int i = 0; i < n; ++i) {
    const auto t = static_cast<int64_t>(schedule.timesteps[static_cast<size_t>(i)]);
    const int64_t prev_t = i + 1 < n ? static_cast<int64_t>(schedule.timesteps[static_cast<size_t>(i) + 1]) : -1;
    if (t < 0 || t >= static_cast<int64_t>(schedule.alphas_cumprod.size()))
      return Status::InvalidArgument("ddpm: timestep " + std::to_string(t) + " outside the alphas_cumprod table");
    // The 0-d fp32 tensors of step() and _get_variance(), in diffusers' order.
    const float a_t = schedule.alphas_cumprod[static_cast<size_t>(t)];
    const float a_prev = prev_t >= 0 ? schedule.alphas_cumprod[static_cast<size_t>(prev_t)] : 1.0f;
    const float b_t = 1.0f - a_t, b_prev = 1.0f - a_prev;
    const float current_alpha = a_t / a_prev;
    const float current_beta = 1.0f - current_alpha;
    float variance = std::max((1.0f - a_prev) / (1.0f - a_t) * current_beta, 1e-20f);
    if (cfg.variance_type == "fixed_large") variance = current_beta;
    co.push_back({std::sqrt(a_t), std::sqrt(b_t), std::sqrt(a_prev) * current_beta / b_t,
                  std::sqrt(current_alpha) * b_prev / b_t, std::sqrt(variance), t > 0});
    divisors.push_back(co.back().sqrt_a);
    draws += t > 0 ? 1 : 0;
  }
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 4, divisors, 1));
  HIPQ_ASSIGN_OR_RETURN(samplers::StepNoise step_noise,
                        samplers::StepNoise::make(be, noise.generators(), noise.model_dtype, x, draws));
  Tensor &out = ops.tmp(0), &x0_buf = ops.tmp(1), &t1 = ops.tmp(2), &t2 = ops.tmp(3);
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  for (int i = 0; i < n; ++i) {
    const float t = schedule.timesteps[static_cast<size_t>(i)];
    HIPQ_RETURN_IF_ERROR(denoise(x, {i, n, t, schedule.sigmas[static_cast<size_t>(i)]}, out));
    const Coefficients& c = co[static_cast<size_t>(i)];
    // x0 = (x - sqrt(b_t) * out) / sqrt(a_t) | sqrt(a_t) * x - sqrt(b_t) * out | out
    HIPQ_RETURN_IF_ERROR(
        ops.dpm_x0(cfg.prediction_type, samplers::AlphaSigma{c.sqrt_a, c.sqrt_b, 0.0f}, i, 0, x, out, t1, t2, x0_buf));
    Tensor* x0 = &x0_buf;
    if (cfg.clip_sample)
      HIPQ_RETURN_IF_ERROR(samplers::clamp_on_host(be, *x0, static_cast<float>(cfg.clip_sample_range)));
    // x = c_x0 * x0 + c_x * x [+ sqrt(variance) * noise]
    HIPQ_RETURN_IF_ERROR(ops.scale(*x0, c.c_x0, t1));
    HIPQ_RETURN_IF_ERROR(ops.scale(x, c.c_x, t2));
    HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, x));
    if (c.draws) {
      HIPQ_ASSIGN_OR_RETURN(const Tensor z, step_noise.next());
      HIPQ_RETURN_IF_ERROR(ops.scale(z, c.noise_scale, t1));
      HIPQ_RETURN_IF_ERROR(ops.add(x, t1, x));
    }
  }
  return Status::Ok();
}

}  // namespace hipq::engine
