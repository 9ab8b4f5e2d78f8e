#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine/models/device_tensor.h"

namespace hipq::engine {
namespace {

using kernels::Backend;
using kernels::BinaryOp;
using kernels::DType;
using kernels::Tensor;

Status check_inputs(const Schedule& s, const Tensor& x, std::string_view who) {
  if (s.timesteps.empty() || s.sigmas.size() != s.timesteps.size() + 1)
    return Status::InvalidArgument(std::string(who) + ": schedule has " + std::to_string(s.timesteps.size()) +
                                   " timesteps and " + std::to_string(s.sigmas.size()) + " sigmas (need n and n+1)");
  if (x.numel() == 0) return Status::InvalidArgument(std::string(who) + ": empty latents");
  if (x.dtype != DType::kF32 || !x.is_contiguous())
    return Status::InvalidArgument(std::string(who) + ": latents must be a contiguous f32 tensor, got " +
                                   x.describe());
  return Status::Ok();
}

// The elementwise arithmetic of one sampler on the backend: scratch tensors
// shaped like the latents, and a table of the per-step constants the step
// divides by (uploaded once; a division by a constant must stay a division
// to round as diffusers does, and the scale op only multiplies).
class StepOps {
 public:
  static Result<StepOps> make(Backend& be, const Tensor& like, int temps, const std::vector<float>& divisors,
                              int per_step) {
    StepOps ops;
    ops.be_ = &be;
    ops.per_step_ = per_step;
    for (int i = 0; i < temps; ++i) {
      HIPQ_ASSIGN_OR_RETURN(DeviceTensor t, DeviceTensor::make(be, DType::kF32, like.shape_vec()));
      ops.temps_.push_back(std::move(t));
    }
    if (!divisors.empty()) {
      HIPQ_ASSIGN_OR_RETURN(ops.table_, DeviceTensor::from_host(be, divisors.data(),
                                                               {static_cast<int64_t>(divisors.size())}, DType::kF32));
    }
    return ops;
  }

  Tensor& tmp(int i) { return temps_[static_cast<size_t>(i)].t; }

  Status scale(const Tensor& a, float factor, Tensor& y) { return be_->scale(a, y, factor, 0.0f); }
  Status add(const Tensor& a, const Tensor& b, Tensor& y) { return be_->binary(BinaryOp::kAdd, a, b, y); }
  Status sub(const Tensor& a, const Tensor& b, Tensor& y) { return be_->binary(BinaryOp::kSub, a, b, y); }
  // y = a / divisors[step * per_step + which].
  Status div(const Tensor& a, int step, int which, Tensor& y) {
    return be_->binary(BinaryOp::kDiv, a, table_.t.slice(0, int64_t{step} * per_step_ + which, 1), y);
  }
  Status copy(const Tensor& a, Tensor& y) { return be_->copy(a, y); }

 private:
  Backend* be_ = nullptr;
  int per_step_ = 0;
  std::vector<DeviceTensor> temps_;
  DeviceTensor table_;
};

}  // namespace

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

Status sample_ddim(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                   const Denoiser& denoise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "ddim"));
  if (schedule.alphas_cumprod.empty()) return Status::InvalidArgument("ddim: schedule has no alphas_cumprod");
  const int n = static_cast<int>(schedule.timesteps.size());
  const int64_t stride = static_cast<int64_t>(schedule.alphas_cumprod.size()) / n;
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
    if (cfg.clip_sample) {  // on the host: the backend has no clamp (see the header)
      HIPQ_ASSIGN_OR_RETURN(std::vector<float> host, to_host_f32(be, *x0));
      for (float& v : host) v = std::clamp(v, -clip, clip);
      HIPQ_RETURN_IF_ERROR(be.copy_to_device(host.data(), x0->data, x0->nbytes()));
    }
    // x = sqrt_a_prev * x0 + dir_scale * eps
    HIPQ_RETURN_IF_ERROR(ops.scale(*x0, c.sqrt_a_prev, t1));
    HIPQ_RETURN_IF_ERROR(ops.scale(*eps, c.dir_scale, t2));
    HIPQ_RETURN_IF_ERROR(ops.add(t1, t2, x));
  }
  return Status::Ok();
}

