// diffusers/schedulers/scheduling_lms_discrete.py (LMSDiscreteScheduler.step,
// order 4): AUTOMATIC1111's "LMS". Linear multistep on the probability-flow
// ODE in sigma: x_{i+1} = x_i + sum_m c_m * d_{i-m} over the last
// min(i + 1, 4) derivatives d = (x - x0) / sigma, newest first, where c_m is
// the integral from sigma_i to sigma_{i+1} of the Lagrange basis polynomial of
// sigma_{i-m} on the nodes sigma_i..sigma_{i-order+1}.
//
// diffusers integrates those with scipy.integrate.quad (21-point
// Gauss-Kronrod); the integrand is a polynomial of degree order - 1 <= 3, so
// the 3-point Gauss-Legendre rule here (exact up to degree 5), evaluated in
// double, gives the same integral to ~1e-15 relative; both are rounded to fp32
// where the step multiplies a derivative by them (lms_coefficient).
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/sampler.h"
#include "engine/samplers/step_ops.h"

namespace hipq::engine {

using kernels::Backend;
using kernels::Tensor;
using samplers::check_inputs;
using samplers::StepOps;

namespace {

// diffusers' get_lms_coefficient(order, i, m) on the sigmas table.
double lms_coefficient(const std::vector<float>& sigmas, int order, int i, int m) {
  auto basis = [&](double tau) {
    double prod = 1.0;
    for (int k = 0; k < order; ++k) {
      if (k == m) continue;
      const double sk = sigmas[static_cast<size_t>(i - k)];
      prod *= (tau - sk) / (static_cast<double>(sigmas[static_cast<size_t>(i - m)]) - sk);
    }
    return prod;
  };
  const double a = sigmas[static_cast<size_t>(i)], b = sigmas[static_cast<size_t>(i) + 1];
  const double mid = 0.5 * (a + b), half = 0.5 * (b - a);
  const double node = std::sqrt(3.0 / 5.0);
  return half * (5.0 / 9.0 * basis(mid - half * node) + 8.0 / 9.0 * basis(mid) + 5.0 / 9.0 * basis(mid + half * node));
}

}  // namespace

Status sample_lms(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                  const Denoiser& denoise) {
  constexpr int kOrder = 4;  // LMSDiscreteScheduler.step's default
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "lms"));
  const int n = static_cast<int>(schedule.timesteps.size());
  const auto& S = schedule.sigmas;
  // Per step: the input scale sqrt(sigma^2 + 1), sigma, sigma^2 + 1.
  std::vector<float> divisors;
  for (int i = 0; i < n; ++i) {
    const float sigma = S[static_cast<size_t>(i)];
    divisors.insert(divisors.end(), {std::sqrt(sigma * sigma + 1.0f), sigma, sigma * sigma + 1.0f});
  }
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 5 + kOrder, divisors, 3));
  Tensor &input = ops.tmp(0), &out = ops.tmp(1), &pred = ops.tmp(2), &t = ops.tmp(3), &sum = ops.tmp(4);
  auto derivative = [&](int step) -> Tensor& { return ops.tmp(5 + step % kOrder); };  // ring of the last four
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  for (int i = 0; i < n; ++i) {
    const float sigma = S[static_cast<size_t>(i)];
    HIPQ_RETURN_IF_ERROR(ops.div(x, i, 0, input));  // scale_model_input: x / sqrt(sigma^2 + 1)
    HIPQ_RETURN_IF_ERROR(denoise(input, {i, n, schedule.timesteps[static_cast<size_t>(i)], sigma}, out));
    HIPQ_ASSIGN_OR_RETURN(const Tensor* p,
                          samplers::k_pred_original(ops, "lms", cfg.prediction_type, x, out, sigma, i, 2, pred, t));
    // derivative = (x - pred) / sigma
    Tensor& d = derivative(i);
    HIPQ_RETURN_IF_ERROR(ops.sub(x, *p, d));
    HIPQ_RETURN_IF_ERROR(ops.div(d, i, 1, d));
    // x = x + (c_0 * d_i + c_1 * d_{i-1} + ...), summed left to right as Python's sum().
    const int order = std::min(i + 1, kOrder);
    for (int m = 0; m < order; ++m) {
      const float c = static_cast<float>(lms_coefficient(S, order, i, m));
      HIPQ_RETURN_IF_ERROR(ops.scale(derivative(i - m), c, m == 0 ? sum : t));
      if (m > 0) HIPQ_RETURN_IF_ERROR(ops.add(sum, t, sum));
    }
    HIPQ_RETURN_IF_ERROR(ops.add(x, sum, x));
  }
  return Status::Ok();
}

}  // namespace hipq::engine
