// diffusers/schedulers/scheduling_deis_multistep.py (DEISMultistepScheduler.step
// with its defaults: solver_order 2, algorithm "deis", solver "logrho",
// lower_order_final): AUTOMATIC1111's "DEIS".
//
// Each step converts the model output to x0 and back to epsilon (as diffusers
// does: eps = (x - alpha_t * x0) / sigma_t), then takes a first-order step
// (first step, and the last when there are fewer than 15) or the second-order
// log-rho multistep update. Its schedule is DPM-Solver's with a final sigma of
// sigma_min (the first training sigma), never 0.
#include <cmath>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/samplers/step_ops.h"

namespace hipq::engine {

using kernels::Backend;
using kernels::Tensor;
using samplers::check_inputs;
using samplers::alpha_sigma;
using samplers::AlphaSigma;
using samplers::StepOps;

namespace {

// ind_fn(t, b, c) = t * (-log(c) + log(t) - 1) / (log(b) - log(c)) on 0-d fp32 tensors.
float ind_fn(float t, float b, float c) {
  return t * (-std::log(c) + std::log(t) - 1.0f) / (std::log(b) - std::log(c));
}

}  // namespace

Status sample_deis(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                   const Denoiser& denoise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "deis"));
  if (cfg.prediction_type != "epsilon" && cfg.prediction_type != "v_prediction" && cfg.prediction_type != "sample")
    return Status::InvalidArgument("deis: prediction_type \"" + cfg.prediction_type + "\" is not supported");
  const int n = static_cast<int>(schedule.timesteps.size());
  const auto& S = schedule.sigmas;
  auto sig = [&](int i) { return alpha_sigma(S[static_cast<size_t>(i)]); };
  // Per step: alpha_t, sigma_t.
  std::vector<float> divisors;
  for (int i = 0; i < n; ++i) {
    const AlphaSigma cur = sig(i);
    divisors.insert(divisors.end(), {cur.alpha, cur.sigma});
  }
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 6, divisors, 2));
  Tensor &out = ops.tmp(0), &t1 = ops.tmp(1), &t2 = ops.tmp(2), &x0 = ops.tmp(3);
  auto m = [&](int step) -> Tensor& { return ops.tmp(4 + (step % 2)); };  // epsilon of this step and the last
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  for (int i = 0; i < n; ++i) {
    const AlphaSigma cur = sig(i);
    HIPQ_RETURN_IF_ERROR(denoise(x, {i, n, schedule.timesteps[static_cast<size_t>(i)], S[static_cast<size_t>(i)]}, out));
    // x0 = (x - sigma_t * out) / alpha_t | alpha_t * x - sigma_t * out | out; eps = (x - alpha_t * x0) / sigma_t
    HIPQ_RETURN_IF_ERROR(ops.dpm_x0(cfg.prediction_type, cur, i, 0, x, out, t1, t2, x0));
    Tensor& m_i = m(i);
    HIPQ_RETURN_IF_ERROR(ops.scale(x0, cur.alpha, t1));
    HIPQ_RETURN_IF_ERROR(ops.sub(x, t1, t1));
    HIPQ_RETURN_IF_ERROR(ops.div(t1, i, 1, m_i));
    const bool lower_order_final = i == n - 1 && cfg.lower_order_final && n < 15;
    const AlphaSigma next = sig(i + 1);
    if (i == 0 || lower_order_final) {
      // x = (alpha_t / alpha_s) * x - (sigma_t * (exp(h) - 1)) * eps
      const float h = next.lambda - cur.lambda;
      HIPQ_RETURN_IF_ERROR(ops.scale(x, next.alpha / cur.alpha, t1));
      HIPQ_RETURN_IF_ERROR(ops.scale(m_i, next.sigma * (std::exp(h) - 1.0f), t2));
      HIPQ_RETURN_IF_ERROR(ops.sub(t1, t2, x));
    } else {
      // rho = sigma / alpha; x = alpha_t * (x / alpha_s0 + coef1 * m0 + coef2 * m1)
      const AlphaSigma prev = sig(i - 1);
      const float rho_t = next.sigma / next.alpha, rho_s0 = cur.sigma / cur.alpha, rho_s1 = prev.sigma / prev.alpha;
      const float coef1 = ind_fn(rho_t, rho_s0, rho_s1) - ind_fn(rho_s0, rho_s0, rho_s1);
      const float coef2 = ind_fn(rho_t, rho_s1, rho_s0) - ind_fn(rho_s0, rho_s1, rho_s0);
      HIPQ_RETURN_IF_ERROR(ops.div(x, i, 0, t1));
      HIPQ_RETURN_IF_ERROR(ops.scale(m_i, coef1, t2));
      HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, t1));
      HIPQ_RETURN_IF_ERROR(ops.scale(m(i - 1), coef2, t2));
      HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, t1));
      HIPQ_RETURN_IF_ERROR(ops.scale(t1, next.alpha, x));
    }
  }
  return Status::Ok();
}

}  // namespace hipq::engine
