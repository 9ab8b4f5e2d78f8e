// diffusers/schedulers/scheduling_unipc_multistep.py (UniPCMultistepScheduler.step
// with its defaults: solver_order 2, bh2, predict_x0, lower_order_final,
// no disabled corrector): AUTOMATIC1111's "UniPC".
//
// Each step converts the model output to x0 (like DPM++), applies the UniC
// corrector to the current latents with this x0 (every step but the first),
// then the UniP predictor to the next sigma. The predictor is first order on
// the first and the last step, second order (rho = 0.5) in between; the
// corrector has the order of the previous predictor, its second-order weights
// are the solution of diffusers' 2x2 system R rho = b (torch.linalg.solve in
// fp32), here solved in double and rounded to fp32: within an ulp of any
// LAPACK's, which is as exact as diffusers itself is across devices.
#include <array>
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

Status sample_unipc(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                    const Denoiser& denoise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "unipc"));
  if (cfg.prediction_type != "epsilon" && cfg.prediction_type != "v_prediction" && cfg.prediction_type != "sample")
    return Status::InvalidArgument("unipc: prediction_type \"" + cfg.prediction_type + "\" is not supported");
  constexpr int kSolverOrder = 2;
  const int n = static_cast<int>(schedule.timesteps.size());
  const auto& S = schedule.sigmas;
  auto sig = [&](int i) { return alpha_sigma(S[static_cast<size_t>(i)]); };
  // Predictor order per step: min(solver_order, steps left) with lower_order_final,
  // then the warm-up min(order, steps done + 1).
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int o = cfg.lower_order_final ? std::min(kSolverOrder, n - i) : kSolverOrder;
    order[static_cast<size_t>(i)] = std::min(o, std::min(i, kSolverOrder) + 1);
  }
  // Per step: alpha_t (x0 of an epsilon model), the predictor's r_k, the corrector's r_k.
  std::vector<float> divisors;
  for (int i = 0; i < n; ++i) {
    const AlphaSigma cur = sig(i);
    float rk_p = 1.0f, rk_c = 1.0f;
    if (order[static_cast<size_t>(i)] == 2) rk_p = (sig(i - 1).lambda - cur.lambda) / (sig(i + 1).lambda - cur.lambda);
    if (i >= 1 && order[static_cast<size_t>(i) - 1] == 2) {
      const AlphaSigma s0 = sig(i - 1);
      rk_c = (sig(i - 2).lambda - s0.lambda) / (cur.lambda - s0.lambda);
    }
    divisors.insert(divisors.end(), {cur.alpha, rk_p, rk_c});
  }
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 8, divisors, 3));
  Tensor &out = ops.tmp(0), &t1 = ops.tmp(1), &t2 = ops.tmp(2), &last_sample = ops.tmp(3), &t3 = ops.tmp(4);
  auto m = [&](int step) -> Tensor& { return ops.tmp(5 + (step % 3)); };  // x0 of this step and the two before
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  for (int i = 0; i < n; ++i) {
    const AlphaSigma cur = sig(i);
    HIPQ_RETURN_IF_ERROR(denoise(x, {i, n, schedule.timesteps[static_cast<size_t>(i)], S[static_cast<size_t>(i)]}, out));
    // convert_model_output: x0 = (x - sigma_t * out) / alpha_t | alpha_t * x - sigma_t * out | out
    Tensor& m_i = m(i);
    HIPQ_RETURN_IF_ERROR(ops.dpm_x0(cfg.prediction_type, cur, i, 0, x, out, t1, t2, m_i));
    if (i > 0) {
      // multistep_uni_c_bh_update(m_i, last_sample, x, order of the last predictor)
      const int q = order[static_cast<size_t>(i) - 1];
      const AlphaSigma s0 = sig(i - 1);
      const float h = cur.lambda - s0.lambda;
      const float hh = -h;
      const float h_phi_1 = std::expm1(hh);
      const float b_h = std::expm1(hh);  // bh2
      std::array<float, 2> rhos = {0.5f, 0.5f};
      if (q == 2) {
        const float rk = (sig(i - 2).lambda - s0.lambda) / h;
        float h_phi_k = h_phi_1 / hh - 1.0f;
        const float b0 = h_phi_k * 1.0f / b_h;
        h_phi_k = h_phi_k / hh - 0.5f;
        const float b1 = h_phi_k * 2.0f / b_h;
        // R = [[1, 1], [rk, 1]]: rho_0 = (b1 - b0) / (rk - 1), rho_1 = b0 - rho_0.
        const double r0 = (static_cast<double>(b1) - b0) / (static_cast<double>(rk) - 1.0);
        rhos = {static_cast<float>(r0), static_cast<float>(static_cast<double>(b0) - r0)};
      }
      const float rho_last = q == 2 ? rhos[1] : rhos[0];
      // x_t_ = sigma_t / sigma_s0 * last_sample - alpha_t * h_phi_1 * m0
      Tensor& m0 = m(i - 1);
      HIPQ_RETURN_IF_ERROR(ops.scale(last_sample, cur.sigma / s0.sigma, t1));
      HIPQ_RETURN_IF_ERROR(ops.scale(m0, cur.alpha * h_phi_1, t2));
      HIPQ_RETURN_IF_ERROR(ops.sub(t1, t2, t1));
      // D1_t = m_i - m0; x = x_t_ - alpha_t * B_h * (corr_res + rho_last * D1_t),
      // corr_res = rho_0 * (m_{i-2} - m0) / rk (second order only)
      HIPQ_RETURN_IF_ERROR(ops.sub(m_i, m0, t2));
      HIPQ_RETURN_IF_ERROR(ops.scale(t2, rho_last, t2));
      if (q == 2) {
        HIPQ_RETURN_IF_ERROR(ops.sub(m(i - 2), m0, t3));
        HIPQ_RETURN_IF_ERROR(ops.div(t3, i, 2, t3));
        HIPQ_RETURN_IF_ERROR(ops.scale(t3, rhos[0], t3));
        HIPQ_RETURN_IF_ERROR(ops.add(t3, t2, t2));
      }
      HIPQ_RETURN_IF_ERROR(ops.scale(t2, cur.alpha * b_h, t2));
      HIPQ_RETURN_IF_ERROR(ops.sub(t1, t2, x));
    }
    // multistep_uni_p_bh_update(x, order): last_sample = x first.
    const int p = order[static_cast<size_t>(i)];
    const AlphaSigma next = sig(i + 1);
    const float h = next.lambda - cur.lambda;
    const float hh = -h;
    const float h_phi_1 = std::expm1(hh);
    const float b_h = std::expm1(hh);
    if (i + 1 < n) HIPQ_RETURN_IF_ERROR(ops.copy(x, last_sample));
    // x_t_ = sigma_t / sigma_s0 * x - alpha_t * h_phi_1 * m_i
    HIPQ_RETURN_IF_ERROR(ops.scale(x, next.sigma / cur.sigma, t1));
    HIPQ_RETURN_IF_ERROR(ops.scale(m_i, next.alpha * h_phi_1, t2));
    if (p == 1) {
      HIPQ_RETURN_IF_ERROR(ops.sub(t1, t2, x));
    } else {
      // x = x_t_ - alpha_t * B_h * (0.5 * (m_{i-1} - m_i) / rk)
      HIPQ_RETURN_IF_ERROR(ops.sub(t1, t2, t1));
      HIPQ_RETURN_IF_ERROR(ops.sub(m(i - 1), m_i, t2));
      HIPQ_RETURN_IF_ERROR(ops.div(t2, i, 1, t2));
      HIPQ_RETURN_IF_ERROR(ops.scale(t2, 0.5f, t2));
      HIPQ_RETURN_IF_ERROR(ops.scale(t2, next.alpha * b_h, t2));
      HIPQ_RETURN_IF_ERROR(ops.sub(t1, t2, x));
    }
  }
  return Status::Ok();
}

}  // namespace hipq::engine
