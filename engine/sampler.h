// Samplers: free functions that run the denoising loop over a Schedule,
// calling the model through a Denoiser callback. Each reproduces the step of
// one diffusers scheduler in fp32, in the same operation order.
//
// The callback contract: the sampler passes the model input (already scaled as
// the scheduler's scale_model_input does: x / sqrt(sigma^2 + 1) for Euler, x
// unchanged for DDIM and DPM++, whose latents live in the variance-preserving
// space) and the timestep the UNet is given;
// the callback writes the raw model output (epsilon or v, per
// cfg.prediction_type, classifier-free guidance already applied) of the same
// size into `model_output`. A non-OK Status from the callback (e.g. Cancelled)
// stops the loop and is returned as is.
// Latents are host vectors (small: 4 x 128 x 128 for SDXL at 1024 px).
// Thread safety: reentrant; the callback is called on the caller's thread.
#pragma once

#include <functional>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "engine/scheduler.h"

namespace hipq::engine {

struct DenoiseStep {
  int index = 0;        // 0-based step
  int count = 0;        // total steps
  float timestep = 0;   // what the UNet receives
  float sigma = 0;      // the step's sigma (DDIM: equivalent sigma)
};

using Denoiser = std::function<Status(const std::vector<float>& model_input, const DenoiseStep& step,
                                      std::vector<float>& model_output)>;

// Each takes the initial noise (unit variance, e.g. torch_randn_cpu) and returns
// the final latents; the noise is multiplied by schedule.init_noise_sigma first.
// diffusers/schedulers/scheduling_euler_discrete.py (EulerDiscreteScheduler.step)
Result<std::vector<float>> sample_euler(const Schedule& schedule, const SchedulerConfig& cfg,
                                        std::vector<float> noise, const Denoiser& denoise);
// diffusers/schedulers/scheduling_ddim.py (DDIMScheduler.step, eta = 0)
Result<std::vector<float>> sample_ddim(const Schedule& schedule, const SchedulerConfig& cfg,
                                       std::vector<float> noise, const Denoiser& denoise);
// diffusers/schedulers/scheduling_dpmsolver_multistep.py (dpmsolver++, order 2, midpoint)
Result<std::vector<float>> sample_dpmpp_2m(const Schedule& schedule, const SchedulerConfig& cfg,
                                           std::vector<float> noise, const Denoiser& denoise);
// Dispatches on schedule.kind.
Result<std::vector<float>> sample(const Schedule& schedule, const SchedulerConfig& cfg,
                                  std::vector<float> noise, const Denoiser& denoise);

}  // namespace hipq::engine
