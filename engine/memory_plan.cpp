#include "engine/memory_plan.h"

#include <algorithm>
#include <array>
#include <string>

#include "base/byte_size.h"
#include "engine/models/weight_binder.h"
#include "engine/tokenizer.h"
#include "kernels/fp8_conv_weight.h"
#include "spec/phases.h"

namespace hipq::engine {
namespace {

using kernels::DType;

constexpr std::array<std::string_view, 3> kPlacementNames{"auto", "standard", "low"};

// UNet activations of one forward, in units of batch * latent pixels *
// block_out_channels[0] elements: the skip connections (about 5 units for
// SDXL) and the widest block's working set (the 64 x 64 level's transformer:
// q/k/v 1.5 units, GEGLU product 4 units), with the pool's size-class slack.
// docs/memory.md derives it and sets it beside the measured peaks.
constexpr int64_t kUnetActivationUnits = 24;
// The text encoders' activations: a few rows of 77 tokens through the
// widest layer, host-side fp32 copies included.
constexpr int64_t kTextActivationRows = 16;
// The hip backend's fp32 conv input copies (kernels/hip/conv2d.hip,
// kConvStagingBytes, two of them) and the VAE attention's score blocks;
// smaller images need less (a copy never exceeds the tensor it copies).
constexpr int64_t kVaeWorkspaceBytes = int64_t{256} << 20;

int64_t dsize(DType t) { return static_cast<int64_t>(kernels::dtype_size(t)); }

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

struct ParamBytes {
  int64_t all = 0;
  int64_t conv = 0;  // 4-D weights kept in `dtype` (the ones a backend keeps forms of)
};

// The device blocks of `specs` (those whose name starts with `only_prefix` or
// `or_prefix` when given) as a loader binds them: each device tensor (a
// stack of parts is one) in `dtype`, or, with `fp8` on (a UNet of precision
// fp8, the convs it takes), a Linear weight as e4m3 codes and a scale a
// row and a taken conv weight as its Fp8ConvWeight (codes [O, kh, kw, Cp],
// a scale an output channel): WeightLoader::bind_fp8 / bind_fp8_conv.
ParamBytes param_bytes(const std::vector<ParamSpec>& specs, DType dtype, const kernels::Backend& be,
                       std::string_view only_prefix = {}, std::string_view or_prefix = {},
                       Fp8Weights fp8 = {}) {
  auto block = [&](int64_t bytes) { return static_cast<int64_t>(be.block_bytes(static_cast<size_t>(bytes))); };
  ParamBytes b;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& p = specs[i];
    if (p.stack == 0) continue;  // counted with its stack's first part
    if (!only_prefix.empty() && !p.name.starts_with(only_prefix) && (or_prefix.empty() || !p.name.starts_with(or_prefix)))
      continue;
    const int64_t parts = std::min<int64_t>(p.stack, static_cast<int64_t>(specs.size() - i));
    const int64_t part = numel(p.shape);
    const int64_t rows = p.shape.empty() ? 1 : p.shape[0] * parts;
    if (fp8.on && p.fp8 == Fp8Form::kRows) {
      b.all += block(part * parts) + block(rows * static_cast<int64_t>(sizeof(float)));
      continue;
    }
    if (fp8.on && p.fp8 == Fp8Form::kConv && takes_fp8_conv(fp8.convs, p.shape)) {
      b.all += block(numel(kernels::fp8_conv_codes_shape(p.shape))) +
               block(p.shape[0] * static_cast<int64_t>(sizeof(float)));
      continue;
    }
    const int64_t bytes = block(part * parts * dsize(dtype));
    b.all += bytes;
    if (p.shape.size() == 4) b.conv += bytes;
  }
  return b;
}

std::string gib(int64_t bytes) { return format_byte_size(bytes); }

}  // namespace

Result<DType> precision_dtype(const std::string& precision) {
  if (precision == "fp32") return DType::kF32;
  if (precision == "fp16") return DType::kF16;
  if (precision == "bf16" || precision == "fp8") return DType::kBF16;
  return Status::InvalidArgument("unknown precision \"" + precision + "\"; known: fp32, fp16, bf16, fp8");
}