Status sample_dpmpp_2m(Backend& be, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
                       const Denoiser& denoise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "dpmpp_2m"));
  const int n = static_cast<int>(schedule.timesteps.size());
  struct AlphaSigma {
    float alpha, sigma, lambda;
  };
  auto as = [](float s) {
    const float alpha = 1.0f / std::sqrt(s * s + 1.0f);
    const float sigma = s * alpha;
    return AlphaSigma{alpha, sigma, std::log(alpha) - std::log(sigma)};
  };
  std::vector<float> divisors;  // per step: alpha_t
  for (int i = 0; i < n; ++i) divisors.push_back(as(schedule.sigmas[static_cast<size_t>(i)]).alpha);
  HIPQ_ASSIGN_OR_RETURN(StepOps ops, StepOps::make(be, x, 6, divisors, 1));
  Tensor &out = ops.tmp(0), &t1 = ops.tmp(3), &t2 = ops.tmp(4), &t3 = ops.tmp(5);
  int x0_i = 1, prev_i = 2;  // scratch holding this step's x0 and the last one's (swapped each step)
  HIPQ_RETURN_IF_ERROR(ops.scale(x, schedule.init_noise_sigma, x));
  bool have_prev = false;
  for (int i = 0; i < n; ++i) {
    const float s_cur = schedule.sigmas[static_cast<size_t>(i)];
    HIPQ_RETURN_IF_ERROR(denoise(x, {i, n, schedule.timesteps[static_cast<size_t>(i)], s_cur}, out));
    const AlphaSigma cur = as(s_cur);
    Tensor& x0 = ops.tmp(x0_i);
    if (cfg.prediction_type == "epsilon") {  // x0 = (x - sigma_t * out) / alpha_t
      HIPQ_RETURN_IF_ERROR(ops.scale(out, cur.sigma, t1));
      HIPQ_RETURN_IF_ERROR(ops.sub(x, t1, t1));
      HIPQ_RETURN_IF_ERROR(ops.div(t1, i, 0, x0));
    } else if (cfg.prediction_type == "v_prediction") {  // x0 = alpha_t * x - sigma_t * out
      HIPQ_RETURN_IF_ERROR(ops.scale(x, cur.alpha, t1));
      HIPQ_RETURN_IF_ERROR(ops.scale(out, cur.sigma, t2));
      HIPQ_RETURN_IF_ERROR(ops.sub(t1, t2, x0));
    } else {
      HIPQ_RETURN_IF_ERROR(ops.copy(out, x0));
    }
    const AlphaSigma next = as(schedule.sigmas[static_cast<size_t>(i) + 1]);
    const bool lower_order_final =
        i == n - 1 && (cfg.euler_at_final || (cfg.lower_order_final && n < 15) || cfg.final_sigmas_type == "zero");
    const float h = next.lambda - cur.lambda;
    const float ratio = next.sigma / cur.sigma;
    const float c0 = next.alpha * (std::exp(-h) - 1.0f);
    // x = ratio * x - c0 * x0 (first order), then - c1 * d1 with d1 = (x0 - x0_prev) / r0 (second order)
    HIPQ_RETURN_IF_ERROR(ops.scale(x, ratio, t2));
    HIPQ_RETURN_IF_ERROR(ops.scale(x0, c0, t3));
    if (!have_prev || lower_order_final) {
      HIPQ_RETURN_IF_ERROR(ops.sub(t2, t3, x));
    } else {
      const float h0 = cur.lambda - as(schedule.sigmas[static_cast<size_t>(i) - 1]).lambda;
      const float r0 = h0 / h;
      const float inv_r0 = 1.0f / r0;
      const float c1 = 0.5f * c0;
      HIPQ_RETURN_IF_ERROR(ops.sub(x0, ops.tmp(prev_i), t1));
      HIPQ_RETURN_IF_ERROR(ops.scale(t1, inv_r0, t1));  // d1
      HIPQ_RETURN_IF_ERROR(ops.sub(t2, t3, t2));
      HIPQ_RETURN_IF_ERROR(ops.scale(t1, c1, t1));
      HIPQ_RETURN_IF_ERROR(ops.sub(t2, t1, x));
    }
    std::swap(x0_i, prev_i);
    have_prev = true;
  }
  return Status::Ok();
}

Status sample(Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
              const Denoiser& denoise) {
  switch (schedule.kind) {
    case SamplerKind::kEuler:
    case SamplerKind::kEulerKarras: return sample_euler(backend, schedule, cfg, x, denoise);
    case SamplerKind::kDdim: return sample_ddim(backend, schedule, cfg, x, denoise);
    case SamplerKind::kDpmpp2m:
    case SamplerKind::kDpmpp2mKarras: return sample_dpmpp_2m(backend, schedule, cfg, x, denoise);
  }
  return Status::Internal("sample: unknown sampler kind");
}

}  // namespace hipq::engine
