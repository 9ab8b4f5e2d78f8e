// MemoryPlan: the device memory one generation needs, known before it runs,
// and the placements that trade speed for it (docs/memory.md).
//
//   standard  every model stays on the device; the VAE decodes the image
//             whole (diffusers' pipeline, same pixels).
//   low       the text encoders are on the device only while the prompt is
//             encoded (released after, loaded again for the next job); the
//             VAE decodes the image whole when that fits (the same pixels as
//             standard), else whole in bf16 when the job's VAE dtype is wider
//             and its precision is not fp32 (low_placement_vae_dtype: the
//             latent the same bits, the image within the 16-bit jobs' image
//             gate), else in tiles (low_placement_vae_tile) overlapping
//             by a quarter, blended as diffusers' tiled decode blends them
//             (its tiled_decode), every group norm with the whole image's
//             statistics (VaeTiling::whole_image_norms): the latent is the
//             same bits, the image near the whole decode but not equal
//             (docs/memory.md gives the measured PSNR).
//   auto      standard when its plan fits the device, else low.
//
// plan_memory() adds, per phase (text encode, denoise, decode), the weights on
// the device then and an upper bound of the activations and workspaces of
// that phase at the job's size and precision; its constants come from the
// models' shapes (docs/memory.md derives each). choose_placement() resolves a
// requested placement against what the backend can hold, or fails with a
// configuration error (FailedPrecondition) that names the need, the device
// and the way out, so no job runs out of memory after a minute of denoising.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/models/clip_text.h"
#include "engine/models/unet.h"
#include "engine/models/vae.h"
#include "kernels/backend.h"
#include "spec/generation_settings.h"

