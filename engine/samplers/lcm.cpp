// diffusers/schedulers/scheduling_lcm.py (LCMScheduler.step): the sampler of
// latent consistency models. Each step maps the latents to the consistency
// function's x0 estimate, denoised = c_out * x0 + c_skip * x (boundary
// scalings of timestep * timestep_scaling, sigma_data 0.5), and, except on
// the last step, re-noises it to the next timestep with fresh noise drawn in
// the model's dtype from the job's generator.
#include <cmath>
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

Status sample_lcm(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                  const Denoiser& denoise, const StepNoiseSource& noise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "lcm"));
  if (schedule.alphas_cumprod.empty()) return Status::InvalidArgument("lcm: schedule has no alphas_cumprod");
  const int n = static_cast<int>(schedule.timesteps.size());
  struct Coefficients {
    float sqrt_a, sqrt_b, c_skip, c_out, sqrt_a_prev, sqrt_b_prev;
  };
  std::vector<Coefficients> co;
  std::vector<float> divisors;  // per step: sqrt(alpha_prod_t)
  for (int i = 0; i < n; ++i) {
    const auto t = static_cast<int64_t>(schedule.timesteps[static_cast<size_t>(i)]);
    const auto prev_t = i + 1 < n ? static_cast<int64_t>(schedule.timesteps[static_cast<size_t>(i) + 1]) : t;
    if (t < 0 || t >= static_cast<int64_t>(schedule.alphas_cumprod.size()))
      return Status::InvalidArgument("lcm: timestep " + std::to_string(t) + " outside the alphas_cumprod table");
    const float a_t = schedule.alphas_cumprod[static_cast<size_t>(t)];
    const float a_prev = schedule.alphas_cumprod[static_cast<size_t>(prev_t)];
    // get_scalings_for_boundary_condition_discrete: fp32 tensors of the int64 timestep.
    const float scaled = static_cast<float>(t) * static_cast<float>(cfg.timestep_scaling);
    const float c_skip = 0.25f / (scaled * scaled + 0.25f);
    const float c_out = scaled / std::sqrt(scaled * scaled + 0.25f);
    co.push_back({std::sqrt(a_t), std::sqrt(1.0f - a_t), c_skip, c_out, std::sqrt(a_prev), std::sqrt(1.0f - a_prev)});
    divisors.push_back(co.back().sqrt_a);
  }
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 4, divisors, 1));
  // randn_tensor(..., dtype=denoised.dtype) on every step but the last.
  HIPQ_ASSIGN_OR_RETURN(samplers::StepNoise step_noise,
                        samplers::StepNoise::make(be, noise.generators(), noise.model_dtype, x, n - 1));
  Tensor &out = ops.tmp(0), &x0_buf = ops.tmp(1), &t1 = ops.tmp(2), &t2 = ops.tmp(3);
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  for (int i = 0; i < n; ++i) {
    HIPQ_RETURN_IF_ERROR(denoise(x, {i, n, schedule.timesteps[static_cast<size_t>(i)],
                                     schedule.sigmas[static_cast<size_t>(i)]},
                                 out));
    const Coefficients& c = co[static_cast<size_t>(i)];
    // x0 = (x - sqrt(b_t) * out) / sqrt(a_t) | sqrt(a_t) * x - sqrt(b_t) * out | out
    HIPQ_RETURN_IF_ERROR(
        ops.dpm_x0(cfg.prediction_type, samplers::AlphaSigma{c.sqrt_a, c.sqrt_b, 0.0f}, i, 0, x, out, t1, t2, x0_buf));
    Tensor* x0 = &x0_buf;
    if (cfg.clip_sample)
      HIPQ_RETURN_IF_ERROR(samplers::clamp_on_host(be, *x0, static_cast<float>(cfg.clip_sample_range)));
    // denoised = c_out * x0 + c_skip * x
    Tensor& denoised = i + 1 < n ? x0_buf : x;
    HIPQ_RETURN_IF_ERROR(ops.scale(*x0, c.c_out, t1));
    HIPQ_RETURN_IF_ERROR(ops.scale(x, c.c_skip, t2));
    HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, denoised));
    if (i + 1 < n) {  // x = sqrt(a_prev) * denoised + sqrt(1 - a_prev) * noise
      HIPQ_ASSIGN_OR_RETURN(const Tensor z, step_noise.next());
      HIPQ_RETURN_IF_ERROR(ops.scale(denoised, c.sqrt_a_prev, t1));
      HIPQ_RETURN_IF_ERROR(ops.scale(z, c.sqrt_b_prev, t2));
      HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, x));
    }
  }
  return Status::Ok();
}

}  // namespace hipq::engine
