// img2img: the pieces diffusers' StableDiffusion(XL)Img2ImgPipeline adds to
// text-to-image, each a pure function over host values that
// Pipeline::generate composes (docs/pipeline.md, "img2img"):
//
//   preprocess_init_image   RGB8 -> NCHW fp32 in [-1, 1] (VaeImageProcessor.preprocess)
//   the VAE encoder         engine/models/vae_encoder.h, then its distribution's
//                           sample with the job's generator (retrieve_latents,
//                           sample_mode="sample"), times scaling_factor
//   cut_schedule            get_timesteps: the last int(steps * strength) steps
//                           of the schedule; the sampler starts from the given
//                           latent (init_noise_sigma 1, not a scale of noise)
//   add_noise_at_start      scheduler.add_noise(init_latents, noise, t_start)
//                           as the sampler's diffusers scheduler computes it
//
// Errors: InvalidArgument naming what does not fit. Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "engine/scheduler.h"
#include "kernels/dtype.h"
#include "spec/png.h"

namespace hipq::engine {

// [1, 3, H, W] fp32: 2 * (v / 255) - 1 per sample, in fp32 as numpy and torch
// compute it (pil_to_numpy, then normalize).
std::vector<float> preprocess_init_image(const spec::RgbImage& image);

// Where an img2img job starts in a schedule of `steps`: get_timesteps'
// t_start = steps - min(int(steps * strength), steps) (spec::denoising_steps).
int strength_start_index(int steps, float strength);

// The tail of `full` from step t_start: its timesteps and sigmas from there,
// init_noise_sigma 1 (the latent handed to the sampler is already noised),
// num_inference_steps the whole schedule's. InvalidArgument when no step is left.
Result<Schedule> cut_schedule(const Schedule& full, int t_start);

// scheduler.add_noise(x, noise, timesteps[t_start]) of the diffusers scheduler
// behind full.kind, in `dtype` (the latents' dtype: every product and sum
// rounded to it, the table's values cast to it first, as torch does):
//   Euler, Euler a (and Karras):     x + noise * sigma
//   DDIM:                            sqrt(a) * x + sqrt(1 - a) * noise, a = alphas_cumprod[t]
//   DPM++ 2M (SDE, Karras):          alpha_t * x + sigma_t * noise,
//                                    alpha_t = 1 / sqrt(sigma^2 + 1), sigma_t = sigma * alpha_t
// with sigma = full.sigmas[t_start]. InvalidArgument for sizes that differ or
// a t_start outside the schedule.
Result<std::vector<float>> add_noise_at_start(const Schedule& full, int t_start, const std::vector<float>& x,
                                              const std::vector<float>& noise, kernels::DType dtype);

// v rounded to `dtype` (f32: v itself; f16 and bf16: round to nearest even).
float round_to_dtype(float v, kernels::DType dtype);

}  // namespace hipq::engine
