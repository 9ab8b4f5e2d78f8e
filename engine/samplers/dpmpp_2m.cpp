// diffusers/schedulers/scheduling_dpmsolver_multistep.py (DPMSolverMultistepScheduler.step,
// dpmsolver++ and sde-dpmsolver++, order 2, midpoint).
#include "engine/sampler.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/samplers/step_noise.h"
#include "engine/samplers/step_ops.h"

namespace hipq::engine {

using kernels::Backend;
using kernels::Tensor;
using samplers::check_inputs;
using samplers::StepOps;

Status sample_dpmpp_2m(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                       const Denoiser& denoise, const StepNoiseSource* noise) {
  const bool sde = noise != nullptr;
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, sde ? "dpmpp_2m_sde" : "dpmpp_2m"));
  const int n = static_cast<int>(schedule.timesteps.size());
  using samplers::AlphaSigma;
  const auto as = samplers::alpha_sigma;
  std::vector<float> divisors;  // per step: alpha_t
  for (int i = 0; i < n; ++i) divisors.push_back(as(schedule.sigmas[static_cast<size_t>(i)]).alpha);
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 6, divisors, 1));
  std::optional<samplers::StepNoise> step_noise;
  if (sde) {
    // sde-dpmsolver++ draws randn_tensor(..., dtype=torch.float32) every step,
    // the last one included.
    HIPQ_ASSIGN_OR_RETURN(samplers::StepNoise made, samplers::StepNoise::make(be, noise->generators(),
                                                                               kernels::DType::kF32, x, n));
    step_noise.emplace(std::move(made));
  }
  Tensor &out = ops.tmp(0), &t1 = ops.tmp(3), &t2 = ops.tmp(4), &t3 = ops.tmp(5);
  int x0_i = 1, prev_i = 2;  // scratch holding this step's x0 and the last one's (swapped each step)
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  bool have_prev = false;
  for (int i = 0; i < n; ++i) {
    const float s_cur = schedule.sigmas[static_cast<size_t>(i)];
    HIPQ_RETURN_IF_ERROR(denoise(x, {i, n, schedule.timesteps[static_cast<size_t>(i)], s_cur}, out));
    const AlphaSigma cur = as(s_cur);
    Tensor& x0 = ops.tmp(x0_i);
    HIPQ_RETURN_IF_ERROR(ops.dpm_x0(cfg.prediction_type, cur, i, 0, x, out, t1, t2, x0));
    const AlphaSigma next = as(schedule.sigmas[static_cast<size_t>(i) + 1]);
    const bool lower_order_final =
        i == n - 1 && !schedule.truncated_end && (cfg.euler_at_final || (cfg.lower_order_final && inference_steps(schedule) < 15) || cfg.final_sigmas_type == "zero");
    const float h = next.lambda - cur.lambda;
    const bool second_order = have_prev && !lower_order_final;
    // d1 = (1 / r0) * (x0 - x0_prev), r0 = h0 / h (second order only)
    auto make_d1 = [&]() -> Status {
      const float h0 = cur.lambda - as(schedule.sigmas[static_cast<size_t>(i) - 1]).lambda;
      const float r0 = h0 / h;
      HIPQ_RETURN_IF_ERROR(ops.sub(x0, ops.tmp(prev_i), t1));
      return ops.scale(t1, 1.0f / r0, t1);
    };
    if (sde) {
      // x = (sigma_t / sigma_s * exp(-h)) * x + (alpha_t * (1 - exp(-2h))) * x0
      //     [+ 0.5 * (alpha_t * (1 - exp(-2h))) * d1] + sigma_t * sqrt(1 - exp(-2h)) * noise
      HIPQ_ASSIGN_OR_RETURN(const Tensor z, step_noise->next());
      const float c_x = next.sigma / cur.sigma * std::exp(-h);
      const float c_x0 = next.alpha * (1.0f - std::exp(-2.0f * h));
      const float c_z = next.sigma * std::sqrt(1.0f - std::exp(-2.0f * h));
      HIPQ_RETURN_IF_ERROR(ops.scale(x, c_x, t2));
      HIPQ_RETURN_IF_ERROR(ops.scale(x0, c_x0, t3));
      HIPQ_RETURN_IF_ERROR(ops.add(t2, t3, t2));
      if (second_order) {
        HIPQ_RETURN_IF_ERROR(make_d1());
        HIPQ_RETURN_IF_ERROR(ops.scale(t1, 0.5f * c_x0, t1));
        HIPQ_RETURN_IF_ERROR(ops.add(t2, t1, t2));
      }
      HIPQ_RETURN_IF_ERROR(ops.scale(z, c_z, t3));
      HIPQ_RETURN_IF_ERROR(ops.add(t2, t3, x));
    } else {
      const float ratio = next.sigma / cur.sigma;
      const float c0 = next.alpha * (std::exp(-h) - 1.0f);
      // x = ratio * x - c0 * x0 (first order), then - c1 * d1 (second order)
      HIPQ_RETURN_IF_ERROR(ops.scale(x, ratio, t2));
      HIPQ_RETURN_IF_ERROR(ops.scale(x0, c0, t3));
      if (!second_order) {
        HIPQ_RETURN_IF_ERROR(ops.sub(t2, t3, x));
      } else {
        const float c1 = 0.5f * c0;
        HIPQ_RETURN_IF_ERROR(make_d1());
        HIPQ_RETURN_IF_ERROR(ops.sub(t2, t3, t2));
        HIPQ_RETURN_IF_ERROR(ops.scale(t1, c1, t1));
        HIPQ_RETURN_IF_ERROR(ops.sub(t2, t1, x));
      }
    }
    std::swap(x0_i, prev_i);
    have_prev = true;
  }
  return Status::Ok();
}

}  // namespace hipq::engine