namespace hipq::engine {

enum class Placement { kAuto, kStandard, kLow };

// "auto" | "standard" | "low"; InvalidArgument naming the known ones.
Result<Placement> parse_placement(std::string_view name);
std::string_view placement_name(Placement p);
const std::vector<std::string>& known_placements();

// The shapes a plan reads: what load() binds, before any weight is read.
struct ModelShapes {
  std::string family;  // "sdxl" | "sd1" | "sd2"
  UNetConfig unet;
  // The text encoders the model has, in order (SDXL refiner: only the second).
  std::vector<ClipTextConfig> text_encoders;
  VaeConfig vae;
  // The stored bytes of the largest text-encoder tensor stored in another
  // dtype than the one it is loaded in (0 when none): loading it stages those
  // bytes on the device before the cast (WeightLoader::upload), and the low
  // placement loads its encoders during the job. The pipeline sets it.
  int64_t text_staging = 0;
  // ---- LoRA switches (engine/lora/lora_base_bits.h) ----
  // Device bytes (the backend's blocks) holding the base bits of weights a
  // LoRA set modifies, kept so a switch restores and merges them without an
  // upload; the pipeline sets it. Counted in every phase (MemoryPlan::lora_base_bits).
  int64_t lora_base_bits = 0;
  // The convolutions an fp8 job's UNet holds in e4m3 (HIPQ_FP8_CONVS, read
  // once, when the pipeline loads the model in fp8): its load and every plan
  // of fp8 jobs take them from here.
  Fp8Convs fp8_convs = Fp8Convs::kAligned;
};

// The dtype of a precision name: fp32 | fp16 | bf16 | fp8; InvalidArgument naming
// the known ones otherwise.
// fp8 is bf16 with the UNet's linear layers and the convs Fp8Convs picks in
// e4m3 (fp8_weights).
Result<kernels::DType> precision_dtype(const std::string& precision);
// Whether a precision holds UNet weights in e4m3 (fp8).
bool is_fp8(const std::string& precision);
// The UNet weights a precision holds in e4m3: for fp8 the linear layers and
// `convs`, for every other precision none.
Fp8Weights fp8_weights(const std::string& precision, Fp8Convs convs);

// The dtype the VAE decodes in: the precision's, except fp32 for fp16 jobs
// when the VAE has force_upcast or is SDXL's (it overflows in fp16; bf16 has
// fp32's range and decodes in bf16, as diffusers does).
kernels::DType vae_dtype_for(const std::string& family, const VaeConfig& vae, kernels::DType precision);
// The dtype a job's VAE decodes in (before any low placement lowering): its
// vae_precision when set ("fp32" | "bf16", whatever the precision), else
// vae_dtype_for's. InvalidArgument for an unknown precision or vae_precision.
Result<kernels::DType> job_vae_dtype(const std::string& family, const VaeConfig& vae,
                                     const spec::GenerationSettings& settings);
// The dtype the VAE encoder (img2img) encodes in: fp32 for SDXL when the VAE
// has force_upcast (diffusers' SDXL img2img), else the precision's.
kernels::DType vae_encoder_dtype_for(const std::string& family, const VaeConfig& vae, kernels::DType precision);

// The tile a low placement decodes in when the whole image does not fit:
// three quarters of the VAE's sample_size (SDXL: 768 px: a 1024 px image in
// 2 x 2 tiles, 1.4 times the whole decode's work, 0.56 of its memory), at
// least 256 px (smaller tiles stray too far from the whole decode).
int64_t low_placement_vae_tile(const VaeConfig& vae);
// The tiles a low placement tries in turn when the whole decode does not fit:
// low_placement_vae_tile(), then half the sample_size (SDXL: 512 px, 3 x 3
// tiles of a 1024 px image) when that is another size of at least 256 px.
std::vector<int64_t> low_placement_vae_tiles(const VaeConfig& vae);

// The dtype a low placement decodes the whole image in when the whole decode
// at `vae_dtype` (vae_dtype_for's) does not fit: bf16 (fp32's range, half its
// bytes) for a job of precision fp16, bf16 or fp8 whose VAE decodes in fp32
// (SDXL's fp16 jobs, diffusers' upcast) and that leaves the decode's dtype to
// the precision (`vae_precision` ""); nullopt otherwise: an fp32 job keeps
// its fp32 pixels, a job that asks for fp32 (vae_precision "fp32") gets
// tiles rather than a silent bf16, and a VAE already in 16 bits has nothing
// to gain. Every
// backend runs bf16 (the cpu backend in fp32 arithmetic, hip on NVIDIA's
// matrix units or, on AMD, the fp32 SIMT core: docs/kernels-hip.md); the bf16
// precision is refused on none, so nothing else gates it. Tiles, the last
// resort, stay in `vae_dtype`.
std::optional<kernels::DType> low_placement_vae_dtype(const std::string& precision, kernels::DType vae_dtype,
                                                      const std::string& vae_precision);

struct MemoryPlan {
  Placement placement = Placement::kStandard;
  // Jobs planned together as one batch (plan_memory's `jobs`).
  int jobs = 1;
  // Weights on the device, by component, in the dtype they are loaded at.
  int64_t unet_weights = 0;
  int64_t text_weights = 0;
  int64_t vae_weights = 0;
  // The VAE encoder's (an img2img job's init image; 0 otherwise).
  int64_t vae_encoder_weights = 0;
  // Forms of constant weights a backend keeps (kernels/constant_forms.h).
  int64_t weight_forms = 0;
  // The VAE decodes in tiles of this many pixels (0: the whole image).
  int64_t vae_tile = 0;
  // The dtype the VAE decoder is loaded and decodes in: job_vae_dtype's (the
  // job's vae_precision, else vae_dtype_for's), or bf16 where the low
  // placement lowers it (low_placement_vae_dtype).
  kernels::DType vae_dtype = kernels::DType::kF32;
  // Peak bytes of each phase, weights on the device then included.
  int64_t text_encode = 0;
  int64_t image_encode = 0;  // img2img only: the init image through the VAE encoder
  int64_t denoise = 0;
  int64_t decode = 0;

  // What the plan was checked against (choose_placement): the bytes the pool
  // may hold, and the device memory the process (and any other) held outside
  // the pool then (runtime context, loaded code), as the driver reported it.
  int64_t usable = 0;
  int64_t runtime = 0;

  // ---- LoRA switches ----
  // The base bits kept on the device for LoRA switches (ModelShapes::
  // lora_base_bits, the refiner's included), in every phase's bytes above.
  int64_t lora_base_bits = 0;

