// Pipeline::Impl: the loaded models and what generate() and
// generate_batch() share (engine/pipeline.h is the interface). Internal to
// the pipeline's own files (pipeline.cpp, pipeline_batch.cpp): nothing else
// includes it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/lora/lora_base_bits.h"
#include "engine/lora/lora_set.h"
#include "engine/memory_plan.h"
#include "engine/model_components.h"
#include "engine/models/clip_text.h"
#include "engine/models/device_tensor.h"
#include "engine/models/unet.h"
#include "engine/models/vae.h"
#include "engine/models/vae_encoder.h"
#include "engine/phase_peaks.h"
#include "engine/pipeline.h"
#include "engine/rng.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/tokenizer.h"
#include "spec/init_image.h"

namespace hipq::engine {

namespace pipeline_detail {

// The model folder's components of text encoders 1 and 2 (SDXL has both).
inline constexpr const char* kTextEncoderKeys[2] = {"text_encoder", "text_encoder_2"};

// The encoder stack of one family: which token padding each encoder expects
// (diffusers' tokenizer configs: CLIP-L pads with <|endoftext|>, OpenCLIP
// tokenizers with "!" = id 0) and what the UNet consumes.
struct TextEncoderSlot {
  std::optional<ClipTextModel> model;
  bool pad_with_eos = true;
};

}  // namespace pipeline_detail

struct Pipeline::Impl {
  using DType = kernels::DType;

  kernels::Backend* backend = nullptr;
  // The model as opened (the UNet's and text encoders' sources kept as
  // lora::RetainedBaseSource), and as loaded: `base` with the LoRA set's
  // merged views over the same sources (engine/lora/lora_set.h).
  ModelComponents base;
  ModelComponents components;
  std::vector<lora::AppliedLora> loras;
  // What the current set puts on each weight it modifies (LoraSet::signatures).
  lora::WeightSignatures lora_signatures;
  // Device room for the base bits of LoRA-modified weights (the
  // RetainedBaseSources of `base` share it; shapes.lora_base_bits counts what
  // it holds), the job its room was planned for (the last generation's
  // settings, else the defaults), and the last switch's split.
  std::shared_ptr<lora::DeviceBitsBudget> lora_budget = std::make_shared<lora::DeviceBitsBudget>();
  std::optional<spec::GenerationSettings> lora_reference_job;
  LoraSwitchSplit lora_split;
  LoadOptions options;
  std::string family;
  // The SDXL refiner's layout (stabilityai/stable-diffusion-xl-refiner-1.0):
  // text encoder 2 alone, five time ids ending in the aesthetic score
  // (model_index.json's requires_aesthetics_score).
  bool refiner_model = false;
  // model_index.json's force_zeros_for_empty_prompt (SDXL; the base's true,
  // the refiner's false: it encodes the empty negative prompt).
  bool force_zeros_for_empty_prompt = true;
  SchedulerConfig scheduler;
  nlohmann::json scheduler_json;
  std::optional<ClipTokenizer> tokenizer;
  pipeline_detail::TextEncoderSlot enc1, enc2;  // enc2: SDXL only
  std::optional<UNet> unet;
  std::optional<VaeDecoder> vae;
  // Loaded by the first img2img job (and again after a precision switch).
  std::optional<VaeEncoder> vae_encoder;
  // The models' shapes as loaded (memory plans read them) and the dtype the
  // UNet and text encoders are in.
  ModelShapes shapes;
  DType loaded_dtype = DType::kF32;
  std::string loaded_precision;
  double load_ms = 0;
  // The load phase of the most recent load, reported by the next generate().
  std::optional<PhaseTiming> pending_load;

