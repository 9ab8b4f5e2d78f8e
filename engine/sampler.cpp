#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace hipq::engine {
namespace {

Status check_inputs(const Schedule& s, const std::vector<float>& noise, std::string_view who) {
  if (s.timesteps.empty() || s.sigmas.size() != s.timesteps.size() + 1)
    return Status::InvalidArgument(std::string(who) + ": schedule has " + std::to_string(s.timesteps.size()) +
                                   " timesteps and " + std::to_string(s.sigmas.size()) + " sigmas (need n and n+1)");
  if (noise.empty()) return Status::InvalidArgument(std::string(who) + ": empty latents");
  return Status::Ok();
}

Status call(const Denoiser& denoise, const std::vector<float>& input, const DenoiseStep& step,
            std::vector<float>& out) {
  out.resize(input.size());
  HIPQ_RETURN_IF_ERROR(denoise(input, step, out));
  if (out.size() != input.size())
    return Status::Internal("denoiser returned " + std::to_string(out.size()) + " values for " +
                            std::to_string(input.size()) + " inputs at step " + std::to_string(step.index));
  return Status::Ok();
}

void scale_in_place(std::vector<float>& x, float factor) {
  for (auto& v : x) v = v * factor;
}

}  // namespace

Result<std::vector<float>> sample_euler(const Schedule& schedule, const SchedulerConfig& cfg, std::vector<float> x,
                                        const Denoiser& denoise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "euler"));
  scale_in_place(x, schedule.init_noise_sigma);
  const int n = static_cast<int>(schedule.timesteps.size());
  std::vector<float> input(x.size()), out;
  for (int i = 0; i < n; ++i) {
    const float sigma = schedule.sigmas[static_cast<size_t>(i)];
    const float in_scale = std::sqrt(sigma * sigma + 1.0f);
    for (size_t k = 0; k < x.size(); ++k) input[k] = x[k] / in_scale;
    HIPQ_RETURN_IF_ERROR(call(denoise, input, {i, n, schedule.timesteps[static_cast<size_t>(i)], sigma}, out));
    const float dt = schedule.sigmas[static_cast<size_t>(i) + 1] - sigma;
    const float sigma2p1 = sigma * sigma + 1.0f;
    const float v_scale = -sigma / std::sqrt(sigma2p1);
    for (size_t k = 0; k < x.size(); ++k) {
      float pred;
      if (cfg.prediction_type == "epsilon") {
        pred = x[k] - sigma * out[k];
      } else if (cfg.prediction_type == "v_prediction") {
        pred = out[k] * v_scale + x[k] / sigma2p1;
      } else {
        pred = out[k];
      }
      const float derivative = (x[k] - pred) / sigma;
      x[k] = x[k] + derivative * dt;
    }
  }
  return x;
}

Result<std::vector<float>> sample_ddim(const Schedule& schedule, const SchedulerConfig& cfg, std::vector<float> x,
                                       const Denoiser& denoise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "ddim"));
  if (schedule.alphas_cumprod.empty()) return Status::InvalidArgument("ddim: schedule has no alphas_cumprod");
  scale_in_place(x, schedule.init_noise_sigma);
  const int n = static_cast<int>(schedule.timesteps.size());
  const int64_t stride = static_cast<int64_t>(schedule.alphas_cumprod.size()) / n;
  std::vector<float> out;
  for (int i = 0; i < n; ++i) {
    const auto t = static_cast<int64_t>(schedule.timesteps[static_cast<size_t>(i)]);
    const int64_t prev = t - stride;
    if (t < 0 || t >= static_cast<int64_t>(schedule.alphas_cumprod.size()))
      return Status::InvalidArgument("ddim: timestep " + std::to_string(t) + " outside the training range");
    HIPQ_RETURN_IF_ERROR(call(denoise, x, {i, n, static_cast<float>(t), schedule.sigmas[static_cast<size_t>(i)]}, out));
    const float a_t = schedule.alphas_cumprod[static_cast<size_t>(t)];
    const float a_prev = prev >= 0 ? schedule.alphas_cumprod[static_cast<size_t>(prev)] : schedule.final_alpha_cumprod;
    const float b_t = 1.0f - a_t;
    const float sqrt_a = std::sqrt(a_t), sqrt_b = std::sqrt(b_t);
    const float sqrt_a_prev = std::sqrt(a_prev);
    // eta = 0: std_dev_t is 0, so the direction keeps all of 1 - a_prev.
    const float dir_scale = std::sqrt((1.0f - a_prev) - 0.0f);
    const float clip = static_cast<float>(cfg.clip_sample_range);
    for (size_t k = 0; k < x.size(); ++k) {
      float x0, eps;
      if (cfg.prediction_type == "epsilon") {
        x0 = (x[k] - sqrt_b * out[k]) / sqrt_a;
        eps = out[k];
      } else if (cfg.prediction_type == "v_prediction") {
        x0 = sqrt_a * x[k] - sqrt_b * out[k];
        eps = sqrt_a * out[k] + sqrt_b * x[k];
      } else {
        x0 = out[k];
        eps = (x[k] - sqrt_a * x0) / sqrt_b;
      }
      if (cfg.clip_sample) x0 = std::clamp(x0, -clip, clip);
      x[k] = sqrt_a_prev * x0 + dir_scale * eps;
    }
  }
  return x;
}

