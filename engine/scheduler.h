// Noise schedules as diffusers computes them (timesteps and sigmas for a
// number of inference steps), configured like the model's scheduler/config.json.
//
// Matches the table computation of the diffusers scheduler of each sampler
// (the list below): betas (linear / scaled_linear) in fp32,
// alphas_cumprod in fp32, timestep_spacing leading / trailing / linspace,
// steps_offset, optional Karras sigmas. Tables: docs/samplers.md.
// Errors: InvalidArgument naming the config field and the value.
// Thread safety: values and pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "spec/generation_settings.h"

namespace hipq::engine {

// Which sampler (hence which scheduler table) a generation uses; the names
// and kinds are spec::sampler_names(), each kind's diffusers class and config
// docs/samplers.md:
//   kEuler / kEulerKarras      EulerDiscreteScheduler (use_karras_sigmas)
//   kEulerAncestral            EulerAncestralDiscreteScheduler
//   kDdim                      DDIMScheduler, eta = 0
//   kDpmpp2m / kDpmpp2mKarras  DPMSolverMultistepScheduler, dpmsolver++, order 2
//   kDpmpp2mSde(Karras), kDpmpp3mSde(Karras)  same, sde-dpmsolver++, order 2 / 3
//   kHeun / kHeunKarras        HeunDiscreteScheduler (two model calls per step)
//   kDpm2 / kDpm2Karras        KDPM2DiscreteScheduler (two model calls per step)
//   kDpm2Ancestral(Karras)     KDPM2AncestralDiscreteScheduler (two model calls per step)
//   kLms / kLmsKarras          LMSDiscreteScheduler, order 4
//   kUnipc                     UniPCMultistepScheduler, bh2, order 2
//   kDeis                      DEISMultistepScheduler, order 2
//   kDdpm                      DDPMScheduler
//   kLcm                       LCMScheduler
using SamplerKind = spec::SamplerKind;
// The kind of a name of spec::sampler_names(); InvalidArgument listing them otherwise.
Result<SamplerKind> parse_sampler_kind(std::string_view name);
std::string_view sampler_kind_name(SamplerKind kind);

struct SchedulerConfig {
  int num_train_timesteps = 1000;
  double beta_start = 0.00085;
  double beta_end = 0.012;
  std::string beta_schedule = "scaled_linear";  // "linear" | "scaled_linear"
  std::string prediction_type = "epsilon";      // "epsilon" | "v_prediction" | "sample"
  std::string timestep_spacing = "leading";     // "leading" | "trailing" | "linspace"
  int steps_offset = 1;
  bool use_karras_sigmas = false;
  bool set_alpha_to_one = false;  // DDIM's final alpha
  bool clip_sample = false;       // DDIM
  double clip_sample_range = 1.0;
  std::string interpolation_type = "linear";  // Euler: only "linear" supported
  bool lower_order_final = true;              // DPM++
  bool euler_at_final = false;                // DPM++
  std::string final_sigmas_type = "zero";     // DPM++: "zero" | "sigma_min"
  std::string variance_type = "fixed_small";  // DDPM: "fixed_small" | "fixed_large" (others refused)
  int original_inference_steps = 50;          // LCM: the distillation's timestep grid
  double timestep_scaling = 10.0;             // LCM: boundary-condition scalings

  // SDXL's / SD 1.x's / SD 2.x's published scheduler config ("sd2" = the
  // 512-base epsilon variant).
  static SchedulerConfig defaults_for_family(std::string_view family);
  // Fields present in `j` override the defaults; unknown fields are ignored
  // (diffusers ignores them too). InvalidArgument naming a bad field.
  static Result<SchedulerConfig> from_json(const nlohmann::json& j, const SchedulerConfig& defaults);
  static Result<SchedulerConfig> from_json(const nlohmann::json& j);
};

struct Schedule {
  SamplerKind kind = SamplerKind::kEuler;
  // Model timesteps, one per model call in call order (float: diffusers keeps
  // Euler's as float32, fractional with Karras; DDIM/DPM are integers stored
  // as float). One per step, except Heun and KDPM2: two per step but the last
  // (diffusers' own interleaved scheduler.timesteps).
  std::vector<float> timesteps;
  // timesteps.size() + 1 values: the sigma each model call's input is scaled
  // by (KDPM2: its interpolated sigma on the second call of a step), then the
  // final sigma (0 for "zero"). For DDIM, DDPM and LCM these are the
  // equivalent sigmas sqrt((1-a)/a) of each timestep (informational).
  std::vector<float> sigmas;
  // alphas_cumprod (num_train_timesteps values, fp32), needed by DDIM.
  std::vector<float> alphas_cumprod;
  float final_alpha_cumprod = 1.0f;  // DDIM
  float init_noise_sigma = 1.0f;     // the factor on the initial noise
  // The steps of the whole schedule when this one is its tail (img2img,
  // engine/img2img.h: diffusers sets the scheduler for all the steps and
  // starts at begin_index); 0 = timesteps.size(). DDIM's step stride and
  // DPM++'s lower_order_final read the whole schedule's count.
  int num_inference_steps = 0;
  // The schedule is the head of a longer one (the base's share of a base +
  // refiner job, engine/refiner.h): its last call is not the whole
  // schedule's last, so DPM++'s lower_order_final does not apply to it.
  bool truncated_end = false;
};

// The whole schedule's step count (Schedule::num_inference_steps).
inline int inference_steps(const Schedule& s) {
  return s.num_inference_steps > 0 ? s.num_inference_steps : static_cast<int>(s.timesteps.size());
}

// fp32 betas/alphas_cumprod as diffusers builds them.
Result<std::vector<float>> make_alphas_cumprod(const SchedulerConfig& cfg);

Result<Schedule> make_schedule(const SchedulerConfig& cfg, int steps, SamplerKind kind);

}  // namespace hipq::engine
