// diffusers/schedulers/scheduling_dpmsolver_multistep.py (DPMSolverMultistepScheduler.step,
// algorithm_type "sde-dpmsolver++", solver_order 3): AUTOMATIC1111's "DPM++ 3M SDE".
// First order on the first step (and on the last: a zero final sigma or
// fewer than 15 steps), second order (midpoint) on the second step and, with
// fewer than 15 steps, the one before the last; third order otherwise. Every
// step draws f32 noise from the job's generator, the last one included.
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
using samplers::alpha_sigma;
using samplers::AlphaSigma;
using samplers::StepOps;

Status sample_dpmpp_3m_sde(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                           const Denoiser& denoise, const StepNoiseSource& noise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "dpmpp_3m_sde"));
  if (cfg.prediction_type != "epsilon" && cfg.prediction_type != "v_prediction" && cfg.prediction_type != "sample")
    return Status::InvalidArgument("dpmpp_3m_sde: prediction_type \"" + cfg.prediction_type + "\" is not supported");
  const int n = static_cast<int>(schedule.timesteps.size());
  const auto& S = schedule.sigmas;
  auto sig = [&](int i) { return alpha_sigma(S[static_cast<size_t>(i)]); };
  std::vector<float> divisors;  // per step: alpha_t
  for (int i = 0; i < n; ++i) divisors.push_back(sig(i).alpha);
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 8, divisors, 1));
  HIPQ_ASSIGN_OR_RETURN(samplers::StepNoise step_noise,
                        samplers::StepNoise::make(be, noise.generators(), kernels::DType::kF32, x, n));
  Tensor &out = ops.tmp(0), &t1 = ops.tmp(1), &t2 = ops.tmp(2), &d1_0 = ops.tmp(3), &d1_1 = ops.tmp(4);
  auto m = [&](int step) -> Tensor& { return ops.tmp(5 + step % 3); };  // x0 of this step and the two before
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  for (int i = 0; i < n; ++i) {
    const AlphaSigma cur = sig(i);
    HIPQ_RETURN_IF_ERROR(denoise(x, {i, n, schedule.timesteps[static_cast<size_t>(i)], S[static_cast<size_t>(i)]}, out));
    // convert_model_output: x0 = (x - sigma_t * out) / alpha_t | alpha_t * x - sigma_t * out | out
    Tensor& m0 = m(i);
    HIPQ_RETURN_IF_ERROR(ops.dpm_x0(cfg.prediction_type, cur, i, 0, x, out, t1, t2, m0));
    const bool lower_order_final =
        i == n - 1 && (cfg.euler_at_final || (cfg.lower_order_final && n < 15) || cfg.final_sigmas_type == "zero");
    const bool lower_order_second = i == n - 2 && cfg.lower_order_final && n < 15;
    const int order = (i < 1 || lower_order_final) ? 1 : (i < 2 || lower_order_second) ? 2 : 3;
    HIPQ_ASSIGN_OR_RETURN(const Tensor z, step_noise.next());
    const AlphaSigma next = sig(i + 1);
    const float h = next.lambda - cur.lambda;
    const float e2 = std::exp(-2.0f * h);
    const float c_x = next.sigma / cur.sigma * std::exp(-h);
    const float c_d0 = next.alpha * (1.0f - e2);
    const float c_z = next.sigma * std::sqrt(1.0f - std::exp(-2.0f * h));
    // x = c_x * x + c_d0 * D0 [+ c_d1 * D1 [+ c_d2 * D2]] + c_z * noise
    HIPQ_RETURN_IF_ERROR(ops.scale(x, c_x, t1));
    HIPQ_RETURN_IF_ERROR(ops.scale(m0, c_d0, t2));
    HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, t1));
    if (order == 2) {
      // D1 = (1 / r0) * (m0 - m1); x += 0.5 * c_d0 * D1
      const float r0 = (cur.lambda - sig(i - 1).lambda) / h;
      HIPQ_RETURN_IF_ERROR(ops.sub(m0, m(i - 1), t2));
      HIPQ_RETURN_IF_ERROR(ops.scale(t2, 1.0f / r0, t2));
      HIPQ_RETURN_IF_ERROR(ops.scale(t2, 0.5f * c_d0, t2));
      HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, t1));
    } else if (order == 3) {
      const AlphaSigma s1 = sig(i - 1), s2 = sig(i - 2);
      const float h_0 = cur.lambda - s1.lambda, h_1 = s1.lambda - s2.lambda;
      const float r0 = h_0 / h, r1 = h_1 / h;
      // D1_0 = (1 / r0) * (m0 - m1); D1_1 = (1 / r1) * (m1 - m2)
      HIPQ_RETURN_IF_ERROR(ops.sub(m0, m(i - 1), d1_0));
      HIPQ_RETURN_IF_ERROR(ops.scale(d1_0, 1.0f / r0, d1_0));
      HIPQ_RETURN_IF_ERROR(ops.sub(m(i - 1), m(i - 2), d1_1));
      HIPQ_RETURN_IF_ERROR(ops.scale(d1_1, 1.0f / r1, d1_1));
      // t = D1_0 - D1_1; D1 = D1_0 + (r0 / (r0 + r1)) * t; D2 = (1 / (r0 + r1)) * t
      HIPQ_RETURN_IF_ERROR(ops.sub(d1_0, d1_1, d1_1));
      HIPQ_RETURN_IF_ERROR(ops.scale(d1_1, r0 / (r0 + r1), t2));
      HIPQ_RETURN_IF_ERROR(ops.add(d1_0, t2, d1_0));                 // D1
      HIPQ_RETURN_IF_ERROR(ops.scale(d1_1, 1.0f / (r0 + r1), d1_1));  // D2
      const float c_d1 = next.alpha * ((1.0f - e2) / (-2.0f * h) + 1.0f);
      const float two_h = 2.0f * h;
      const float c_d2 = next.alpha * ((1.0f - e2 - 2.0f * h) / (two_h * two_h) - 0.5f);
      HIPQ_RETURN_IF_ERROR(ops.scale(d1_0, c_d1, t2));
      HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, t1));
      HIPQ_RETURN_IF_ERROR(ops.scale(d1_1, c_d2, t2));
      HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, t1));
    }
    HIPQ_RETURN_IF_ERROR(ops.scale(z, c_z, t2));
    HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, x));
  }
  return Status::Ok();
}

}  // namespace hipq::engine
