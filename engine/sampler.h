// Samplers: free functions that run the denoising loop over a Schedule on a
// backend, calling the model through a Denoiser callback. Each reproduces the
// step of one diffusers scheduler in fp32, in the same operation order: every
// arithmetic operation of diffusers' step() is one elementwise op of the
// backend (scale for a product with a per-step constant, binary for the rest),
// so each result is rounded where PyTorch rounds it.
//
// The latents stay on the backend's device for the whole loop: the caller
// hands over the noise as an fp32 device tensor, the sampler updates it in
// place, and nothing inside the loop copies to or from the host or waits for
// the device (per-step constants that are divided by go up once, before the
// first step, as a small table). The one exception: DDIM with clip_sample
// (no model family hipq knows sets it) clamps x0 on the host.
//
// The callback contract: the sampler passes the model input (already scaled as
// the scheduler's scale_model_input does: x / sqrt(sigma^2 + 1) for Euler, x
// unchanged for DDIM and DPM++, whose latents live in the variance-preserving
// space) as an fp32 device tensor of the latents' shape owned by the sampler,
// and the step (index, timestep the UNet is given, sigma); the callback
// enqueues the work that
// writes the raw model output (epsilon or v, per cfg.prediction_type,
// classifier-free guidance already applied) into `model_output`. A non-OK
// Status from the callback (e.g. Cancelled) stops the loop and is returned as
// is. Thread safety: the backend's thread; the callback runs on it.
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "engine/rng.h"
#include "engine/scheduler.h"
#include "kernels/backend.h"

namespace hipq::engine {

struct DenoiseStep {
  int index = 0;        // 0-based model call (one per step except Heun / DPM2: two per step but the last)
  int count = 0;        // total model calls (schedule.timesteps.size())
  float timestep = 0;   // what the UNet receives
  float sigma = 0;      // the step's sigma (DDIM: equivalent sigma)
};

using Denoiser = std::function<Status(const kernels::Tensor& model_input, const DenoiseStep& step,
                                      kernels::Tensor& model_output)>;

// Where a stochastic sampler (Euler a, DPM++ 2M SDE, ...) draws each step's
// noise: the job's generator after the initial noise (diffusers passes the
// same torch.Generator to prepare_latents and to every step()), and the dtype
// diffusers' model output has (the pipeline's precision), in which the
// ancestral steps draw. Deterministic samplers ignore it; a stochastic one
// without a generator is InvalidArgument.
struct StepNoiseSource {
  TorchGenerator* generator = nullptr;
  kernels::DType model_dtype = kernels::DType::kF32;
  // A batch of jobs (Pipeline::generate_batch): one generator per latent of
  // x (its first dimension), in order, each drawing its own latent's share
  // of every step's noise, the values it draws alone. Empty: `generator`
  // draws for the whole of x.
  std::vector<TorchGenerator*> per_latent{};
  // The generators a step's draw takes from, in order of x's values.
  std::vector<TorchGenerator*> generators() const {
    return per_latent.empty() ? std::vector<TorchGenerator*>{generator} : per_latent;
  }
};

// Each takes the initial noise (unit variance, e.g. torch_randn_cpu) in `x`,
// a contiguous fp32 tensor of `backend`, multiplies it by
// schedule.init_noise_sigma and leaves the final latents in it.
// InvalidArgument for a schedule without steps or an x that is not such a tensor.
// diffusers/schedulers/scheduling_euler_discrete.py (EulerDiscreteScheduler.step)
Status sample_euler(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                    kernels::Tensor& x, const Denoiser& denoise);
// diffusers/schedulers/scheduling_ddim.py (DDIMScheduler.step, eta = 0)
Status sample_ddim(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                   kernels::Tensor& x, const Denoiser& denoise);
// diffusers/schedulers/scheduling_dpmsolver_multistep.py (dpmsolver++, order 2, midpoint);
// with `noise`, sde-dpmsolver++ (DPM++ 2M SDE), which draws f32 noise every step.
Status sample_dpmpp_2m(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                       kernels::Tensor& x, const Denoiser& denoise, const StepNoiseSource* noise = nullptr);
// diffusers/schedulers/scheduling_euler_ancestral_discrete.py (EulerAncestralDiscreteScheduler.step)
Status sample_euler_ancestral(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                              kernels::Tensor& x, const Denoiser& denoise, const StepNoiseSource& noise);
// diffusers/schedulers/scheduling_heun_discrete.py (HeunDiscreteScheduler.step):
// two model calls per step but the last (Schedule.timesteps has one per call).
Status sample_heun(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                   kernels::Tensor& x, const Denoiser& denoise);
// diffusers/schedulers/scheduling_k_dpm_2_discrete.py (KDPM2DiscreteScheduler.step); with
// `noise`, scheduling_k_dpm_2_ancestral_discrete.py (KDPM2AncestralDiscreteScheduler.step),
// which draws noise in the model's dtype on each second call. Two model calls per
// step but the last; the schedule must be make_schedule's for kDpm2* (call-ordered sigmas).
Status sample_dpm2(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                   kernels::Tensor& x, const Denoiser& denoise, const StepNoiseSource* noise = nullptr);
// diffusers/schedulers/scheduling_lms_discrete.py (LMSDiscreteScheduler.step, order 4)
Status sample_lms(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                  kernels::Tensor& x, const Denoiser& denoise);
// diffusers/schedulers/scheduling_unipc_multistep.py (UniPCMultistepScheduler.step: bh2, order 2,
// predict_x0, the UniC corrector on every step but the first)
Status sample_unipc(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                    kernels::Tensor& x, const Denoiser& denoise);
// diffusers/schedulers/scheduling_deis_multistep.py (DEISMultistepScheduler.step: order 2, log-rho)
Status sample_deis(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                   kernels::Tensor& x, const Denoiser& denoise);
// diffusers/schedulers/scheduling_ddpm.py (DDPMScheduler.step): draws noise in the model's
// dtype on every step whose timestep is above 0.
Status sample_ddpm(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                   kernels::Tensor& x, const Denoiser& denoise, const StepNoiseSource& noise);
// diffusers/schedulers/scheduling_lcm.py (LCMScheduler.step): draws noise in the model's dtype
// on every step but the last.
Status sample_lcm(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                  kernels::Tensor& x, const Denoiser& denoise, const StepNoiseSource& noise);
// diffusers/schedulers/scheduling_dpmsolver_multistep.py (sde-dpmsolver++, solver_order 3):
// DPM++ 3M SDE, which draws f32 noise every step.
Status sample_dpmpp_3m_sde(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg,
                           kernels::Tensor& x, const Denoiser& denoise, const StepNoiseSource& noise);
// Dispatches on schedule.kind.
Status sample(kernels::Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg, kernels::Tensor& x,
              const Denoiser& denoise, const StepNoiseSource& noise = {});
// Whether the sampler of `kind` draws noise every step (needs a generator).
bool draws_step_noise(SamplerKind kind);

}  // namespace hipq::engine