Result<std::vector<float>> sample_dpmpp_2m(const Schedule& schedule, const SchedulerConfig& cfg, std::vector<float> x,
                                           const Denoiser& denoise) {
  HIPQ_RETURN_IF_ERROR(check_inputs(schedule, x, "dpmpp_2m"));
  scale_in_place(x, schedule.init_noise_sigma);
  const int n = static_cast<int>(schedule.timesteps.size());
  struct AlphaSigma {
    float alpha, sigma, lambda;
  };
  auto as = [](float s) {
    const float alpha = 1.0f / std::sqrt(s * s + 1.0f);
    const float sigma = s * alpha;
    return AlphaSigma{alpha, sigma, std::log(alpha) - std::log(sigma)};
  };
  std::vector<float> out, x0(x.size()), prev_x0;
  bool have_prev = false;
  for (int i = 0; i < n; ++i) {
    const float s_cur = schedule.sigmas[static_cast<size_t>(i)];
    HIPQ_RETURN_IF_ERROR(call(denoise, x, {i, n, schedule.timesteps[static_cast<size_t>(i)], s_cur}, out));
    const AlphaSigma cur = as(s_cur);
    for (size_t k = 0; k < x.size(); ++k) {
      if (cfg.prediction_type == "epsilon") {
        x0[k] = (x[k] - cur.sigma * out[k]) / cur.alpha;
      } else if (cfg.prediction_type == "v_prediction") {
        x0[k] = cur.alpha * x[k] - cur.sigma * out[k];
      } else {
        x0[k] = out[k];
      }
    }
    const AlphaSigma next = as(schedule.sigmas[static_cast<size_t>(i) + 1]);
    const bool lower_order_final =
        i == n - 1 && (cfg.euler_at_final || (cfg.lower_order_final && n < 15) || cfg.final_sigmas_type == "zero");
    const float h = next.lambda - cur.lambda;
    const float ratio = next.sigma / cur.sigma;
    const float c0 = next.alpha * (std::exp(-h) - 1.0f);
    if (!have_prev || lower_order_final) {
      for (size_t k = 0; k < x.size(); ++k) x[k] = ratio * x[k] - c0 * x0[k];
    } else {
      const float h0 = cur.lambda - as(schedule.sigmas[static_cast<size_t>(i) - 1]).lambda;
      const float r0 = h0 / h;
      const float inv_r0 = 1.0f / r0;
      const float c1 = 0.5f * c0;
      for (size_t k = 0; k < x.size(); ++k) {
        const float d1 = inv_r0 * (x0[k] - prev_x0[k]);
        x[k] = ratio * x[k] - c0 * x0[k] - c1 * d1;
      }
    }
    prev_x0 = x0;
    have_prev = true;
  }
  return x;
}

Result<std::vector<float>> sample(const Schedule& schedule, const SchedulerConfig& cfg, std::vector<float> noise,
                                  const Denoiser& denoise) {
  switch (schedule.kind) {
    case SamplerKind::kEuler:
    case SamplerKind::kEulerKarras: return sample_euler(schedule, cfg, std::move(noise), denoise);
    case SamplerKind::kDdim: return sample_ddim(schedule, cfg, std::move(noise), denoise);
    case SamplerKind::kDpmpp2m:
    case SamplerKind::kDpmpp2mKarras: return sample_dpmpp_2m(schedule, cfg, std::move(noise), denoise);
  }
  return Status::Internal("sample: unknown sampler kind");
}

}  // namespace hipq::engine