bool is_fp8(const std::string& precision) { return precision == "fp8"; }

Fp8Weights fp8_weights(const std::string& precision, Fp8Convs convs) {
  if (!is_fp8(precision)) return Fp8Weights{};
  return Fp8Weights{true, convs};
}

Result<Placement> parse_placement(std::string_view name) {
  for (size_t i = 0; i < kPlacementNames.size(); ++i)
    if (kPlacementNames[i] == name) return static_cast<Placement>(i);
  return Status::InvalidArgument("unknown placement \"" + std::string(name.substr(0, 64)) +
                                 "\"; known: auto, standard, low");
}

std::string_view placement_name(Placement p) { return kPlacementNames[static_cast<size_t>(p)]; }

const std::vector<std::string>& known_placements() {
  static const std::vector<std::string> names(kPlacementNames.begin(), kPlacementNames.end());
  return names;
}

DType vae_dtype_for(const std::string& family, const VaeConfig& vae, DType precision) {
  if (precision == DType::kF16 && (family == "sdxl" || vae.force_upcast)) return DType::kF32;
  return precision;
}

Result<DType> job_vae_dtype(const std::string& family, const VaeConfig& vae, const spec::GenerationSettings& s) {
  HIPQ_ASSIGN_OR_RETURN(DType dtype, precision_dtype(s.precision));
  if (s.vae_precision.empty()) return vae_dtype_for(family, vae, dtype);
  if (s.vae_precision == "fp32") return DType::kF32;
  if (s.vae_precision == "bf16") return DType::kBF16;
  return Status::InvalidArgument("unknown vae_precision \"" + s.vae_precision + "\"; known: " +
                                 spec::join_names(spec::known_vae_precisions()) + " (or none: the precision's own)");
}

DType vae_encoder_dtype_for(const std::string& family, const VaeConfig& vae, DType precision) {
  if (family == "sdxl" && vae.force_upcast) return DType::kF32;
  return precision;
}

int64_t low_placement_vae_tile(const VaeConfig& vae) {
  return std::max<int64_t>(256, vae.sample_size * 3 / 4 / 8 * 8);
}

std::vector<int64_t> low_placement_vae_tiles(const VaeConfig& vae) {
  std::vector<int64_t> tiles{low_placement_vae_tile(vae)};
  const int64_t half = vae.sample_size / 2 / 8 * 8;
  if (half >= 256 && half < tiles.front()) tiles.push_back(half);
  return tiles;
}

std::optional<DType> low_placement_vae_dtype(const std::string& precision, DType vae_dtype,
                                             const std::string& vae_precision) {
  if (!vae_precision.empty() || precision == "fp32" || vae_dtype != DType::kF32) return std::nullopt;
  return DType::kBF16;
}

int64_t MemoryPlan::peak() const { return std::max({text_encode, image_encode, denoise, decode}); }

int64_t MemoryPlan::phase_bytes(std::string_view phase) const {
  if (phase == spec::kPhaseTextEncode) return text_encode;
  if (phase == spec::kPhaseImageEncode) return image_encode;
  if (phase == spec::kPhaseDenoise) return denoise;
  if (phase == spec::kPhaseDecode) return decode;
  return -1;
}

std::string MemoryPlan::describe() const {
  std::string decode_in;
  if (placement == Placement::kLow) {
    decode_in = vae_tile > 0 ? ", VAE in " + std::to_string(vae_tile) + " px tiles in " : std::string(", VAE whole in ");
    decode_in += kernels::dtype_name(vae_dtype);
  }
  return gib(peak()) + " (" + std::string(placement_name(placement)) + " placement" + decode_in + "; weights " +
         gib(weights()) + "; text encode " + gib(text_encode) +
         (image_encode > 0 ? ", image encode " + gib(image_encode) : std::string()) + ", denoise " + gib(denoise) +
         ", decode " + gib(decode) + ")";
}

