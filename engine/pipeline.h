// Pipeline: text-to-image generation on one backend, the job every worker
// runs. Prompt and seed in; final latent, RGB8 image and phase timings out.
//
//   tokenize -> text encoders (SDXL: CLIP-L + OpenCLIP bigG, pooled + time_ids;
//   SD 1.x/2.x: one CLIP) -> initial noise (engine/rng.h, [1, 4, H/8, W/8],
//   times init_noise_sigma) -> denoise loop (engine/sampler.h), the UNet run as
//   one batch of two (negative, positive) for classifier-free guidance ->
//   final latent -> VAE decode of latent / scaling_factor (fp32 for SDXL's VAE
//   whatever the precision; tiled when large) -> RGB8 as diffusers' numpy_to_pil.
// An empty negative prompt follows diffusers per family: SDXL
// (force_zeros_for_empty_prompt) uses zero embeddings, SD 1.x/2.x encode "".
// Details: docs/pipeline.md.
//
// Ownership: a Pipeline owns the loaded models (weights on the backend) and
// borrows the Backend, which must outlive it. Load once, generate many times:
// the second and later generate() calls report warm = true. A generate() at a
// precision other than the loaded one reloads the models at that precision
// (that job reports warm = false and a load phase). Memory: each generate()
// first resolves its placement (LoadOptions::placement, engine/memory_plan.h);
// between phases the backend's cached blocks go back to the device and the
// kept forms of constant weights are dropped (made again by the next job's
// first step), so what the process holds follows the plan (docs/memory.md).
// Thread safety: one thread at a time (like its Backend).
// Errors: load(): NotFound / Corruption / InvalidArgument from open_model and
// the models (naming the file and tensor); InvalidArgument / Unimplemented
// from LoadOptions::loras (engine/lora/lora_set.h: each names the LoRA file),
// before any device work. generate(): InvalidArgument from
// settings.validate() before any device work; FailedPrecondition (a
// configuration error naming the need, the device and the way out) when the
// job's memory plan fits no allowed placement; Cancelled when *cancel turns
// true (checked between steps); ResourceExhausted when device memory runs out;
// the backend's errors otherwise.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"
#include "engine/lora/lora_set.h"
#include "engine/memory_plan.h"
#include "engine/phase_peaks.h"
#include "engine/phase_timer.h"
#include "kernels/backend.h"
#include "spec/generation_settings.h"

