// Noise schedules as diffusers computes them (timesteps and sigmas for a
// number of inference steps), configured like the model's scheduler/config.json.
//
// Matches diffusers' EulerDiscreteScheduler, DDIMScheduler and
// DPMSolverMultistepScheduler (solver_order 2, "dpmsolver++", midpoint) in
// their table computation: betas (linear / scaled_linear) in fp32,
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
// and kinds are spec::sampler_names():
//   kEuler          EulerDiscreteScheduler
//   kEulerKarras    EulerDiscreteScheduler, use_karras_sigmas=True
//   kDdim           DDIMScheduler, eta = 0
//   kDpmpp2m        DPMSolverMultistepScheduler, dpmsolver++, order 2
//   kDpmpp2mKarras  same with use_karras_sigmas=True
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
  // Model timesteps, one per step (float: Euler interpolates nothing but
  // diffusers keeps them as float32; DDIM/DPM are integers stored as float).
  std::vector<float> timesteps;
  // steps + 1 values; the last is the final sigma (0 for "zero"). For DDIM these
  // are the equivalent sigmas sqrt((1-a)/a) of each timestep (informational).
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
};

// The whole schedule's step count (Schedule::num_inference_steps).
inline int inference_steps(const Schedule& s) {
  return s.num_inference_steps > 0 ? s.num_inference_steps : static_cast<int>(s.timesteps.size());
}

// fp32 betas/alphas_cumprod as diffusers builds them.
Result<std::vector<float>> make_alphas_cumprod(const SchedulerConfig& cfg);

Result<Schedule> make_schedule(const SchedulerConfig& cfg, int steps, SamplerKind kind);

}  // namespace hipq::engine