Result<MemoryPlan> plan_memory(const ModelShapes& shapes, const spec::GenerationSettings& s, Placement p,
                               const kernels::Backend& backend, int64_t vae_tile, const ModelShapes* refiner,
                               std::optional<DType> vae_dtype_override, int jobs) {
  const bool keeps_conv_forms = backend.info().keeps_conv_weight_forms;
  if (p == Placement::kAuto) return Status::InvalidArgument("plan_memory: resolve placement 'auto' first");
  if (vae_tile < 0 || (vae_tile > 0 && (p != Placement::kLow || vae_tile % 8 != 0 || vae_tile < 16)))
    return Status::InvalidArgument("plan_memory: a VAE tile (" + std::to_string(vae_tile) +
                                   " px) is a multiple of 8 px, at least 16, in the low placement only");
  HIPQ_ASSIGN_OR_RETURN(DType dtype, precision_dtype(s.precision));
  // An fp8 job's UNet weights as its loader holds them (the convs the model's
  // load takes: ModelShapes::fp8_convs).
  const Fp8Weights fp8 = fp8_weights(s.precision, shapes.fp8_convs);
  // The decoding model's VAE (the refiner's in a base + refiner job).
  const ModelShapes& decoder = refiner != nullptr ? *refiner : shapes;
  HIPQ_ASSIGN_OR_RETURN(const DType job_dtype, job_vae_dtype(decoder.family, decoder.vae, s));
  const DType vae_dtype = vae_dtype_override.value_or(job_dtype);
  if (vae_dtype != job_dtype &&
      (p != Placement::kLow || low_placement_vae_dtype(s.precision, job_dtype, s.vae_precision) != vae_dtype))
    return Status::InvalidArgument(
        std::string("plan_memory: a ") + s.precision + " job's VAE decodes in " +
        std::string(kernels::dtype_name(job_dtype)) +
        (s.vae_precision.empty() ? std::string() : " (its vae_precision)") + "; " +
        std::string(kernels::dtype_name(vae_dtype)) +
        " only where the low placement lowers it (low_placement_vae_dtype)");
  MemoryPlan plan;
  plan.placement = p;
  plan.vae_dtype = vae_dtype;

  if (jobs < 1) return Status::InvalidArgument("plan_memory: a batch of " + std::to_string(jobs) + " jobs");
  plan.jobs = jobs;
  const int64_t lh = s.height / 8, lw = s.width / 8;
  // UNet rows of one job; a batch runs `jobs` of them at once (the text
  // encoders still run one job at a time).
  const int64_t batch = s.guidance > 1.0f ? 2 : 1;
  const int64_t rows = batch * jobs;
  // One model's weights and the activations of its UNet and text encoders.
  int64_t largest_text = 0;  // the largest single text encoder's weights (the low placement holds one at a time)
  int64_t text_staging = 0;  // an encoder's load: the cast's staging block (ModelShapes::text_staging)
  auto block = [&](int64_t bytes) { return static_cast<int64_t>(backend.block_bytes(static_cast<size_t>(bytes))); };
  struct ModelNeeds {
    int64_t unet_act = 0, fixed = 0, text_act = 0;
    int64_t conditioning = 0;  // the prompt's embeddings, held until the job ends
  };
  auto add_model = [&](const ModelShapes& m) -> Result<ModelNeeds> {
    ModelNeeds n;
    const DType vae_dt = &m == &decoder ? vae_dtype : vae_dtype_for(m.family, m.vae, dtype);
    HIPQ_ASSIGN_OR_RETURN(std::vector<ParamSpec> unet_specs, UNet::parameters(m.unet));
    const ParamBytes unet = param_bytes(unet_specs, dtype, backend, {}, {}, fp8);
    plan.unet_weights += unet.all;
    if (keeps_conv_forms && dtype != DType::kF32) plan.weight_forms += unet.conv;
    for (const ClipTextConfig& c : m.text_encoders) {
      HIPQ_ASSIGN_OR_RETURN(std::vector<ParamSpec> specs, ClipTextModel::parameters(c));
      const int64_t bytes = param_bytes(specs, dtype, backend).all;
      plan.text_weights += bytes;
      largest_text = std::max(largest_text, bytes);
      if (m.text_staging > 0)
        text_staging = std::max(text_staging, block(m.text_staging));
    }
    HIPQ_ASSIGN_OR_RETURN(std::vector<ParamSpec> vae_specs, VaeDecoder::parameters(m.vae));
    plan.vae_weights += param_bytes(vae_specs, vae_dt, backend, "decoder.", "post_quant_conv.").all;
    const int64_t c0 = m.unet.block_out_channels.empty() ? 320 : m.unet.block_out_channels[0];
    const int64_t unit = rows * lh * lw * c0 * dsize(dtype);
    n.unet_act = kUnetActivationUnits * unit;
    // Latents, noise and the step's fixed buffers (a few units), and every
    // cross attention's k | v of the 77-token context (ContextKV).
    n.fixed = 4 * unit;
    for (const ParamSpec& p : unet_specs)
      if (p.name.ends_with("attn2.to_k.weight") && !p.shape.empty())
        n.fixed += 2 * rows * ClipTokenizer::kMaxLength * p.shape[0] * dsize(dtype);
    int64_t pooled = 0;
    for (const ClipTextConfig& c : m.text_encoders) {
      n.text_act = std::max(n.text_act, kTextActivationRows * batch * ClipTokenizer::kMaxLength *
                                            std::max(c.intermediate_size, c.hidden_size) * 4);
      pooled = std::max(pooled, c.projection_dim);
    }
    n.conditioning = jobs * (block(batch * ClipTokenizer::kMaxLength * m.unet.cross_attention_dim * dsize(dtype)) +
                             block(batch * pooled * dsize(dtype)));
    // A batch also holds its rows side by side for the UNet (Pipeline::generate_batch).
    if (jobs > 1)
      n.conditioning += block(rows * ClipTokenizer::kMaxLength * m.unet.cross_attention_dim * dsize(dtype)) +
                        block(rows * pooled * dsize(dtype));
    return n;
  };
  HIPQ_ASSIGN_OR_RETURN(ModelNeeds needs, add_model(shapes));
  if (refiner != nullptr) {
    // Both models stay on the device; one UNet runs at a time (the base's
    // steps, then the refiner's), so the activations are the larger one's.
    HIPQ_ASSIGN_OR_RETURN(ModelNeeds r, add_model(*refiner));
    needs.unet_act = std::max(needs.unet_act, r.unet_act);
    needs.fixed = std::max(needs.fixed, r.fixed);
    needs.text_act = std::max(needs.text_act, r.text_act);
    needs.conditioning += r.conditioning;  // both models' embeddings are held to the end
  }
  const int64_t unet_act = needs.unet_act, fixed = needs.fixed, text_act = needs.text_act,
                conditioning = needs.conditioning;

  // The VAE's widest moments at full resolution (ResnetBlock2D::
  // forward_consuming, Upsample2D): the first resnet of the last up block
  // (its input normalised in place, the shortcut's output and conv1's:
  // c1 + 2 * c0 channels), the others (input, norm, conv1 output: 3 * c0),
  // the upsampler into it (its half-size input and output: 1.25 * c1, or
  // 2.25 * c1 where the backend makes the upsampled copy) and the first
  // resnet of the level below (a quarter of c2 + 2 * c1), for the pixels one
  // decode pass holds (a tile in the low placement).
  const std::vector<int64_t>& vb = decoder.vae.block_out_channels;
  const int64_t v0 = vb.empty() ? 128 : vb[0], v1 = vb.size() > 1 ? vb[1] : v0, v2 = vb.size() > 2 ? vb[2] : v1;
  int64_t ph = s.height, pw = s.width;
  if (vae_tile > 0 && (lh > vae_tile / 8 || lw > vae_tile / 8)) {
    plan.vae_tile = vae_tile;
    ph = std::min<int64_t>(ph, vae_tile);
    pw = std::min<int64_t>(pw, vae_tile);
  }
  const bool fused_upsample = vae_dtype == DType::kF32 ? backend.info().fp32_conv_reads_upsampled
                                                      : backend.info().f16_conv_reads_upsampled;
  const int64_t widest =
      std::max({v1 + 2 * v0, 3 * v0, ((fused_upsample ? 5 : 9) * v1 + 3) / 4, (v2 + 2 * v1 + 3) / 4});
  const int64_t hw = ph * pw;
  int64_t vae_act = (widest + 3) * hw * dsize(vae_dtype) +
                    std::min(kVaeWorkspaceBytes, 2 * v1 * hw * dsize(vae_dtype)) +
                    (vae_dtype == DType::kF32 ? 0 : v1 * hw * dsize(vae_dtype));
  // Tiles (VaeTiling::whole_image_norms) run the mid block on the whole
  // latent first: its resnets' three activations or the attention's
  // normed input, token copy, q, k, v, output and sum (8 units of the top
  // level's channels), and the whole image's output at the end.
  if (plan.vae_tile > 0) {
    const int64_t top = vb.empty() ? 512 : vb.back();
    vae_act = std::max(vae_act, 8 * top * lh * lw * dsize(vae_dtype)) +
              decoder.vae.out_channels * int64_t{s.height} * s.width * dsize(vae_dtype);
  }

  // img2img: the VAE encoder at the job's size. Its widest moments are at
  // full resolution (VaeEncoder::encode): a resnet of the first down block
  // (input, norm, conv1's output: 3 * c0) or its downsampler (input, the
  // padded copy and the quarter-size output), and the first resnet of the
  // next level (c0 + 3 * c1 at a quarter of the pixels), plus the image.
  int64_t enc_act = 0;
  if (!s.init_image.empty()) {
    const DType enc_dtype = vae_encoder_dtype_for(shapes.family, shapes.vae, dtype);
    HIPQ_ASSIGN_OR_RETURN(std::vector<ParamSpec> vae_specs, VaeDecoder::parameters(shapes.vae));
    plan.vae_encoder_weights = param_bytes(vae_specs, enc_dtype, backend, "encoder.", "quant_conv.").all;
    const int64_t full = int64_t{s.height} * s.width;
    const int64_t enc_widest = std::max({3 * v0, (9 * v0 + 3) / 4, (v0 + 3 * v1 + 3) / 4});
    enc_act = (enc_widest + 2 * shapes.vae.in_channels) * full * dsize(enc_dtype) +
              std::min(kVaeWorkspaceBytes, 2 * v1 * full * dsize(enc_dtype));
  }
  const int64_t resident_text = p == Placement::kLow ? 0 : plan.text_weights;
  const int64_t resident_encoder = p == Placement::kLow ? 0 : plan.vae_encoder_weights;
  const int64_t text_held = p == Placement::kLow ? largest_text : plan.text_weights;
  // The encoders are loaded in this phase when the low placement (or a job
  // after one) runs: the staging of a cast load beside the activations.
  // Before the denoise none of the step's buffers exist (UNetStep makes them,
  // its context k | v too): the text encode holds the embeddings it writes,
  // the image encode those and its own activations.
  plan.text_encode = plan.unet_weights + plan.vae_weights + text_held + resident_encoder +
                     std::max(text_act, text_staging) + conditioning;
  if (!s.init_image.empty())
    plan.image_encode =
        plan.unet_weights + plan.vae_weights + resident_text + plan.vae_encoder_weights + enc_act + conditioning;
  plan.denoise =
      plan.unet_weights + plan.vae_weights + resident_text + resident_encoder + plan.weight_forms + unet_act + fixed;
  // The decode finds none of the step's buffers (UNetStep, its context k | v
  // and the sampler's are freed with the loop, the cache trimmed): only the
  // latents (f32) and the prompt's embeddings stay beside the weights.
  const int64_t decode_resident = conditioning + jobs * block(shapes.unet.in_channels * lh * lw * 4);
  plan.decode = plan.unet_weights + plan.vae_weights + resident_text + resident_encoder + vae_act + decode_resident;
  // ---- LoRA switches: base bits held on the device, in every phase ----
  plan.lora_base_bits = shapes.lora_base_bits + (refiner != nullptr ? refiner->lora_base_bits : 0);
  plan.text_encode += plan.lora_base_bits;
  if (plan.image_encode > 0) plan.image_encode += plan.lora_base_bits;
  plan.denoise += plan.lora_base_bits;
  plan.decode += plan.lora_base_bits;
  return plan;
}