namespace hipq::engine {

struct ModelComponents;

struct LoadOptions {
  // Precision the UNet and text encoders are loaded at (fp32 | fp16 | bf16);
  // a job may ask for another (see above).
  std::string precision = "fp32";
  // Decode tiled (diffusers' enable_vae_tiling: tiles of the VAE config's
  // sample_size, 25% overlap) when the latent has more than this many pixels
  // (H/8 * W/8); 0 = always enable tiling, < 0 = never. diffusers' tiled
  // decode splits only latents larger than one tile, so up to the model's
  // native size the result equals the untiled decode. tools/golden/ applies
  // the same rule, so goldens and hipq decode alike.
  int64_t vae_tile_above_latent_pixels = 128 * 128;
  // Where the models and activations live (engine/memory_plan.h): auto picks
  // standard when the job's plan fits the backend's memory, else low; low
  // loads the text encoders only while a prompt is encoded. A job whose plan
  // fits no allowed placement fails before any device work.
  Placement placement = Placement::kAuto;
  // LoRA adapters folded into the UNet and text encoder weights at load
  // (engine/lora/, docs/adapters.md), each with its scale. Every file is read
  // and checked against the model before any device work.
  std::vector<spec::LoraSpec> loras;
};

// Each model's share of a phase in a base + refiner job.
struct ModelPhaseTiming {
  std::string model;  // "base" | "refiner"
  PhaseTiming timing;
};

// How a base + refiner job split its schedule (engine/refiner.h).
struct RefinerSplit {
  std::string model_spec;      // the refiner's
  std::string weights_sha256;  // the refiner's
  float switch_at = 0.8f;
  int base_cutoff = 0;         // discrete timestep cutoff in the base's scheduler
  int refiner_cutoff = 0;      // ... and in the refiner's
  int base_steps = 0;          // model calls the base ran (the first of its schedule)
  int refiner_steps = 0;       // model calls the refiner ran (the last of its schedule)
  int refiner_start = 0;       // the index in the refiner's schedule it started at
};

struct GenerationOutput {
  std::vector<float> latent;             // final latent, fp32, [1, 4, H/8, W/8]
  std::vector<int64_t> latent_shape;
  std::vector<uint8_t> rgb;              // width * height * 3, row-major
  int width = 0;
  int height = 0;
  // load (only when this call loaded models), text_encode, denoise, decode.
  // The caller appends write / parity with its own PhaseTimer.
  std::vector<PhaseTiming> phases;
  std::vector<PhaseTiming> steps;        // one per denoise step, phase = "step"
  // Base + refiner jobs only (else empty): the model of each entry of
  // `steps` ("base" | "refiner"), and each model's share of the phases
  // (load, text_encode, denoise; the job's rows above sum them).
  std::vector<std::string> step_models;
  std::vector<ModelPhaseTiming> model_phases;
  std::optional<RefinerSplit> refiner;
  int64_t peak_memory_bytes = 0;         // backend peak during this generate()
  // Each phase's peak (text_encode, image_encode, denoise, decode), to set
  // against memory_plan's moment of that phase.
  std::vector<PhasePeak> phase_peaks;
  bool warm = false;                     // models were already loaded
  // The placement it ran in and its plan (engine/memory_plan.h).
  MemoryPlan memory_plan;
  // Set when the planned decode ran out of device memory (the plan under the
  // device's real need, or memory taken since the plan) and the finished
  // latent was decoded again in smaller tiles: the tile it took and what ran
  // out. Unset for a decode as planned.
  struct DecodeFallback {
    int64_t vae_tile = 0;
    std::string reason;
  };
  std::optional<DecodeFallback> decode_fallback;
  // The UNet's batch each step: 2 with classifier-free guidance (unconditional
  // and conditional), 1 with guidance <= 1 (the conditional pass only, as
  // diffusers does: half the work); and how many times it ran (the steps, or
  // more for samplers that evaluate the model twice a step).
  int unet_batch = 0;
  int model_calls = 0;
  // Jobs whose rows ran in that UNet batch (Pipeline::generate_batch): 1 =
  // it ran alone; else unet_batch counts every job's rows and the step rows
  // above are the shared steps'.
  int batch_jobs = 1;
};

// What must match for two jobs to share a batch (Pipeline::generate_batch):
// every setting but the prompt, the negative prompt and the seed, as one
// string; "" for a job that never shares one (img2img, base + refiner).
std::string batch_key(const spec::GenerationSettings& settings);

// Called after each denoise step with (steps done, total steps).
using ProgressFn = std::function<void(int step, int steps)>;

// Where a LoRA switch (Pipeline::set_loras) spent its time, host clock, ms.
struct LoraSwitchSplit {
  double files_ms = 0;    // reading, hashing (first sight of a file) and checking the set's files
  double base_ms = 0;     // handing the base bits of the rewritten weights to the merge (device copies, or uploads)
  double merge_ms = 0;    // the merges issued on the backend (factors uploaded, Backend::lora_merge)
  double rewrite_ms = 0;  // writing the weights (cast, layout, fp8 codes) and the wait for all device work
  int weights = 0;        // weights written again
  int64_t device_base_bytes = 0;  // base bits on the device after the switch
};

class Pipeline {
 public:
  static Result<std::unique_ptr<Pipeline>> load(std::string_view model_spec, kernels::Backend& backend,
                                                const LoadOptions& options = {});
  static Result<std::unique_ptr<Pipeline>> load(const ModelComponents& model, kernels::Backend& backend,
                                                const LoadOptions& options = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // `progress` and `cancel` may be null. `refiner`: the SDXL refiner's
  // pipeline (on the same backend) when settings.refiner names one: the base
  // (this pipeline) runs the schedule's first steps, the refiner the rest on
  // the same latent and generator, and decodes (docs/pipeline.md, "Refiner").
  // FailedPrecondition when settings name a refiner and none is given;
  // InvalidArgument when this is no SDXL base, `refiner` no SDXL refiner, or
  // the switch point leaves either model no step. A refiner pipeline on its
  // own runs img2img only (InvalidArgument for text-to-image).
  Result<GenerationOutput> generate(const spec::GenerationSettings& settings, const ProgressFn& progress = {},
                                    const std::atomic<bool>* cancel = nullptr, Pipeline* refiner = nullptr);

  // ---- batches across jobs (docs/batching.md) ------------------------------
  // Runs `jobs` (settings with one non-empty batch_key(): the same size,
  // steps, sampler, guidance, precision, LoRAs; prompts and seeds free) as
  // one batch: each job's prompts encoded alone, its noise drawn from its own
  // generator, the UNet run on all their rows at once every step (2 a job
  // with guidance), each latent decoded alone. Each job's latent and pixels
  // equal generate() of it alone, byte for byte, on a backend whose kernels
  // give a row the same result whatever the batch (docs/batching.md says
  // which do; tests/engine/pipeline_batch_test.cpp checks). The step rows of
  // each output are the shared steps'; GenerationOutput::batch_jobs says how
  // many shared them. progress and cancel: empty, or one entry per job (null
  // or empty = none): a job whose flag turns true ends Cancelled alone while
  // the others run on. One outcome per job, in order; the Result's own
  // status is an error of the whole batch: InvalidArgument (settings invalid,
  // keys differ, or a job batch_key() never batches: img2img, refiner),
  // FailedPrecondition (no plan fits, as generate()), ResourceExhausted and
  // the backend's errors. A batch of one is generate(). `decoded`, when set,
  // is called on this thread with each job's finished output (peaks as of
  // its decode) as soon as it is decoded, before the next job's decode: a
  // caller can write one job's files while the device decodes the next.
  using DecodedFn = std::function<void(size_t job, const GenerationOutput& out)>;
  Result<std::vector<Result<GenerationOutput>>> generate_batch(
      const std::vector<spec::GenerationSettings>& jobs, const std::vector<ProgressFn>& progress = {},
      const std::vector<const std::atomic<bool>*>& cancel = {}, const DecodedFn& decoded = {});
  // How many jobs of `settings` one batch may hold on this backend now: the
  // largest n <= limit whose plan (plan_memory's jobs = n) fits in the
  // placement a job alone gets; 1 when that placement is low (a batch never
  // moves a job to the low placement: batching is for throughput). Errors as
  // choose_placement.
  Result<int> batch_capacity(const spec::GenerationSettings& settings, int limit);

  // Switches the LoRA set (empty: none). The files are read and checked
  // against the model before any device work (errors as LoadOptions::loras;
  // on error the current set stays). The same set (paths, scales and file
  // contents) is a no-op; another rewrites in place, on the device, only the
  // weights the old or the new set modifies (engine/lora/lora_rebind.h),
  // merged on the device (Backend::lora_merge) from kept copies of their base
  // bits, on the device while the memory plan has room, else on the host (the
  // base checkpoint is read for a weight at most once, by the first set that
  // modifies it; the VAE and every other tensor are untouched; beyond the
  // kept copies, counted in every plan, nothing allocated stays), so the
  // weights equal a fresh load with that set, bit for bit.
  // The next generate() reports the switch as its load phase (warm = false).
  // Cost: docs/adapters.md, "Switching sets between jobs".
  Status set_loras(const std::vector<spec::LoraSpec>& loras);
  // The LoRAs folded into the weights now, in application order.
  const std::vector<lora::AppliedLora>& loras() const;
  // Where the last set_loras() spent its time (zeros for a no-op).
  const LoraSwitchSplit& last_lora_switch() const;
  // Device bytes (the backend's blocks) holding base bits of LoRA-modified
  // weights (engine/lora/lora_base_bits.h), counted in every memory plan.
  int64_t lora_base_bits_on_device() const;

  // ---- stages, for per-stage parity checks (the code generate() runs) ------
  // Host fp32, batch order (negative, positive) when guidance > 1.
  struct PromptEmbeddings {
    std::vector<float> hidden;          // encoder_hidden_states [B, 77, D]
    std::vector<int64_t> hidden_shape;
    std::vector<float> pooled;          // SDXL text_embeds [B, P]; empty otherwise
    std::vector<int64_t> pooled_shape;
  };
  Result<PromptEmbeddings> encode_prompt(const spec::GenerationSettings& settings);
  // The raw UNet output [B, 4, H/8, W/8] for a model input of the same shape
  // (B = 2 with guidance > 1, else 1), conditioned on settings' prompts.
  Result<std::vector<float>> unet_output(const spec::GenerationSettings& settings, const std::vector<float>& model_input,
                                         float timestep);
  // VAE decoder output [1, 3, 8h, 8w] (values ~[-1, 1]) of a latent already
  // divided by the scaling factor, in the precision's VAE dtype (vae_dtype_for).
  Result<std::vector<float>> vae_decode(const std::vector<float>& z, int64_t latent_h, int64_t latent_w);
  // Token ids (77, padded) as text encoder 1 or 2 receives them.
  std::vector<int> token_ids(std::string_view text, int encoder = 1) const;

  const std::string& model_spec() const;
  const std::string& weights_sha256() const;
  const std::string& family() const;      // "sdxl" | "sd1" | "sd2"
  // An SDXL refiner (text encoder 2 alone, aesthetic-score time ids).
  bool is_refiner() const;
  // The shapes of the loaded models, as memory plans read them.
  const ModelShapes& model_shapes() const;
  // The dtype the VAE decoder is loaded in: the precision's, except fp32 for
  // fp16 jobs when the VAE has force_upcast or is SDXL's (docs/pipeline.md,
  // "decode"); bf16 after a job whose low placement lowered it
  // (MemoryPlan::vae_dtype) until a job or vae_decode() needs it back.
  kernels::DType vae_precision() const;
  // Settings the model source could not pin down and that were assumed
  // (ModelComponents::warnings); the caller logs them.
  const std::vector<std::string>& warnings() const;
  // The scheduler config the samplers use (from the model folder or the family
  // defaults), as JSON; recorded in latent and golden metadata.
  nlohmann::json scheduler_config() const;
  kernels::Backend& backend() const;
  // Time the initial load took (host clock).
  double load_ms() const;

  struct Impl;

 private:
  explicit Pipeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---- outputs -----------------------------------------------------------------
// What a generation records beside its tensors: the model, its weights hash,
// the settings, the scheduler config and the build (string metadata).
struct OutputInfo {
  std::string model_spec;
  std::string weights_sha256;
  nlohmann::json scheduler_config;
  std::string backend;         // "cpu" | "hip"
  std::string device_name;
};

// latent.safetensors: tensor "latent" f32 [1, 4, H/8, W/8]; metadata keys
// "format" = "hipq-latent/1", "settings" (GenerationSettings JSON), "model",
// "weights_sha256", "scheduler_config", "backend", "device", "hipq_version",
// "build_sha". Atomic write, parents created.
Status write_latent_file(const std::filesystem::path& path, const GenerationOutput& out,
                         const spec::GenerationSettings& settings, const OutputInfo& info);
// timings.json: {"phases":[{phase,host_ms,gpu_ms}...],"steps":[...] (base +
// refiner jobs: each step row with "model": "base" | "refiner"),
// ["model_phases":[{phase,model,host_ms,gpu_ms}...], "refiner":{model,
// weights_sha256, switch_at, base_cutoff, refiner_cutoff, base_steps,
// refiner_steps, refiner_start}: base + refiner jobs only],
// "peak_memory_bytes":N,"warm":bool,"memory_plan":{placement, jobs, vae_tile,
// vae_dtype, peak_bytes, weights_bytes, text_encode_bytes, image_encode_bytes,
// denoise_bytes, decode_bytes, usable_bytes, runtime_bytes},
// "denoise":{unet_batch, model_calls, batch_jobs, guidance},
// "settings":{...},"model":...}.
nlohmann::json timings_json(const GenerationOutput& out, const spec::GenerationSettings& settings,
                            const OutputInfo& info);

}  // namespace hipq::engine
