#include "engine/img2img.h"

#include <cmath>
#include <string>

#include "spec/generation_settings.h"

namespace hipq::engine {

using kernels::DType;

float round_to_dtype(float v, DType dtype) {
  switch (dtype) {
    case DType::kF16: return kernels::f16_to_f32(kernels::f32_to_f16(v));
    case DType::kBF16: return kernels::bf16_to_f32(kernels::f32_to_bf16(v));
    default: return v;
  }
}

std::vector<float> preprocess_init_image(const spec::RgbImage& image) {
  const size_t plane = static_cast<size_t>(image.width) * static_cast<size_t>(image.height);
  std::vector<float> out(plane * 3);
  for (size_t i = 0; i < plane; ++i)
    for (size_t c = 0; c < 3; ++c) {
      const float unit = static_cast<float>(image.rgb[i * 3 + c]) / 255.0f;  // numpy: float32 / 255.0
      out[c * plane + i] = 2.0f * unit - 1.0f;                             // torch: 2.0 * x - 1.0
    }
  return out;
}

int strength_start_index(int steps, float strength) {
  const int run = spec::denoising_steps(steps, strength);
  return steps - run > 0 ? steps - run : 0;
}

Result<Schedule> cut_schedule(const Schedule& full, int t_start) {
  const int n = static_cast<int>(full.timesteps.size());
  if (t_start < 0 || t_start >= n)
    return Status::InvalidArgument("img2img: the schedule of " + std::to_string(n) + " steps has no step from index " +
                                   std::to_string(t_start));
  if (full.sigmas.size() != full.timesteps.size() + 1)
    return Status::InvalidArgument("img2img: the schedule has " + std::to_string(full.sigmas.size()) + " sigmas for " +
                                   std::to_string(n) + " timesteps");
  Schedule cut = full;
  cut.timesteps.assign(full.timesteps.begin() + t_start, full.timesteps.end());
  cut.sigmas.assign(full.sigmas.begin() + t_start, full.sigmas.end());
  cut.init_noise_sigma = 1.0f;
  cut.num_inference_steps = inference_steps(full);
  return cut;
}

Result<std::vector<float>> add_noise_at_start(const Schedule& full, int t_start, const std::vector<float>& x,
                                              const std::vector<float>& noise, DType dtype) {
  if (x.size() != noise.size())
    return Status::InvalidArgument("img2img: " + std::to_string(x.size()) + " latent values but " +
                                   std::to_string(noise.size()) + " noise values");
  if (t_start < 0 || t_start >= static_cast<int>(full.timesteps.size()) || full.sigmas.size() <= static_cast<size_t>(t_start))
    return Status::InvalidArgument("img2img: add_noise at step " + std::to_string(t_start) + " of a schedule of " +
                                   std::to_string(full.timesteps.size()) + " steps");
  auto r = [dtype](float v) { return round_to_dtype(v, dtype); };
  std::vector<float> out(x.size());
  const float sigma = r(full.sigmas[static_cast<size_t>(t_start)]);  // sigmas.to(original_samples.dtype)
  switch (full.kind) {
    case SamplerKind::kEuler:
    case SamplerKind::kEulerKarras:
    case SamplerKind::kEulerAncestral:
      // original_samples + noise * sigma
      for (size_t i = 0; i < x.size(); ++i) out[i] = r(x[i] + r(noise[i] * sigma));
      return out;
    case SamplerKind::kDdim: {
      const auto t = static_cast<int64_t>(full.timesteps[static_cast<size_t>(t_start)]);
      if (t < 0 || t >= static_cast<int64_t>(full.alphas_cumprod.size()))
        return Status::InvalidArgument("img2img: DDIM timestep " + std::to_string(t) + " outside alphas_cumprod");
      const float a = r(full.alphas_cumprod[static_cast<size_t>(t)]);  // alphas_cumprod.to(dtype)
      const float sqrt_a = r(std::sqrt(a));                          // ** 0.5
      const float sqrt_b = r(std::sqrt(r(1.0f - a)));                // (1 - a) ** 0.5
      for (size_t i = 0; i < x.size(); ++i) out[i] = r(r(sqrt_a * x[i]) + r(sqrt_b * noise[i]));
      return out;
    }
    case SamplerKind::kDpmpp2m:
    case SamplerKind::kDpmpp2mKarras:
    case SamplerKind::kDpmpp2mSde:
    case SamplerKind::kDpmpp2mSdeKarras: {
      // _sigma_to_alpha_sigma_t: alpha_t = 1 / ((sigma**2 + 1) ** 0.5), sigma_t = sigma * alpha_t
      const float alpha_t = r(1.0f / r(std::sqrt(r(r(sigma * sigma) + 1.0f))));
      const float sigma_t = r(sigma * alpha_t);
      for (size_t i = 0; i < x.size(); ++i) out[i] = r(r(alpha_t * x[i]) + r(sigma_t * noise[i]));
      return out;
    }
    // Not yet for img2img (spec::img2img_samplers(); validate() refuses them first).
    case SamplerKind::kHeun:
    case SamplerKind::kHeunKarras:
    case SamplerKind::kDpm2:
    case SamplerKind::kDpm2Karras:
    case SamplerKind::kDpm2Ancestral:
    case SamplerKind::kDpm2AncestralKarras:
    case SamplerKind::kLms:
    case SamplerKind::kLmsKarras:
    case SamplerKind::kUnipc:
    case SamplerKind::kDeis:
    case SamplerKind::kDdpm:
    case SamplerKind::kLcm:
    case SamplerKind::kDpmpp3mSde:
    case SamplerKind::kDpmpp3mSdeKarras:
      return Status::Unimplemented("img2img: add_noise for this sampler is not implemented (" +
                                   spec::join_names(spec::img2img_samplers()) + " are)");
  }
  return Status::Internal("img2img: add_noise for an unknown sampler kind");
}

}  // namespace hipq::engine