int64_t runtime_device_memory(const kernels::MemoryStats& m) {
  if (m.device_total <= 0 || m.device_free <= 0) return 0;
  return std::max<int64_t>(0, m.device_total - m.device_free - (m.in_use + m.cached));
}

int64_t usable_device_memory(const kernels::MemoryStats& m) {
  if (m.limit > 0) {
    const int64_t runtime = runtime_device_memory(m);
    return std::max<int64_t>(0, m.limit - (runtime > 0 ? runtime + kRuntimeGrowthBytes : 0));
  }
  if (m.device_total <= 0) return 0;
  // What the runtime keeps for its own context and modules, never ours.
  const int64_t reserve = std::max<int64_t>(int64_t{512} << 20, m.device_total / 32);
  const int64_t ours = m.in_use + m.cached;
  const int64_t free_now = m.device_free > 0 ? m.device_free : m.device_total - ours;
  return std::max<int64_t>(0, free_now + ours - reserve);
}

Result<MemoryPlan> choose_placement(const ModelShapes& shapes, const spec::GenerationSettings& settings,
                                    Placement requested, const kernels::Backend& backend, const ModelShapes* refiner,
                                    int jobs) {
  const kernels::MemoryStats mem = backend.memory_stats();
  const int64_t usable = usable_device_memory(mem);
  const bool unknown = mem.limit <= 0 && mem.device_total <= 0;  // a cpu backend without a cap: every plan fits
  const int64_t runtime = runtime_device_memory(mem);
  struct Try {
    Placement p;
    int64_t tile;
    std::optional<DType> vae_dtype;
  };
  std::vector<Try> order;
  if (requested != Placement::kLow) order.push_back({Placement::kStandard, 0, std::nullopt});
  if (requested != Placement::kStandard) {
    const ModelShapes& decoder = refiner != nullptr ? *refiner : shapes;
    order.push_back({Placement::kLow, 0, std::nullopt});
    HIPQ_ASSIGN_OR_RETURN(const DType job_dtype, job_vae_dtype(decoder.family, decoder.vae, settings));
    if (std::optional<DType> lowered = low_placement_vae_dtype(settings.precision, job_dtype, settings.vae_precision))
      order.push_back({Placement::kLow, 0, lowered});
    for (int64_t tile : low_placement_vae_tiles(decoder.vae)) order.push_back({Placement::kLow, tile, std::nullopt});
  }
  MemoryPlan last;
  for (const Try& t : order) {
    HIPQ_ASSIGN_OR_RETURN(last, plan_memory(shapes, settings, t.p, backend, t.tile, refiner, t.vae_dtype, jobs));
    last.usable = usable;
    last.runtime = runtime;
    if (unknown || last.peak() <= usable) return last;
  }
  const std::string device = backend.info().device_name.empty() ? backend.info().name : backend.info().device_name;
  const std::string where = mem.limit > 0 ? gib(usable) + " usable under the device memory limit of " + gib(mem.limit) +
                                                " (--device-memory-limit / " + kernels::kDeviceMemoryLimitEnv + ")" +
                                                (last.runtime > 0 ? ", the runtime holding " + gib(last.runtime) : "")
                                          : gib(usable) + " usable of the " + gib(mem.device_total) + " on " + device;
  std::string way_out = requested == Placement::kStandard
                            ? "run it with placement 'low' or 'auto', "
                            : "";
  way_out += "make the image smaller (" + std::to_string(settings.width) + "x" + std::to_string(settings.height) +
             " now)";
  if (settings.precision == "fp32") way_out += ", run it in fp16 or bf16";
  if (settings.vae_precision == "fp32" && settings.precision != "fp32")
    way_out += ", let the VAE decode in bf16 (vae_precision bf16, or none: the low placement's own)";
  way_out += ", or give it a device with more memory";
  return Status::FailedPrecondition("configuration: a " + std::to_string(settings.width) + "x" +
                                    std::to_string(settings.height) + " " + settings.precision + " job needs " +
                                    last.describe() + ", more than " + where + "; " + way_out);
}

}  // namespace hipq::engine