  Status load_models(const std::string& precision);
  // Which of text encoders 1 and 2 (index 0, 1) the model has, in order:
  // shapes.text_encoders[j] is encoder text_encoder_indices()[j].
  std::vector<size_t> text_encoder_indices() const;
  // After a LoRA switch: the weights of `touched` (component -> names: those
  // the old or the new set modifies) written again in place, from
  // `components`, in the models on the device (engine/lora/lora_rebind.h);
  // every other tensor, the shapes and the VAE stay.
  Status switch_lora_weights(const std::map<std::string, std::vector<std::string>>& touched);
  // Keeps the base bits of the weights `targets` modifies (lora::RetainedBaseSource) once read.
  void retain_lora_targets(const std::map<std::string, std::vector<std::string>>& targets);
  // The device room for those base bits: what the pool may hold less the
  // peak of the reference job's plan without them (lora_reference_job at
  // `precision`); no limit on a backend that knows no memory size (cpu
  // without a cap: every plan fits). Then the rest stays on the host.
  void set_lora_device_budget(const std::string& precision);
  // shapes.lora_base_bits from what the sources hold on the device.
  void count_lora_base_bits();
  // Before a job's plan: the base bits on the device stay where the job's
  // plan with them resolves (placement, VAE tile) as it would without them;
  // else they move to the host. No new copy is made on the device until the
  // next load or switch; the job becomes their reference.
  Status fit_lora_base_bits(const spec::GenerationSettings& s, const ModelShapes* refiner);
  // The text encoders at loaded_dtype, unless they are on the device already
  // (a low placement loads them for each prompt it encodes).
  Status load_text_encoders();
  // One encoder (0: enc1, 1: enc2) when the model has it and it is not held.
  Status load_text_encoder(size_t slot);
  void release_text_encoders();
  bool text_encoders_held() const { return enc1.model.has_value() || enc2.model.has_value(); }
  Result<std::vector<int32_t>> token_ids(const std::string& text, bool pad_with_eos) const;
  struct TextConditioning {
    DeviceTensor hidden;  // [N, 77, D]
    DeviceTensor pooled;  // [N, P] (SDXL)
    int batch = 1;
  };
  // one_at_a_time (the low placement): each encoder is loaded, run and
  // released before the next loads, so the device holds one at a time.
  Result<TextConditioning> encode_text(const spec::GenerationSettings& s, bool cfg,
                                       bool one_at_a_time = false);
  // SDXL micro-conditioning per row: the base's original size, crop top-left,
  // target size; the refiner's original size, crop top-left, aesthetic score.
  std::vector<float> time_ids(const spec::GenerationSettings& s, int batch) const;
  // VAE decode of a latent already divided by the scaling factor: [1, 3, 8h, 8w],
  // in tiles of `tile` pixels when > 0 (else options.vae_tile_above_latent_pixels' rule).
  Result<std::vector<float>> run_vae(const std::vector<float>& z, int64_t lh, int64_t lw, int64_t tile = 0);
  // The VAE decoder in `dtype` (a memory plan's vae_dtype): kept when it is
  // loaded so, else the one held goes back before the new one loads, so the
  // device never holds both. On failure none is held and the next generate()
  // loads the models afresh.
  Status use_vae_dtype(DType dtype);
  // The dtype the init image is encoded in: diffusers' SDXL img2img encodes
  // in fp32 when the VAE config has force_upcast, SD 1.x/2.x in the precision.
  DType encoder_dtype() const;
  Status load_vae_encoder();
  // img2img's starting latent (engine/img2img.h): the preprocessed image
  // encoded, sampled from its distribution with `generator`, scaled, then
  // noised at the schedule's step t_start with the generator's next draw.
  Result<std::vector<float>> init_latent(const spec::RgbImage& image, const Schedule& full, int t_start,
                                         TorchGenerator& generator, DType latent_dtype);
};

namespace pipeline_detail {

// One job of a denoising loop (a batch holds several, one per latent).
struct LoopJob {
  const spec::GenerationSettings* settings = nullptr;
  const ProgressFn* progress = nullptr;       // may be null or empty
  const std::atomic<bool>* cancel = nullptr;  // may be null
  GenerationOutput* out = nullptr;            // its step rows (and step_models) are appended here
  // Set when its cancel flag turned true: from then its steps and progress
  // are not reported; stopped_at is the step (1-based, of total_steps) it stopped at.
  bool stopped = false;
  int stopped_at = 0;
};

// One model's share of the denoising loop: the UNet of `im` over `schedule`
// on the jobs' latents (on the device) and generators. Progress counts from
// `step_offset` of `total_steps` (0: the schedule's model calls).
struct LoopRun {
  std::vector<LoopJob> jobs;
  std::string model;  // "" (a job of one model) | "base" | "refiner"
  int step_offset = 0;
  int total_steps = 0;
};

// latents: [jobs, lc, lh, lw] f32 on the device, updated in place; hidden,
// pooled and time_ids: `batch` rows (2 per job with classifier-free
// guidance: job j's unconditional row 2j and conditional 2j + 1; else 1 per
// job). Cancelled once every job has stopped (LoopJob::stopped).
Status denoise_loop(Pipeline::Impl& im, const kernels::Tensor& hidden, const kernels::Tensor* pooled,
                    const std::vector<float>& time_ids, int batch, const Schedule& schedule,
                    const SchedulerConfig& scheduler_cfg, kernels::Tensor& latents,
                    const StepNoiseSource& noise, LoopRun& run);

// The planned decode ran out of device memory: the latent decoded again in
// smaller tiles (GenerationOutput::decode_fallback says which), else
// ResourceExhausted naming what ran out.
Result<std::vector<float>> decode_in_smaller_tiles(Pipeline::Impl& decoder, kernels::Backend& be,
                                                   const std::vector<float>& z, int64_t lh, int64_t lw,
                                                   const Status& first, GenerationOutput& out);

// The model's scheduler config, with the job's timestep spacing when it names one.
SchedulerConfig job_scheduler(const Pipeline::Impl& im, const spec::GenerationSettings& s);

// The start generate() and generate_batch() share, after the caller reset
// the backend's peak: whether the job finds its models warm (out.warm), the
// models in the job's precision (`rf`: the refiner of a base + refiner job,
// or null; its latent space checked against the base's), their loads' time
// as the job's one load row (each model's own in out.model_phases when
// there is a refiner), the LoRA base bits fitted, and the plan of `jobs`
// such jobs in the pipeline's placement (out.memory_plan).
Status begin_generation(Pipeline::Impl& im, Pipeline::Impl* rf, const spec::GenerationSettings& s, int jobs,
                        kernels::Backend& be, GenerationOutput& out);

// The decoding model's VAE in the plan's dtype (out.memory_plan.vae_dtype);
// the time goes to the job's load phase (and the refiner's share).
Status load_decoder_in_plan_dtype(Pipeline::Impl& decoder, bool refiner, kernels::Backend& be,
                                  GenerationOutput& out);

// out.latent (the job's final latent on the host) decoded by `decoder` as
// the job's plan says (a smaller tile when that runs out of memory), into
// out.rgb / width / height; the decode's peak goes to `peaks`. The pool's
// cache and the VAE's kept forms go back after it.
Status decode_latent(Pipeline::Impl& decoder, kernels::Backend& be, const spec::GenerationSettings& s,
                     PhasePeaks& peaks, GenerationOutput& out);

}  // namespace pipeline_detail

}  // namespace hipq::engine