  int64_t weights() const { return unet_weights + text_weights + vae_weights + vae_encoder_weights; }
  int64_t peak() const;
  // The moment of a phase by its timing name (text_encode, image_encode,
  // denoise, decode: engine/phase_peaks.h measures the same); -1 for another.
  int64_t phase_bytes(std::string_view phase) const;
  // "7.9 GiB (standard placement; weights 6.5 GiB; text encode 6.6, denoise
  // 7.3, decode 7.9 GiB)"; a low placement names its decode: "low placement,
  // VAE whole in f32" / "VAE whole in bf16" / "VAE in 768 px tiles in f32".
  std::string describe() const;
};

// The plan of one generation at `settings`' size, precision and guidance in
// placement `p` (kStandard or kLow; InvalidArgument for kAuto), the VAE
// decoding in tiles of `vae_tile` pixels (0: whole; a low placement only), in
// `vae_dtype` (nullopt: job_vae_dtype's; else that dtype or the one
// low_placement_vae_dtype allows, in a low placement only: InvalidArgument
// otherwise). The decoding VAE's weights and activations count at that dtype.
// Weights are counted in `backend`'s blocks (Backend::block_bytes), plus the
// forms of conv weights it keeps (BackendInfo::keeps_conv_weight_forms).
// With `refiner` (a base + refiner job, docs/pipeline.md "Refiner"), both
// models' weights count in every phase (both UNets stay on the device in
// either placement; the low placement holds one text encoder at a time and drops it after
// the prompts are encoded), the activations are the larger UNet's (one runs
// at a time) and the refiner's VAE decodes.
// An img2img job (settings.init_image set) adds the VAE encoder: its weights
// and activations at the job's size in the image_encode phase, and its
// weights in every phase of the standard placement (which keeps it loaded;
// the low one releases it once the image is encoded).
// `jobs` > 1: a batch of that many jobs of these settings (Pipeline::
// generate_batch): the UNet's activations, its fixed buffers and context
// k | v for all their rows, every job's embeddings (and the batch's rows of
// them side by side) held to the end, every job's latent at the decode; the
// text encoders still run one job at a time. InvalidArgument for jobs < 1.
Result<MemoryPlan> plan_memory(const ModelShapes& shapes, const spec::GenerationSettings& settings, Placement p,
                               const kernels::Backend& backend, int64_t vae_tile = 0,
                               const ModelShapes* refiner = nullptr,
                               std::optional<kernels::DType> vae_dtype = std::nullopt, int jobs = 1);

// Device memory in use outside the backend's pool, as the driver reports it
// now (device total - free - what the pool holds): the runtime's context, the
// code it has loaded, other processes. 0 when the backend cannot tell (cpu).
int64_t runtime_device_memory(const kernels::MemoryStats& m);

// What the runtime may still add after a plan is made (code loaded on first
// use, graph instances), kept free below a cap or the card.
inline constexpr int64_t kRuntimeGrowthBytes = int64_t{256} << 20;

// Bytes the backend's pool may hold. A cap (--device-memory-limit) is the
// device memory of the whole process, as a card of that size would have it:
// the cap less the runtime's memory and its growth. Without a cap: the
// device's memory less the runtime's (at least 512 MiB or 1/32 of the card).
// 0 when unknown (a cpu backend without a cap: every plan fits; with a cap it
// is the cap, as no runtime memory is known there).
int64_t usable_device_memory(const kernels::MemoryStats& m);

// `requested` resolved against the backend's memory: the first plan that
// fits of standard (kStandard, kAuto), then low decoding whole, then low
// decoding whole in low_placement_vae_dtype() (where there is one), then low
// decoding in each of low_placement_vae_tiles() (kLow, kAuto).
// FailedPrecondition when the needed plan does not fit: the need, the
// device, and what to do.
Result<MemoryPlan> choose_placement(const ModelShapes& shapes, const spec::GenerationSettings& settings,
                                    Placement requested, const kernels::Backend& backend,
                                    const ModelShapes* refiner = nullptr, int jobs = 1);

}  // namespace hipq::engine
