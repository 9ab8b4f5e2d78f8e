// diffusers/schedulers/scheduling_lms_discrete.py (LMSDiscreteScheduler.step,
// order 4): AUTOMATIC1111's "LMS". Linear multistep on the probability-flow
// ODE in sigma: x_{i+1} = x_i + sum_m c_m * d_{i-m} over the last
// min(i + 1, 4) derivatives d = (x - x0) / sigma, newest first, where c_m is
// the integral from sigma_i to sigma_{i+1} of the Lagrange basis polynomial of
// sigma_{i-m} on the nodes sigma_i..sigma_{i-order+1}.
//
// diffusers integrates those with scipy.integrate.quad (QUADPACK qags,
// epsrel 1e-4) of an integrand it evaluates with fp32 0-d tensors. The
// integrand is a polynomial of degree <= 3, so qags accepts its first
// 21-point Gauss-Kronrod sum; lms_coefficient takes that sum (QUADPACK's
// dqk21 nodes, weights and order) over the same fp32 integrand, which gives
// diffusers' coefficients to ~1e-16 relative, hence the same fp32 values the
// step multiplies by (checked for 1712 coefficients of SDXL schedules).
#include <algorithm>
#include <array>
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

// QUADPACK dqk21: Kronrod abscissae (xgk[1], xgk[3], ... are the 10-point
// Gauss nodes) and weights, the centre last.
constexpr std::array<double, 11> kXgk = {
    0.995657163025808080735527280689003, 0.973906528517171720077964012084452, 0.930157491355708226001207180059508,
    0.865063366688984510732096688423493, 0.780817726586416897063717578345042, 0.679409568299024406234327365114874,
    0.562757134668604683339000099272694, 0.433395394129247190799265943165784, 0.294392862701460198131126603103866,
    0.148874338981631210884826001129720, 0.0};
constexpr std::array<double, 11> kWgk = {
    0.011694638867371874278064396062192, 0.032558162307964727478818972459390, 0.054755896574351996031381300244580,
    0.075039674810919952767043140916190, 0.093125454583697605535065465083366, 0.109387158802297641899210590325805,
    0.123491976262065851077841946411920, 0.134709217311473325928054001771707, 0.142775938577060080797094273138717,
    0.147739104901338491374841515972068, 0.149445554002916905664936468389821};

// diffusers' get_lms_coefficient(order, i, m) on the fp32 sigmas table.
double lms_coefficient(const std::vector<float>& sigmas, int order, int i, int m) {
  // lms_derivative(tau): prod *= (tau - s[i-k]) / (s[i-m] - s[i-k]) on 0-d fp32
  // tensors (tau rounded to fp32 first); the first factor times 1.0 is exact.
  auto basis = [&](double tau) {
    bool first = true;
    float prod = 1.0f;
    for (int k = 0; k < order; ++k) {
      if (k == m) continue;
      const float sk = sigmas[static_cast<size_t>(i - k)];
      const float term = (static_cast<float>(tau) - sk) / (sigmas[static_cast<size_t>(i - m)] - sk);
      prod = first ? term : prod * term;
      first = false;
    }
    return static_cast<double>(prod);
  };
  const double a = sigmas[static_cast<size_t>(i)], b = sigmas[static_cast<size_t>(i) + 1];
  const double centre = 0.5 * (a + b), half = 0.5 * (b - a);
  double resk = kWgk[10] * basis(centre);
  for (int j = 1; j <= 5; ++j) {  // the Gauss nodes, then the Kronrod ones, as dqk21 adds them
    const size_t jtw = static_cast<size_t>(2 * j - 1);
    const double absc = half * kXgk[jtw];
    resk += kWgk[jtw] * (basis(centre - absc) + basis(centre + absc));
  }
  for (int j = 1; j <= 5; ++j) {
    const size_t jtwm1 = static_cast<size_t>(2 * j - 2);
    const double absc = half * kXgk[jtwm1];
    resk += kWgk[jtwm1] * (basis(centre - absc) + basis(centre + absc));
  }
  return resk * half;
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
