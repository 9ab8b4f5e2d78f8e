// GenerationSettings: everything a user chooses for one image (prompt, seed,
// size, steps, guidance, sampler, precision, RNG kind), as one value that
// travels from manifest to database to wire to worker to golden file.
//
// The sampler / precision / rng names below are the one table of them: the
// manifest (hipq submit), the CLI flags, the engine and the image metadata all
// read it, so a new sampler is added here (and in the engine's scheduler).
//
// The model is not part of it (a Pipeline is loaded for one model). JSON form
// (to_json/from_json) is the one written into latent metadata, golden metadata
// and timings files; field names are those of this struct. The wire carries it
// as the GenerationSettings protobuf message (proto/settings_codec.h), the
// database as columns of the jobs row (docs/schema.md). from_json fills
// absent fields with the defaults below and rejects unknown types/values with
// InvalidArgument naming the field. validate() checks the combination before
// any work (size a multiple of 8, steps >= 1, known sampler / precision / rng /
// vae_precision).
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"
#include "spec/lora_spec.h"

namespace hipq::spec {

struct GenerationSettings {
  std::string prompt;
  std::string negative_prompt;
  uint64_t seed = 0;
  int width = 1024;
  int height = 1024;
  int steps = 30;
  float guidance = 5.0f;
  std::string sampler = "euler";     // a name of sampler_names()
  std::string precision = "fp32";    // fp32 | fp16 | bf16 | fp8
  std::string rng = "torch-cpu";     // torch-cpu | torch-cuda
  // The schedule's timestep spacing: "" = the model's scheduler config
  // (SDXL: leading), or leading | trailing | linspace (few-step models such as
  // SDXL-Lightning and SDXL-Turbo: trailing).
  std::string timestep_spacing;
  // diffusers' guidance_rescale (phi of "Common Diffusion Noise Schedules and
  // Sample Steps are Flawed"): 0 (off) .. 1; only with guidance > 1.
  float guidance_rescale = 0.0f;
  // img2img (docs/pipeline.md, "img2img"): the init image's path ("" =
  // text-to-image) and the denoising strength, 0 < strength <= 1 (1: the
  // whole schedule, the image encoded and fully noised, as diffusers does).
  // The image must be exactly width x height pixels (PNG or JPEG).
  std::string init_image;
  float strength = 1.0f;
  // LoRA adapters merged into the weights before the first step, in order
  // (docs/adapters.md); empty = the base model.
  std::vector<LoraSpec> loras;
  // SDXL base + refiner (docs/pipeline.md, "Refiner"): the refiner model's
  // spec ("" = none: the base runs the whole schedule), the fraction of the
  // schedule the base denoises (diffusers' denoising_end / denoising_start),
  // and the refiner's aesthetic-score conditioning for the positive and the
  // negative branch (diffusers' defaults 6 and 2.5).
  std::string refiner;
  float refiner_switch_at = 0.8f;
  float aesthetic_score = 6.0f;
  float negative_aesthetic_score = 2.5f;
  // The dtype the VAE decodes the latent in (docs/pipeline.md, "decode"):
  // "" = the precision's rule, as diffusers does (fp32 for an fp16 SDXL job,
  // whose VAE has force_upcast; else the precision's dtype), or fp32 | bf16
  // whatever the precision (bf16: about a third of SDXL's fp32 decode time,
  // the image within the 16-bit image gate of the fp32 decode's; the latent
  // the same bits). The VAE encoder (img2img) is not affected.
  std::string vae_precision;

  nlohmann::json to_json() const;
  // Absent fields keep their defaults; InvalidArgument for a field of the
  // wrong type ("settings.steps: expected an integer, got \"x\"").
  static Result<GenerationSettings> from_json(const nlohmann::json& j);
  // InvalidArgument naming the flag/field: "width 1000 is not a multiple of 8", ...
  Status validate() const;

  bool operator==(const GenerationSettings&) const = default;
};

// The samplers hipq implements (engine/sampler.cpp switches on it).
enum class SamplerKind {
  kEuler,
  kEulerKarras,
  kEulerAncestral,
  kDdim,
  kDpmpp2m,
  kDpmpp2mKarras,
  kDpmpp2mSde,
  kDpmpp2mSdeKarras,
  kHeun,
  kDpm2,
  kDpm2Karras,
  kDpm2Ancestral,
  kLms,
  kLmsKarras,
  kUnipc,
  kDeis,
  kDdpm,
  kLcm,
  kDpmpp3mSde,
  kDpmpp3mSdeKarras,
  kHeunKarras,
  kDpm2AncestralKarras,
};

// One sampler hipq implements: its name in settings, the name AUTOMATIC1111's
// web UI gives it (PNG "parameters" text), whether its schedule is Karras',
// and its kind.
struct SamplerName {
  std::string name;      // "dpmpp_2m_karras"
  std::string a1111;     // "DPM++ 2M"
  bool karras = false;
  SamplerKind kind = SamplerKind::kEuler;
};
// Every sampler, in help-text order: the one list of their names. The engine
// implements each kind (engine/sampler.cpp; a test runs every entry).
const std::vector<SamplerName>& sampler_names();
// nullptr for a name not in sampler_names().
const SamplerName* find_sampler(std::string_view name);

// "; did you mean 'euler_ancestral'?" for "Euler a", "euler_a" or "eulr": the
// sampler whose web-UI name this is, else the closest name; "" when none is close.
std::string suggest_sampler(std::string_view name);

// Names accepted by validate(), for help texts and manifest checks.
const std::vector<std::string>& known_samplers();
const std::vector<std::string>& known_precisions();
const std::vector<std::string>& known_rngs();
// The samplers an img2img job (init_image set) may use: those whose
// schedule cut and add_noise engine/img2img.cpp implements.
const std::vector<std::string>& img2img_samplers();
// "leading", "trailing", "linspace" (the empty default is the model's own).
const std::vector<std::string>& known_timestep_spacings();
// "fp32", "bf16" (the empty default is the precision's rule).
const std::vector<std::string>& known_vae_precisions();

// The steps an img2img job runs: diffusers' get_timesteps,
// min(int(steps * strength), steps), with strength read as its "%.6g" decimal
// (as Python multiplies the number the user wrote: 10 * 0.7 = 7, not 6).
int denoising_steps(int steps, float strength);

// `guidance` as it appears in golden keys and file metadata: "%.6g" of the
// float ("5", "7.5"), so C++ and Python print the same text.
std::string format_guidance(float guidance);

// "a, b, c": a name list for messages and help texts.
std::string join_names(const std::vector<std::string>& names, std::string_view separator = ", ");

}  // namespace hipq::spec
