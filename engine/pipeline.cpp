#include "engine/pipeline.h"
#include "engine/pipeline_impl.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "base/build_info.h"
#include "base/fs.h"
#include "engine/decoded_image.h"
#include "engine/model_files.h"
#include "engine/models/clip_text.h"
#include "engine/models/device_tensor.h"
#include "engine/models/unet.h"
#include "engine/models/vae.h"
#include "engine/rng.h"
#include "engine/safetensors.h"
#include "engine/guidance.h"
#include "engine/img2img.h"
#include "engine/lora/lora_base_bits.h"
#include "engine/lora/lora_rebind.h"
#include "engine/phase_peaks.h"
#include "engine/refiner.h"
#include "engine/models/vae_encoder.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/tokenizer.h"
#include "engine/unet_step.h"
#include "spec/init_image.h"
#include "spec/phases.h"

namespace hipq::engine {

using kernels::DType;
using pipeline_detail::kTextEncoderKeys;
using pipeline_detail::TextEncoderSlot;

namespace {

const nlohmann::json* find_config(const ModelComponents& m, const std::string& key) {
  auto it = m.configs.find(key);
  if (it == m.configs.end() || it->second.is_null()) return nullptr;
  return &it->second;
}

Result<std::shared_ptr<WeightSource>> component(const ModelComponents& m, const std::string& key) {
  auto it = m.weights.find(key);
  if (it == m.weights.end() || it->second == nullptr)
    return Status::NotFound("model " + m.spec + " has no " + key + " weights");
  return it->second;
}

}  // namespace

DType Pipeline::Impl::encoder_dtype() const { return vae_encoder_dtype_for(family, shapes.vae, loaded_dtype); }

Status Pipeline::Impl::load_vae_encoder() {
  if (vae_encoder) return Status::Ok();
  HIPQ_ASSIGN_OR_RETURN(auto vae_weights, component(components, "vae"));
  HIPQ_ASSIGN_OR_RETURN(VaeEncoder e, VaeEncoder::load(shapes.vae, *vae_weights, *backend, encoder_dtype()));
  vae_encoder.emplace(std::move(e));
  return Status::Ok();
}

Result<std::vector<float>> Pipeline::Impl::init_latent(const spec::RgbImage& image, const Schedule& full, int t_start,
                                                       TorchGenerator& generator, DType latent_dtype) {
  kernels::Backend& be = *backend;
  HIPQ_RETURN_IF_ERROR(load_vae_encoder());
  const DType enc = vae_encoder->precision();
  // image.to(dtype) (the pipeline's), then .float() when the VAE is upcast.
  std::vector<float> pixels = preprocess_init_image(image);
  for (float& v : pixels) v = round_to_dtype(v, latent_dtype);
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor x, DeviceTensor::from_host(be, pixels.data(),
                                                                {1, 3, image.height, image.width}, DType::kF32));
  std::vector<float> moments;
  std::vector<int64_t> moments_shape;
  {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor m, vae_encoder->encode(be, x.t));
    moments_shape = m.t.shape_vec();
    HIPQ_ASSIGN_OR_RETURN(moments, to_host_f32(be, m.t));
  }
  HIPQ_RETURN_IF_ERROR(be.trim_cache());
  // retrieve_latents(sample_mode="sample"): randn in the moments' dtype from
  // the job's generator, the first draw of the job.
  const int64_t numel = static_cast<int64_t>(moments.size()) / 2;
  const std::vector<float> eps = generator.randn(numel, enc);
  HIPQ_ASSIGN_OR_RETURN(std::vector<float> latent, sample_latent_distribution(moments, moments_shape, eps));
  for (float& v : latent) v = round_to_dtype(round_to_dtype(v, enc), latent_dtype);  // init_latents.to(dtype)
  // scaling_factor * init_latents: a Python float times the tensor.
  const float sf = static_cast<float>(shapes.vae.scaling_factor);
  for (float& v : latent) v = round_to_dtype(sf * v, latent_dtype);
  // prepare_latents' noise: randn_tensor(shape, generator, dtype), the second draw.
  const std::vector<float> noise = generator.randn(numel, latent_dtype);
  return add_noise_at_start(full, t_start, latent, noise, latent_dtype);
}

std::vector<size_t> Pipeline::Impl::text_encoder_indices() const {
  if (refiner_model) return {1};
  if (family == "sdxl") return {0, 1};
  return {0};
}

std::vector<float> Pipeline::Impl::time_ids(const spec::GenerationSettings& s, int batch) const {
  std::vector<float> ids;
  if (family != "sdxl") return ids;
  if (refiner_model) return refiner_time_ids(s, batch, loaded_dtype);
  const std::vector<float> one = {static_cast<float>(s.height), static_cast<float>(s.width), 0.f, 0.f,
                                  static_cast<float>(s.height), static_cast<float>(s.width)};
  for (int b = 0; b < batch; ++b) ids.insert(ids.end(), one.begin(), one.end());
  return ids;
}

Result<std::vector<float>> Pipeline::Impl::run_vae(const std::vector<float>& z, int64_t lh, int64_t lw,
                                                   int64_t tile) {
  kernels::Backend& be = *backend;
  const int64_t lc = vae->config().latent_channels;
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor zt, DeviceTensor::from_host(be, z.data(), {1, lc, lh, lw}, DType::kF32));
  VaeTiling tiling;
  const int64_t threshold = options.vae_tile_above_latent_pixels;
  tiling.enabled = tile > 0 || threshold == 0 || (threshold > 0 && lh * lw > threshold);
  tiling.tile_sample_size = tile;
  tiling.whole_image_norms = tile > 0;  // the low placement's tiles (diffusers' own above the threshold)
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor image, vae->decode(be, zt.t, tiling));
  return to_host_f32(be, image.t);
}

Status Pipeline::Impl::use_vae_dtype(DType dtype) {
  if (vae && vae->precision() == dtype) return Status::Ok();
  vae.reset();
  auto loaded = [&]() -> Status {
    HIPQ_ASSIGN_OR_RETURN(auto vae_weights, component(components, "vae"));
    HIPQ_ASSIGN_OR_RETURN(VaeDecoder v, VaeDecoder::load(shapes.vae, *vae_weights, *backend, dtype));
    vae.emplace(std::move(v));
    HIPQ_RETURN_IF_ERROR(backend->synchronize());
    // The upload's f32 staging blocks: nothing after asks for them again.
    return backend->trim_cache();
  }();
  if (!loaded.ok()) {
    vae.reset();
    loaded_precision.clear();
  }
  return loaded;
}

Status Pipeline::Impl::load_models(const std::string& precision) {
  kernels::Backend& be = *backend;
  HIPQ_ASSIGN_OR_RETURN(DType dtype, precision_dtype(precision));
  PhaseTimer timer(&be);
  HIPQ_RETURN_IF_ERROR(timer.begin(std::string(spec::kPhaseLoad)));
  auto host_start = std::chrono::steady_clock::now();
  // Free the old precision's weights before the new ones arrive.
  release_text_encoders();
  unet.reset();
  vae.reset();
  vae_encoder.reset();
  loaded_precision.clear();
  // A generate() that switches precision measures its peak from here: the old weights are gone.
  be.reset_peak();

  ModelShapes sh;
  sh.family = family;
  // HIPQ_FP8_CONVS=all|aligned|off: which convolutions an fp8 UNet runs in
  // e4m3 (for measurements and parity runs); read by fp8 loads alone.
  if (is_fp8(precision)) {
    HIPQ_ASSIGN_OR_RETURN(sh.fp8_convs, fp8_convs_from_env());
  }
  HIPQ_ASSIGN_OR_RETURN(auto unet_weights, component(components, "unet"));
  if (const auto* j = find_config(components, "unet")) {
    HIPQ_ASSIGN_OR_RETURN(sh.unet, UNetConfig::from_json(*j, components.spec + " unet/config.json"));
  } else {
    HIPQ_ASSIGN_OR_RETURN(sh.unet, UNetConfig::from_weights(*unet_weights));
  }
  for (size_t i : text_encoder_indices()) {
    const std::string key = kTextEncoderKeys[i];
    HIPQ_ASSIGN_OR_RETURN(auto w, component(components, key));
    ClipTextConfig ccfg;
    if (const auto* j = find_config(components, key)) {
      HIPQ_ASSIGN_OR_RETURN(ccfg, ClipTextConfig::from_json(*j, components.spec + " " + key + "/config.json"));
    } else {
      HIPQ_ASSIGN_OR_RETURN(ccfg, ClipTextConfig::from_weights(*w));
    }
    sh.text_encoders.push_back(std::move(ccfg));
    for (const std::string& name : w->names()) {
      HIPQ_ASSIGN_OR_RETURN(TensorMeta meta, w->meta(name));
      if (meta.dtype != dtype) sh.text_staging = std::max(sh.text_staging, meta.bytes());
    }
  }
  if (family == "sdxl") {
    // add_embedding's input: the pooled text of encoder 2 and the time ids
    // (base 6, refiner 5), each addition_time_embed_dim wide.
    const int64_t pooled = sh.text_encoders.back().projection_dim;
    const int64_t time_width = sh.unet.projection_class_embeddings_input_dim - pooled;
    const int64_t want = refiner_model ? 5 : 6;
    if (time_width != want * sh.unet.addition_time_embed_dim)
      return Status::InvalidArgument(
          components.spec + ": the UNet's add_embedding takes " +
          std::to_string(sh.unet.projection_class_embeddings_input_dim) + " values, not the pooled text (" +
          std::to_string(pooled) + ") and " + std::to_string(want) + " time ids of " +
          std::to_string(sh.unet.addition_time_embed_dim) + " an SDXL " + (refiner_model ? "refiner" : "base") +
          " (text encoder" + (refiner_model ? " 2 alone" : "s 1 and 2") + ") conditions it on");
  }
  HIPQ_ASSIGN_OR_RETURN(auto vae_weights, component(components, "vae"));
  if (const auto* j = find_config(components, "vae")) {
    HIPQ_ASSIGN_OR_RETURN(sh.vae, VaeConfig::from_json(*j, components.spec + " vae/config.json"));
  } else {
    HIPQ_ASSIGN_OR_RETURN(sh.vae, VaeConfig::from_weights(*vae_weights, family));
  }
  shapes = std::move(sh);
  loaded_dtype = dtype;
  set_lora_device_budget(precision);

  HIPQ_ASSIGN_OR_RETURN(UNet u,
                        UNet::load(shapes.unet, *unet_weights, be, dtype, fp8_weights(precision, shapes.fp8_convs)));
  unet.emplace(std::move(u));
  enc1.pad_with_eos = family != "sd2";
  enc2.pad_with_eos = false;
  if (options.placement == Placement::kStandard) {
    HIPQ_RETURN_IF_ERROR(load_text_encoders());
  } else if (options.placement == Placement::kAuto) {
    // A card too small for every weight at once may still run the low
    // placement, which loads the text encoders per prompt: generate() decides.
    if (Status st = load_text_encoders(); !st.ok()) {
      if (st.code() != StatusCode::kResourceExhausted) return st;
      release_text_encoders();
    }
  }
  HIPQ_ASSIGN_OR_RETURN(VaeDecoder v,
                        VaeDecoder::load(shapes.vae, *vae_weights, be, vae_dtype_for(family, shapes.vae, dtype)));
  vae.emplace(std::move(v));

  HIPQ_RETURN_IF_ERROR(be.synchronize());
  count_lora_base_bits();
  // The uploads' temporaries (f32 staging of cast weights) are cached blocks
  // nothing after the load asks for again.
  HIPQ_RETURN_IF_ERROR(be.trim_cache());
  HIPQ_RETURN_IF_ERROR(timer.end());
  HIPQ_ASSIGN_OR_RETURN(auto phases, timer.finish());
  load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start).count();
  pending_load = phases.front();
  loaded_precision = precision;
  return Status::Ok();
}

void Pipeline::Impl::retain_lora_targets(const std::map<std::string, std::vector<std::string>>& targets) {
  for (const auto& [key, names] : targets) {
    auto it = base.weights.find(key);
    if (it == base.weights.end()) continue;
    if (auto* retained = dynamic_cast<lora::RetainedBaseSource*>(it->second.get())) retained->retain(names);
  }
}

void Pipeline::Impl::set_lora_device_budget(const std::string& precision) {
  const kernels::MemoryStats mem = backend->memory_stats();
  if (mem.limit <= 0 && mem.device_total <= 0) {
    lora_budget->set_limit(std::numeric_limits<int64_t>::max() / 2);
    return;
  }
  spec::GenerationSettings job = lora_reference_job.value_or(spec::GenerationSettings{});
  job.precision = precision;
  ModelShapes without = shapes;
  without.lora_base_bits = 0;
  auto plan = choose_placement(without, job, options.placement, *backend);
  lora_budget->set_limit(plan.ok() ? std::max<int64_t>(0, usable_device_memory(mem) - plan->peak()) : 0);
}

void Pipeline::Impl::count_lora_base_bits() { shapes.lora_base_bits = lora_budget->used(); }

Status Pipeline::Impl::fit_lora_base_bits(const spec::GenerationSettings& s, const ModelShapes* refiner) {
  lora_reference_job = s;
  count_lora_base_bits();
  // No new device copy during the job (a low placement's text encoders load
  // per prompt): its plan counts what is held now. The next load or switch
  // sets the room again.
  lora_budget->set_limit(lora_budget->used());
  if (shapes.lora_base_bits == 0) return Status::Ok();
  ModelShapes without = shapes;
  without.lora_base_bits = 0;
  auto with_bits = choose_placement(shapes, s, options.placement, *backend, refiner);
  auto alone = choose_placement(without, s, options.placement, *backend, refiner);
  // Kept only where they change nothing the job computes: the placement, the
  // decode's tiles and its dtype (the low placement's bf16 whole decode).
  if (!with_bits.ok() || (alone.ok() && (with_bits->placement != alone->placement ||
                                         with_bits->vae_tile != alone->vae_tile ||
                                         with_bits->vae_dtype != alone->vae_dtype))) {
    for (const char* key : {"unet", kTextEncoderKeys[0], kTextEncoderKeys[1]}) {
      auto it = base.weights.find(key);
      if (it == base.weights.end()) continue;
      if (auto* retained = dynamic_cast<lora::RetainedBaseSource*>(it->second.get()))
        HIPQ_RETURN_IF_ERROR(retained->evict_to_host());
    }
    count_lora_base_bits();
  }
  return Status::Ok();
}

Status Pipeline::Impl::switch_lora_weights(const std::map<std::string, std::vector<std::string>>& touched) {
  auto names_of = [&](const std::string& key) {
    auto it = touched.find(key);
    return it == touched.end() ? std::vector<std::string>() : it->second;
  };
  kernels::Backend& be = *backend;
  const std::string precision = loaded_precision;
  PhaseTimer timer(&be);
  HIPQ_RETURN_IF_ERROR(timer.begin(std::string(spec::kPhaseLoad)));
  loaded_precision.clear();  // a failure below leaves generate() to load afresh
  be.reset_peak();
  lora::RebindStats total;
  auto add = [&total](const lora::RebindStats& r) {
    total.weights += r.weights;
    total.device_bytes += r.device_bytes;
    total.base_ms += r.base_ms;
    total.merge_ms += r.merge_ms;
    total.write_ms += r.write_ms;
  };
  if (const std::vector<std::string> names = names_of("unet"); unet && !names.empty()) {
    HIPQ_ASSIGN_OR_RETURN(auto w, component(components, "unet"));
    HIPQ_ASSIGN_OR_RETURN(lora::RebindStats r, lora::rebind_weights(unet->bound_params(), names, *w, be,
                                                                    loaded_dtype, unet->fp8_weights()));
    add(r);
  }
  // Text encoders not on the device (a low placement between prompts) load
  // from `components` when next needed.
  TextEncoderSlot* slots[2] = {&enc1, &enc2};
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<std::string> names = names_of(kTextEncoderKeys[i]);
    if (!slots[i]->model || names.empty()) continue;
    HIPQ_ASSIGN_OR_RETURN(auto w, component(components, kTextEncoderKeys[i]));
    HIPQ_ASSIGN_OR_RETURN(lora::RebindStats r, lora::rebind_weights(slots[i]->model->bound_params(), names, *w,
                                                                    be, loaded_dtype, Fp8Weights{}));
    add(r);
  }
  HIPQ_RETURN_IF_ERROR(be.synchronize());
  count_lora_base_bits();
  lora_split.weights = total.weights;
  lora_split.base_ms = total.base_ms;
  lora_split.merge_ms = total.merge_ms;
  lora_split.rewrite_ms = total.write_ms;
  lora_split.device_base_bytes = shapes.lora_base_bits;
  HIPQ_RETURN_IF_ERROR(timer.end());
  HIPQ_ASSIGN_OR_RETURN(auto phases, timer.finish());
  pending_load = phases.front();
  loaded_precision = precision;
  return Status::Ok();
}

Status Pipeline::Impl::load_text_encoders() {
  for (size_t slot : {size_t{0}, size_t{1}}) HIPQ_RETURN_IF_ERROR(load_text_encoder(slot));
  return Status::Ok();
}

Status Pipeline::Impl::load_text_encoder(size_t slot) {
  TextEncoderSlot* slots[2] = {&enc1, &enc2};
  const std::vector<size_t> indices = text_encoder_indices();
  for (size_t j = 0; j < shapes.text_encoders.size() && j < indices.size(); ++j) {
    const size_t i = indices[j];
    if (i != slot || slots[i]->model) continue;
    HIPQ_ASSIGN_OR_RETURN(auto w, component(components, kTextEncoderKeys[i]));
    HIPQ_ASSIGN_OR_RETURN(ClipTextModel m, ClipTextModel::load(shapes.text_encoders[j], *w, *backend, loaded_dtype));
    slots[i]->model.emplace(std::move(m));
  }
  return Status::Ok();
}

void Pipeline::Impl::release_text_encoders() {
  enc1.model.reset();
  enc2.model.reset();
}

Result<std::vector<int32_t>> Pipeline::Impl::token_ids(const std::string& text, bool pad_with_eos) const {
  std::vector<int> ids = tokenizer->encode(text, ClipTokenizer::kMaxLength);
  ids = tokenizer->pad(std::move(ids), pad_with_eos ? tokenizer->eos() : 0, ClipTokenizer::kMaxLength);
  return std::vector<int32_t>(ids.begin(), ids.end());
}

Result<Pipeline::Impl::TextConditioning> Pipeline::Impl::encode_text(const spec::GenerationSettings& s, bool cfg,
                                                                     bool one_at_a_time) {
  kernels::Backend& be = *backend;
  if (!one_at_a_time) HIPQ_RETURN_IF_ERROR(load_text_encoders());
  // Loads encoder `slot` now when one_at_a_time (else all are held), and
  // releases it after its forward pass.
  auto acquire = [&](size_t slot) -> Status { return one_at_a_time ? load_text_encoder(slot) : Status::Ok(); };
  auto done_with = [&](size_t slot) {
    if (one_at_a_time) (slot == 0 ? enc1 : enc2).model.reset();
  };
  TextConditioning out;
  // diffusers' SDXL pipelines zero the negative conditioning when no negative
  // prompt is given (force_zeros_for_empty_prompt); SD 1.x/2.x encode "".
  const bool zero_negative = cfg && family == "sdxl" && force_zeros_for_empty_prompt && s.negative_prompt.empty();
  const bool encode_negative = cfg && !zero_negative;
  const int enc_batch = encode_negative ? 2 : 1;
  out.batch = cfg ? 2 : 1;

  auto ids_for = [&](bool pad_with_eos) -> Result<std::vector<int32_t>> {
    std::vector<int32_t> ids;
    if (encode_negative) {
      HIPQ_ASSIGN_OR_RETURN(auto neg, token_ids(s.negative_prompt, pad_with_eos));
      ids.insert(ids.end(), neg.begin(), neg.end());
    }
    HIPQ_ASSIGN_OR_RETURN(auto pos, token_ids(s.prompt, pad_with_eos));
    ids.insert(ids.end(), pos.begin(), pos.end());
    return ids;
  };

  // Encoded rows (negative first when encoded), widths summed over encoders.
  DeviceTensor hidden_enc;
  DeviceTensor pooled_enc;
  if (refiner_model) {
    // The refiner conditions on OpenCLIP bigG alone: its penultimate layer
    // (no concatenation) and its pooled projection.
    HIPQ_ASSIGN_OR_RETURN(auto ids2, ids_for(enc2.pad_with_eos));
    ClipTextRequest req;
    req.last_hidden_state = false;
    req.penultimate = true;
    req.pooled = true;
    HIPQ_RETURN_IF_ERROR(acquire(1));
    HIPQ_ASSIGN_OR_RETURN(ClipTextOutput o2, enc2.model->forward(be, ids2, enc_batch, req));
    done_with(1);
    hidden_enc = std::move(o2.penultimate);
    pooled_enc = std::move(o2.pooled);
  } else if (family == "sdxl") {
    HIPQ_ASSIGN_OR_RETURN(auto ids1, ids_for(enc1.pad_with_eos));
    HIPQ_ASSIGN_OR_RETURN(auto ids2, ids_for(enc2.pad_with_eos));
    ClipTextRequest req;
    req.last_hidden_state = false;
    req.penultimate = true;
    HIPQ_RETURN_IF_ERROR(acquire(0));
    HIPQ_ASSIGN_OR_RETURN(ClipTextOutput o1, enc1.model->forward(be, ids1, enc_batch, req));
    done_with(0);
    req.pooled = true;
    HIPQ_RETURN_IF_ERROR(acquire(1));
    HIPQ_ASSIGN_OR_RETURN(ClipTextOutput o2, enc2.model->forward(be, ids2, enc_batch, req));
    done_with(1);
    const kernels::Tensor& h1 = o1.penultimate.t;
    const kernels::Tensor& h2 = o2.penultimate.t;
    HIPQ_ASSIGN_OR_RETURN(hidden_enc, DeviceTensor::make(be, h1.dtype, {h1.dim(0), h1.dim(1), h1.dim(2) + h2.dim(2)}));
    kernels::Tensor parts[2] = {h1, h2};
    HIPQ_RETURN_IF_ERROR(be.concat(parts, 2, hidden_enc.t));
    pooled_enc = std::move(o2.pooled);
  } else {
    HIPQ_ASSIGN_OR_RETURN(auto ids1, ids_for(enc1.pad_with_eos));
    ClipTextRequest req;
    req.last_hidden_state = true;
    HIPQ_RETURN_IF_ERROR(acquire(0));
    HIPQ_ASSIGN_OR_RETURN(ClipTextOutput o1, enc1.model->forward(be, ids1, enc_batch, req));
    done_with(0);
    hidden_enc = std::move(o1.last_hidden_state);
  }
  if (!zero_negative) {
    out.hidden = std::move(hidden_enc);
    out.pooled = std::move(pooled_enc);
    return out;
  }
  // Batch of two: zeros for the negative row, then the encoded positive row.
  auto with_zero_row = [&](const kernels::Tensor& pos) -> Result<DeviceTensor> {
    std::vector<int64_t> shape = pos.shape_vec();
    shape[0] = 2;
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor both, DeviceTensor::make(be, pos.dtype, shape));
    const size_t row_bytes = pos.nbytes();
    HIPQ_RETURN_IF_ERROR(be.memset_zero(both.buffer.data(), row_bytes));
    HIPQ_RETURN_IF_ERROR(be.copy_device(pos.data, static_cast<char*>(both.buffer.data()) + row_bytes, row_bytes));
    return both;
  };
  HIPQ_ASSIGN_OR_RETURN(out.hidden, with_zero_row(hidden_enc.t));
  HIPQ_ASSIGN_OR_RETURN(out.pooled, with_zero_row(pooled_enc.t));
  return out;
}

Pipeline::Pipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pipeline::~Pipeline() = default;

Result<std::unique_ptr<Pipeline>> Pipeline::load(std::string_view model_spec, kernels::Backend& backend,
                                                 const LoadOptions& options) {
  HIPQ_ASSIGN_OR_RETURN(ModelComponents model, open_model(model_spec));
  return load(model, backend, options);
}

Result<std::unique_ptr<Pipeline>> Pipeline::load(const ModelComponents& model, kernels::Backend& backend,
                                                 const LoadOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->backend = &backend;
  impl->base = model;
  // LoRA switches merge from kept copies of the base bits they touch (on the
  // device while the budget has room, else on the host:
  // engine/lora/lora_base_bits.h), never from the checkpoint again.
  for (const char* key : {"unet", kTextEncoderKeys[0], kTextEncoderKeys[1]}) {
    auto it = impl->base.weights.find(key);
    if (it != impl->base.weights.end() && it->second != nullptr)
      it->second = std::make_shared<lora::RetainedBaseSource>(it->second, impl->lora_budget);
  }
  impl->components = impl->base;
  impl->options = options;
  impl->family = model.family;
  if (impl->family.empty()) {
    HIPQ_ASSIGN_OR_RETURN(auto unet_weights, component(model, "unet"));
    HIPQ_ASSIGN_OR_RETURN(impl->family, detect_family(*unet_weights));
  }
  impl->refiner_model = impl->family == "sdxl" && is_sdxl_refiner(model);
  if (const auto* index = find_config(model, "model_index")) {
    if (const auto it = index->find("force_zeros_for_empty_prompt"); it != index->end() && it->is_boolean())
      impl->force_zeros_for_empty_prompt = it->get<bool>();
  }
  if (!options.loras.empty()) {
    HIPQ_ASSIGN_OR_RETURN(lora::LoraSet set, lora::open_lora_set(impl->base, impl->family, options.loras));
    impl->retain_lora_targets(set.targets);
    impl->components = std::move(set.components);
    impl->loras = std::move(set.loras);
    impl->lora_signatures = std::move(set.signatures);
  }
  SchedulerConfig defaults = SchedulerConfig::defaults_for_family(impl->family);
  if (const auto* j = find_config(model, "scheduler")) {
    auto cfg = SchedulerConfig::from_json(*j, defaults);
    if (!cfg.ok()) return cfg.status().WithContext(model.spec + " scheduler/scheduler_config.json");
    impl->scheduler = *cfg;
    impl->scheduler_json = *j;
  } else {
    impl->scheduler = defaults;
  }
  if (impl->scheduler_json.is_null()) {
    const SchedulerConfig& c = impl->scheduler;
    impl->scheduler_json = {{"num_train_timesteps", c.num_train_timesteps},
                            {"beta_start", c.beta_start},
                            {"beta_end", c.beta_end},
                            {"beta_schedule", c.beta_schedule},
                            {"prediction_type", c.prediction_type},
                            {"timestep_spacing", c.timestep_spacing},
                            {"steps_offset", c.steps_offset},
                            {"set_alpha_to_one", c.set_alpha_to_one},
                            {"clip_sample", c.clip_sample}};
  }
  std::filesystem::path vocab = model.vocab;
  if (vocab.empty()) {
    HIPQ_ASSIGN_OR_RETURN(vocab, find_default_clip_vocab());
  }
  auto tok = ClipTokenizer::load(vocab, model.merges);
  if (!tok.ok()) return tok.status().WithContext("tokenizer of " + model.spec);
  impl->tokenizer.emplace(std::move(tok).value());
  if (auto dt = precision_dtype(options.precision); !dt.ok()) return dt.status();
  HIPQ_RETURN_IF_ERROR(impl->load_models(options.precision));
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(impl)));
}

Status Pipeline::set_loras(const std::vector<spec::LoraSpec>& specs) {
  Impl& im = *impl_;
  const auto open_start = std::chrono::steady_clock::now();
  HIPQ_ASSIGN_OR_RETURN(lora::LoraSet set, lora::open_lora_set(im.base, im.family, specs));
  im.lora_split = {};
  im.lora_split.files_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - open_start).count();
  auto same = [](const lora::AppliedLora& a, const lora::AppliedLora& b) {
    return a.spec == b.spec && a.sha256 == b.sha256;
  };
  if (std::equal(set.loras.begin(), set.loras.end(), im.loras.begin(), im.loras.end(), same)) return Status::Ok();
  // What either set modifies is written again, unless both put the same on
  // it; nothing else is touched.
  const std::map<std::string, std::vector<std::string>> touched =
      lora::weights_to_rewrite(im.lora_signatures, set.signatures);
  im.retain_lora_targets(set.targets);
  im.components = std::move(set.components);
  im.loras = std::move(set.loras);
  im.lora_signatures = std::move(set.signatures);
  im.options.loras = specs;
  // Not loaded (a failed precision switch): the next generate() loads afresh.
  if (im.loaded_precision.empty() || !im.unet) return Status::Ok();
  im.set_lora_device_budget(im.loaded_precision);
  return im.switch_lora_weights(touched);
}

const std::vector<lora::AppliedLora>& Pipeline::loras() const { return impl_->loras; }

const LoraSwitchSplit& Pipeline::last_lora_switch() const { return impl_->lora_split; }

int64_t Pipeline::lora_base_bits_on_device() const { return impl_->shapes.lora_base_bits; }

namespace pipeline_detail {

Status denoise_loop(Pipeline::Impl& im, const kernels::Tensor& hidden, const kernels::Tensor* pooled,
                    const std::vector<float>& time_ids, int batch, const Schedule& schedule,
                    const SchedulerConfig& scheduler_cfg, kernels::Tensor& latents, const StepNoiseSource& noise,
                    LoopRun& run) {
  kernels::Backend& be = *im.backend;
  const int64_t jobs = latents.dim(0);
  if (jobs != static_cast<int64_t>(run.jobs.size()) || (batch != jobs && batch != 2 * jobs))
    return Status::Internal("denoise loop: " + std::to_string(jobs) + " latents, " +
                            std::to_string(run.jobs.size()) + " jobs, UNet batch " + std::to_string(batch));
  const bool cfg = batch == 2 * jobs;
  const int64_t lc = latents.dim(1), lh = latents.dim(2), lw = latents.dim(3);
  // diffusers applies guidance_rescale only with classifier-free guidance.
  bool rescale = false;
  for (const LoopJob& j : run.jobs) rescale = rescale || (cfg && j.settings->guidance_rescale > 0.0f);
  DeviceTensor rescale_tmp;
  if (rescale) {
    HIPQ_ASSIGN_OR_RETURN(rescale_tmp, DeviceTensor::make(be, DType::kF32, {1, lc, lh, lw}));
  }
  // The UNet call of every step on fixed buffers: eager first, then a graph replay (engine/unet_step.h).
  // Destroyed right after the loop, so its graph's reserved memory is free for the decode.
  std::optional<UNetStep> unet_step;
  {
    HIPQ_ASSIGN_OR_RETURN(UNetStep made,
                          UNetStep::make(be, *im.unet, hidden, pooled, time_ids, batch, lh, lw, schedule.timesteps));
    unet_step.emplace(std::move(made));
  }

  // Progress and cancellation follow the device without draining it: after
  // step i is enqueued, the host waits on the event that closed step i - 1
  // (Backend::elapsed_ms synchronises on its end event only), so one step
  // stays queued while progress is reported and the cancel flags are read.
  // A step's timing is the same interval on both clocks: from the end of the
  // step before (or the loop's start) to the end of its guidance combine, on
  // the device's events (gpu_ms) and as the host sees those ends (host_ms);
  // the jobs of a batch share it.
  std::vector<int> step_done;  // an event after each enqueued step
  HIPQ_ASSIGN_OR_RETURN(int loop_start, be.record_event());
  auto last_seen = std::chrono::steady_clock::now();
  const int total = run.total_steps > 0 ? run.total_steps : static_cast<int>(schedule.timesteps.size());
  auto report_finished = [&](int finished) -> Status {
    const int from = finished == 0 ? loop_start : step_done[static_cast<size_t>(finished) - 1];
    HIPQ_ASSIGN_OR_RETURN(double gpu_ms, be.elapsed_ms(from, step_done[static_cast<size_t>(finished)]));
    const auto now = std::chrono::steady_clock::now();
    const PhaseTiming row{std::string(spec::kPhaseStep),
                          std::chrono::duration<double, std::milli>(now - last_seen).count(), gpu_ms};
    last_seen = now;
    for (LoopJob& j : run.jobs) {
      if (j.stopped) continue;
      j.out->steps.push_back(row);
      if (!run.model.empty()) j.out->step_models.push_back(run.model);
      if (j.progress != nullptr && *j.progress) (*j.progress)(run.step_offset + finished + 1, total);
    }
    return Status::Ok();
  };
  const int offset = run.step_offset;
  // A job whose flag turned true stops on its own: its rows are still
  // computed (the batch keeps its shape, so the others' results do not
  // change), its steps and progress are no longer reported; the loop ends
  // Cancelled when every job of the batch has stopped.
  auto check_cancels = [&](int step_index) -> Status {
    bool any_live = false;
    for (LoopJob& j : run.jobs) {
      if (!j.stopped && j.cancel != nullptr && j.cancel->load()) {
        j.stopped = true;
        j.stopped_at = offset + step_index + 1;
      }
      any_live = any_live || !j.stopped;
    }
    if (any_live) return Status::Ok();
    return Status::Cancelled("generation cancelled at step " + std::to_string(offset + step_index + 1) + " of " +
                             std::to_string(total));
  };
  Denoiser denoise = [&](const kernels::Tensor& model_input, const DenoiseStep& step,
                         kernels::Tensor& model_output) -> Status {
    HIPQ_RETURN_IF_ERROR(check_cancels(step.index));
    HIPQ_ASSIGN_OR_RETURN(const kernels::Tensor* pred, unet_step->run(model_input, step.index));
    // Job j's rows: 2j (unconditional), 2j + 1 (conditional) with guidance; j without.
    for (int64_t j = 0; j < jobs; ++j) {
      const spec::GenerationSettings& s = *run.jobs[static_cast<size_t>(j)].settings;
      kernels::Tensor out_j = model_output.slice(0, j, 1);
      if (cfg) {
        const kernels::Tensor uncond = pred->slice(0, 2 * j, 1);
        const kernels::Tensor text_pred = pred->slice(0, 2 * j + 1, 1);
        HIPQ_RETURN_IF_ERROR(combine_guidance(be, uncond, text_pred, s.guidance, out_j));
        if (s.guidance_rescale > 0.0f)
          HIPQ_RETURN_IF_ERROR(rescale_guidance(be, text_pred, s.guidance_rescale, out_j, rescale_tmp.t));
      } else {
        HIPQ_RETURN_IF_ERROR(be.copy(pred->slice(0, j, 1), out_j));
      }
    }
    HIPQ_ASSIGN_OR_RETURN(int done, be.record_event());
    step_done.push_back(done);
    if (step.index > 0) HIPQ_RETURN_IF_ERROR(report_finished(step.index - 1));
    // A cancel seen now drops this step, queued but not waited for.
    return check_cancels(step.index);
  };
  last_seen = std::chrono::steady_clock::now();
  Status sampled = sample(be, schedule, scheduler_cfg, latents, denoise, noise);
  if (sampled.ok() && !step_done.empty()) sampled = report_finished(static_cast<int>(step_done.size()) - 1);
  unet_step.reset();
  return sampled;
}

// The planned decode ran out of device memory: the plan was under what the
// device really needed, or something took memory since the plan. The latent is
// finished (the whole denoise is in it), so it is decoded again in the low
// placement's tiles smaller than the planned decode's, in the decoder's dtype,
// each try after the pool's cache went back; the job records the tile it took
// (GenerationOutput::decode_fallback, timings.json). Another error, or every
// tile out of memory too, fails the job with what ran out.
Result<std::vector<float>> decode_in_smaller_tiles(Pipeline::Impl& decoder, kernels::Backend& be,
                                                   const std::vector<float>& z, int64_t lh, int64_t lw,
                                                   const Status& first, GenerationOutput& out) {
  const int64_t planned = out.memory_plan.vae_tile;
  std::string tried;
  for (int64_t tile : low_placement_vae_tiles(decoder.vae->config())) {
    if (planned > 0 && tile >= planned) continue;
    if (lh <= tile / 8 && lw <= tile / 8) continue;  // one tile: the whole image again
    HIPQ_RETURN_IF_ERROR(be.trim_cache());
    Result<std::vector<float>> pixels = decoder.run_vae(z, lh, lw, tile);
    if (pixels.ok()) {
      out.decode_fallback = GenerationOutput::DecodeFallback{tile, first.message()};
      return pixels;
    }
    if (pixels.status().code() != StatusCode::kResourceExhausted) return pixels.status();
    tried += (tried.empty() ? "" : ", ") + std::to_string(tile) + " px";
  }
  return Status::ResourceExhausted(
      first.message() + (tried.empty() ? std::string("; no smaller tile to decode in")
                                       : "; decoding in tiles of " + tried + " ran out of device memory too") +
      ": give the worker more device memory (--device-memory-limit) or make the image smaller");
}

Status begin_generation(Pipeline::Impl& im, Pipeline::Impl* rf, const spec::GenerationSettings& s, int jobs,
                        kernels::Backend& be, GenerationOutput& out) {
  out.warm = !im.pending_load.has_value() && im.loaded_precision == s.precision;
  if (rf) out.warm = out.warm && !rf->pending_load.has_value() && rf->loaded_precision == s.precision;
  if (im.loaded_precision != s.precision) {
    HIPQ_RETURN_IF_ERROR(im.load_models(s.precision));
  }
  if (rf && rf->loaded_precision != s.precision) {
    HIPQ_RETURN_IF_ERROR(rf->load_models(s.precision));
  }
  if (rf && (rf->unet->config().in_channels != im.unet->config().in_channels ||
             rf->shapes.vae.latent_channels != im.shapes.vae.latent_channels))
    return Status::InvalidArgument("refiner " + rf->components.spec + ": its UNet takes " +
                                   std::to_string(rf->unet->config().in_channels) + " latent channels, the base's " +
                                   std::to_string(im.unet->config().in_channels) +
                                   " (the two must share one latent space)");
  {
    // One load row for the job (the base's and the refiner's loads summed);
    // each model's own in model_phases.
    std::optional<PhaseTiming> load;
    for (Pipeline::Impl* m : {&im, rf}) {
      if (m == nullptr || !m->pending_load) continue;
      if (rf) out.model_phases.push_back({m == rf ? "refiner" : "base", *m->pending_load});
      if (!load) {
        load = *m->pending_load;
      } else {
        load->host_ms += m->pending_load->host_ms;
        load->gpu_ms += m->pending_load->gpu_ms;
      }
      m->pending_load.reset();
    }
    if (load) out.phases.push_back(*load);
  }
  HIPQ_RETURN_IF_ERROR(im.fit_lora_base_bits(s, rf ? &rf->shapes : nullptr));
  HIPQ_ASSIGN_OR_RETURN(out.memory_plan, choose_placement(im.shapes, s, im.options.placement, be,
                                                          rf ? &rf->shapes : nullptr, jobs));
  return Status::Ok();
}

// The model's scheduler config, with the job's timestep spacing when it names one.
SchedulerConfig job_scheduler(const Pipeline::Impl& im, const spec::GenerationSettings& s) {
  SchedulerConfig c = im.scheduler;
  if (!s.timestep_spacing.empty()) c.timestep_spacing = s.timestep_spacing;
  return c;
}

// The decoding model's VAE in the plan's dtype (a low placement may decode in
// bf16; the next job whose plan does not loads it back), before the text
// encode: every phase's plan counts it so. The time is the job's load time
// (and the refiner's, when it decodes); a job that loads it is not warm.
Status load_decoder_in_plan_dtype(Pipeline::Impl& decoder, bool refiner, kernels::Backend& be,
                                  GenerationOutput& out) {
  if (decoder.vae && decoder.vae->precision() == out.memory_plan.vae_dtype) return Status::Ok();
  PhaseTimer timer(&be);
  HIPQ_RETURN_IF_ERROR(timer.begin(std::string(spec::kPhaseLoad)));
  HIPQ_RETURN_IF_ERROR(decoder.use_vae_dtype(out.memory_plan.vae_dtype));
  HIPQ_RETURN_IF_ERROR(timer.end());
  HIPQ_ASSIGN_OR_RETURN(auto phases, timer.finish());
  const PhaseTiming& t = phases.front();
  auto add_to = [&](PhaseTiming& row) {
    row.host_ms += t.host_ms;
    row.gpu_ms += t.gpu_ms;
  };
  if (!out.phases.empty() && out.phases.front().phase == spec::kPhaseLoad) {
    add_to(out.phases.front());
  } else {
    out.phases.insert(out.phases.begin(), t);
  }
  if (refiner) {
    auto row = std::find_if(out.model_phases.begin(), out.model_phases.end(), [](const ModelPhaseTiming& m) {
      return m.model == "refiner" && m.timing.phase == spec::kPhaseLoad;
    });
    if (row == out.model_phases.end()) {
      out.model_phases.push_back({"refiner", t});
    } else {
      add_to(row->timing);
    }
  }
  out.warm = false;
  return Status::Ok();
}

Status decode_latent(Pipeline::Impl& decoder, kernels::Backend& be, const spec::GenerationSettings& s,
                     PhasePeaks& peaks, GenerationOutput& out) {
  const int64_t lh = s.height / 8, lw = s.width / 8;
  peaks.begin();
  const VaeConfig& vc = decoder.vae->config();
  std::vector<float> scaled(out.latent.size());
  // diffusers divides by the scaling factor (latents / scaling_factor):
  // the same float division, not a multiplication by the reciprocal.
  const float sf = static_cast<float>(vc.scaling_factor);
  for (size_t i = 0; i < scaled.size(); ++i) scaled[i] = out.latent[i] / sf;
  Result<std::vector<float>> decoded = decoder.run_vae(scaled, lh, lw, out.memory_plan.vae_tile);
  if (!decoded.ok() && decoded.status().code() == StatusCode::kResourceExhausted)
    decoded = decode_in_smaller_tiles(decoder, be, scaled, lh, lw, decoded.status(), out);
  if (!decoded.ok()) return decoded.status();
  const std::vector<float>& pixels = *decoded;
  peaks.end(std::string(spec::kPhaseDecode));
  // Nor does the next job need the decode's full-size blocks, or a 16-bit
  // VAE's kept conv weight forms (0.09 GiB at SDXL in bf16): kept, they sat
  // through the next job's text encode and denoise, whose plan moments do
  // not count them (the H200's 8 GiB run: text encode 61 MB over its
  // moment). The next decode makes them again.
  be.drop_constant_forms();
  HIPQ_RETURN_IF_ERROR(be.trim_cache());
  spec::RgbImage rgb = rgb8_from_decoded(pixels.data(), s.width, s.height);
  out.rgb = std::move(rgb.rgb);
  out.width = s.width;
  out.height = s.height;
  return Status::Ok();
}

}  // namespace pipeline_detail

using pipeline_detail::begin_generation;
using pipeline_detail::decode_in_smaller_tiles;
using pipeline_detail::decode_latent;
using pipeline_detail::denoise_loop;
using pipeline_detail::job_scheduler;
using pipeline_detail::load_decoder_in_plan_dtype;
using pipeline_detail::LoopJob;
using pipeline_detail::LoopRun;

Result<GenerationOutput> Pipeline::generate(const spec::GenerationSettings& s, const ProgressFn& progress,
                                            const std::atomic<bool>* cancel, Pipeline* refiner_pipeline) {
  HIPQ_RETURN_IF_ERROR(s.validate());
  Impl& im = *impl_;
  kernels::Backend& be = *im.backend;
  // img2img: the init image is read and checked (size rule, damaged or
  // lying files) before any device work.
  const bool img2img = !s.init_image.empty();
  // A plan counts the VAE encoder for img2img jobs only: one held from an
  // earlier job goes back first.
  if (!img2img) im.vae_encoder.reset();
  std::optional<spec::RgbImage> init_image;
  if (img2img) {
    HIPQ_ASSIGN_OR_RETURN(spec::RgbImage img, spec::read_init_image(s.init_image, {s.width, s.height}));
    init_image.emplace(std::move(img));
  }
  // Base + refiner (docs/pipeline.md, "Refiner"): both models checked before any device work.
  Impl* rf = nullptr;
  if (!s.refiner.empty()) {
    if (refiner_pipeline == nullptr)
      return Status::FailedPrecondition("the job names refiner " + s.refiner +
                                        " but no refiner model was loaded for it (the caller hands the refiner's "
                                        "pipeline to generate())");
    if (refiner_pipeline == this) return Status::InvalidArgument("refiner: the base and the refiner are one pipeline");
    rf = refiner_pipeline->impl_.get();
    if (im.family != "sdxl" || im.refiner_model)
      return Status::InvalidArgument("refiner " + s.refiner + ": the base model " + im.components.spec + " is " +
                                     (im.refiner_model ? "itself an SDXL refiner" : "not SDXL (" + im.family + ")") +
                                     "; a refiner follows an SDXL base");
    if (!rf->refiner_model)
      return Status::InvalidArgument("refiner " + rf->components.spec +
                                     " is not an SDXL refiner (it has text encoder 1 or is not SDXL); give "
                                     "stable-diffusion-xl-refiner-1.0 or synthetic:tiny-sdxl-refiner");
  } else if (refiner_pipeline != nullptr) {
    return Status::InvalidArgument("a refiner pipeline was given but the settings name no refiner");
  }
  if (im.refiner_model && !img2img && rf == nullptr)
    return Status::InvalidArgument(im.components.spec +
                                   " is an SDXL refiner: it runs as img2img (an init image and a strength) or as "
                                   "the refiner of an SDXL base (--refiner), not text-to-image");
  HIPQ_ASSIGN_OR_RETURN(SamplerKind kind, parse_sampler_kind(s.sampler));
  HIPQ_ASSIGN_OR_RETURN(RngKind rng_kind, parse_rng_kind(s.rng));
  auto cancelled = [&] { return cancel != nullptr && cancel->load(); };

  GenerationOutput out;
  be.reset_peak();
  PhasePeaks peaks(be);  // each phase's peak beside its plan (timings.json phase_peak_bytes)
  HIPQ_RETURN_IF_ERROR(begin_generation(im, rf, s, 1, be, out));
  // The low placement holds one text encoder at a time, only while it
  // encodes: those the load or a standard job left (the base's and the
  // refiner's) go now, and the low placement is planned again without them.
  // A plan made while they were held read the runtime's share of the device
  // with the driver's rounding of their blocks in it: on an H100 under an
  // 8 GiB cap a worker's first plan saw 1.05 GiB where every later one saw
  // 0.84, so its first job decoded in 768 px tiles (9 s) where the later ones
  // decoded whole in bf16 (66 ms).
  if (out.memory_plan.placement == Placement::kLow && (im.text_encoders_held() || (rf && rf->text_encoders_held()))) {
    im.release_text_encoders();
    if (rf) rf->release_text_encoders();
    HIPQ_RETURN_IF_ERROR(be.trim_cache());
    HIPQ_ASSIGN_OR_RETURN(out.memory_plan,
                          choose_placement(im.shapes, s, Placement::kLow, be, rf ? &rf->shapes : nullptr));
  }
  const bool low = out.memory_plan.placement == Placement::kLow;
  // A base + refiner job decodes with the refiner's VAE, as diffusers'
  // refiner pipeline does.
  Impl& decoder = rf ? *rf : im;
  HIPQ_RETURN_IF_ERROR(load_decoder_in_plan_dtype(decoder, rf != nullptr, be, out));

  // The schedules, before any device work: a split that leaves a model no
  // step fails now.
  const SchedulerConfig scheduler_cfg = job_scheduler(im, s);
  HIPQ_ASSIGN_OR_RETURN(Schedule schedule, make_schedule(scheduler_cfg, s.steps, kind));
  SchedulerConfig refiner_cfg;
  Schedule refiner_schedule;
  if (rf) {
    // diffusers: the base runs the timesteps >= the cutoff of its schedule
    // (denoising_end), the refiner those < the cutoff of its own (denoising_start).
    const int base_cutoff = discrete_timestep_cutoff(scheduler_cfg.num_train_timesteps, s.refiner_switch_at);
    HIPQ_ASSIGN_OR_RETURN(schedule, schedule_head(schedule, base_cutoff, s.refiner_switch_at));
    refiner_cfg = job_scheduler(*rf, s);
    HIPQ_ASSIGN_OR_RETURN(Schedule refiner_full, make_schedule(refiner_cfg, s.steps, kind));
    const int refiner_cutoff = discrete_timestep_cutoff(refiner_cfg.num_train_timesteps, s.refiner_switch_at);
    HIPQ_ASSIGN_OR_RETURN(refiner_schedule, schedule_tail(refiner_full, refiner_cutoff, s.refiner_switch_at));
    RefinerSplit split;
    split.model_spec = rf->components.spec;
    split.weights_sha256 = rf->components.weights_sha256;
    split.switch_at = s.refiner_switch_at;
    split.base_cutoff = base_cutoff;
    split.refiner_cutoff = refiner_cutoff;
    split.base_steps = static_cast<int>(schedule.timesteps.size());
    split.refiner_steps = static_cast<int>(refiner_schedule.timesteps.size());
    split.refiner_start = inference_steps(refiner_full) - split.refiner_steps;
    out.refiner = split;
  }
  if (cancelled()) return Status::Cancelled("generation cancelled before text encoding");

  PhaseTimer timer(&be);
  PhaseTimer model_timer(&be);  // each model's share of text_encode and denoise (base + refiner jobs)
  const bool cfg = s.guidance > 1.0f;
  const int64_t lh = s.height / 8, lw = s.width / 8;
  const int64_t lc = im.unet->config().in_channels;
  const int64_t latent_numel = lc * lh * lw;

  HIPQ_RETURN_IF_ERROR(timer.begin(std::string(spec::kPhaseTextEncode)));
  if (rf) HIPQ_RETURN_IF_ERROR(model_timer.begin(std::string(spec::kPhaseTextEncode)));
  peaks.begin();  // the phase's peak from the bytes its plan starts from
  HIPQ_ASSIGN_OR_RETURN(Impl::TextConditioning text, im.encode_text(s, cfg, /*one_at_a_time=*/low));
  if (low) im.release_text_encoders();
  std::optional<Impl::TextConditioning> refiner_text;
  if (rf) {
    HIPQ_RETURN_IF_ERROR(model_timer.end());
    HIPQ_RETURN_IF_ERROR(model_timer.begin(std::string(spec::kPhaseTextEncode)));
    HIPQ_ASSIGN_OR_RETURN(Impl::TextConditioning t, rf->encode_text(s, cfg, /*one_at_a_time=*/low));
    refiner_text.emplace(std::move(t));
    if (low) rf->release_text_encoders();
    HIPQ_RETURN_IF_ERROR(model_timer.end());
  }
  HIPQ_RETURN_IF_ERROR(timer.end());
  peaks.end(std::string(spec::kPhaseTextEncode));

  // diffusers draws the noise in the pipeline's dtype (prepare_latents: dtype of
  // the prompt embeddings), and torch's CPU generator gives a different
  // sequence per dtype: same seed, same draw.
  HIPQ_ASSIGN_OR_RETURN(DType noise_dtype, precision_dtype(s.precision));
  // One generator for the job: the initial noise first, then (stochastic
  // samplers) each step's noise, as diffusers passes one torch.Generator to
  // prepare_latents and to the scheduler's step(). img2img draws the encoder's
  // sample and then the noise from it before the steps draw theirs. A base +
  // refiner job hands the same generator on to the refiner's steps (the one
  // generator object passed to both diffusers pipelines).
  TorchGenerator generator(rng_kind, s.seed);
  std::vector<float> start;
  if (img2img) {
    HIPQ_RETURN_IF_ERROR(timer.begin(std::string(spec::kPhaseImageEncode)));
    peaks.begin();
    // get_timesteps: the last int(steps * strength) steps of the schedule,
    // the sampler starting from the noised image latent.
    const int t_start = strength_start_index(s.steps, s.strength);
    HIPQ_ASSIGN_OR_RETURN(start, im.init_latent(*init_image, schedule, t_start, generator, noise_dtype));
    if (static_cast<int64_t>(start.size()) != latent_numel)
      return Status::FailedPrecondition(im.components.spec + ": the VAE encodes a " + std::to_string(s.width) + "x" +
                                        std::to_string(s.height) + " image to " + std::to_string(start.size()) +
                                        " latent values, the UNet takes " + std::to_string(latent_numel) +
                                        " ([1, " + std::to_string(lc) + ", " + std::to_string(lh) + ", " +
                                        std::to_string(lw) + "]): this model cannot run img2img");
    if (low) im.vae_encoder.reset();
    HIPQ_ASSIGN_OR_RETURN(schedule, cut_schedule(schedule, t_start));
    HIPQ_RETURN_IF_ERROR(timer.end());
    peaks.end(std::string(spec::kPhaseImageEncode));
    // A 16-bit encoder's conv forms go with the phase: the denoise's moment
    // counts the UNet's only.
    be.drop_constant_forms();
    if (cancelled()) return Status::Cancelled("generation cancelled before denoising");
  } else {
    start = generator.randn(latent_numel, noise_dtype);
  }
  // The latents live on the device for the whole loop (engine/sampler.h).
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor latents,
                        DeviceTensor::from_host(be, start.data(), {1, lc, lh, lw}, DType::kF32));

  const int batch = text.batch;
  out.unet_batch = batch;
  out.model_calls = static_cast<int>(schedule.timesteps.size() + refiner_schedule.timesteps.size());
  const StepNoiseSource noise{&generator, noise_dtype, {}};
  LoopRun run;
  run.jobs.push_back(LoopJob{&s, &progress, cancel, &out, false, 0});
  run.total_steps = out.model_calls;

  HIPQ_RETURN_IF_ERROR(timer.begin(std::string(spec::kPhaseDenoise)));
  peaks.begin();
  if (rf) {
    run.model = "base";
    HIPQ_RETURN_IF_ERROR(model_timer.begin(std::string(spec::kPhaseDenoise)));
  }
  HIPQ_RETURN_IF_ERROR(denoise_loop(im, text.hidden.t, im.family == "sdxl" ? &text.pooled.t : nullptr,
                                    im.time_ids(s, batch), batch, schedule, scheduler_cfg, latents.t, noise, run));
  if (rf) {
    HIPQ_RETURN_IF_ERROR(model_timer.end());
    // The base's conv weight forms are not needed by the refiner's steps.
    be.drop_constant_forms();
    HIPQ_RETURN_IF_ERROR(be.trim_cache());
    if (cancelled()) return Status::Cancelled("generation cancelled before the refiner");
    HIPQ_RETURN_IF_ERROR(model_timer.begin(std::string(spec::kPhaseDenoise)));
    run.model = "refiner";
    run.step_offset = static_cast<int>(schedule.timesteps.size());
    HIPQ_RETURN_IF_ERROR(denoise_loop(*rf, refiner_text->hidden.t, &refiner_text->pooled.t,
                                      rf->time_ids(s, refiner_text->batch), refiner_text->batch, refiner_schedule,
                                      refiner_cfg, latents.t, noise, run));
    HIPQ_RETURN_IF_ERROR(model_timer.end());
  }
  HIPQ_RETURN_IF_ERROR(timer.end());
  peaks.end(std::string(spec::kPhaseDenoise));
  // The decode needs none of the step's blocks: the graph's reservation, the
  // activations' cached blocks and the conv weights' kept forms (made again
  // by the next job's first step) go back to the device before it starts.
  be.drop_constant_forms();
  HIPQ_RETURN_IF_ERROR(be.trim_cache());
  // The one copy of the latents to the host: grading and writing read it there.
  HIPQ_ASSIGN_OR_RETURN(out.latent, to_host_f32(be, latents.t));
  out.latent_shape = {1, lc, lh, lw};
  if (cancelled()) return Status::Cancelled("generation cancelled before decoding");

  HIPQ_RETURN_IF_ERROR(timer.begin(std::string(spec::kPhaseDecode)));
  HIPQ_RETURN_IF_ERROR(decode_latent(decoder, be, s, peaks, out));
  HIPQ_RETURN_IF_ERROR(timer.end());

  HIPQ_ASSIGN_OR_RETURN(auto phases, timer.finish());
  out.phases.insert(out.phases.end(), phases.begin(), phases.end());
  if (rf) {
    HIPQ_ASSIGN_OR_RETURN(auto shares, model_timer.finish());
    // text_encode base, text_encode refiner, denoise base, denoise refiner.
    for (size_t i = 0; i < shares.size(); ++i) out.model_phases.push_back({i % 2 == 0 ? "base" : "refiner", shares[i]});
  }
  out.peak_memory_bytes = peaks.job_peak();
  out.phase_peaks = peaks.phases();
  return out;
}

Result<Pipeline::PromptEmbeddings> Pipeline::encode_prompt(const spec::GenerationSettings& s) {
  HIPQ_RETURN_IF_ERROR(s.validate());
  Impl& im = *impl_;
  if (im.loaded_precision != s.precision) HIPQ_RETURN_IF_ERROR(im.load_models(s.precision));
  HIPQ_ASSIGN_OR_RETURN(Impl::TextConditioning text, im.encode_text(s, s.guidance > 1.0f));
  PromptEmbeddings e;
  HIPQ_ASSIGN_OR_RETURN(e.hidden, to_host_f32(*im.backend, text.hidden.t));
  e.hidden_shape = text.hidden.t.shape_vec();
  if (im.family == "sdxl") {
    HIPQ_ASSIGN_OR_RETURN(e.pooled, to_host_f32(*im.backend, text.pooled.t));
    e.pooled_shape = text.pooled.t.shape_vec();
  }
  return e;
}

Result<std::vector<float>> Pipeline::unet_output(const spec::GenerationSettings& s, const std::vector<float>& model_input,
                                                 float timestep) {
  HIPQ_RETURN_IF_ERROR(s.validate());
  Impl& im = *impl_;
  if (im.loaded_precision != s.precision) HIPQ_RETURN_IF_ERROR(im.load_models(s.precision));
  HIPQ_ASSIGN_OR_RETURN(Impl::TextConditioning text, im.encode_text(s, s.guidance > 1.0f));
  HIPQ_ASSIGN_OR_RETURN(UNetStep step, UNetStep::make(*im.backend, *im.unet, text.hidden.t,
                                                      im.family == "sdxl" ? &text.pooled.t : nullptr,
                                                      im.time_ids(s, text.batch), text.batch, s.height / 8,
                                                      s.width / 8, {timestep}));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor input,
                        DeviceTensor::from_host(*im.backend, model_input.data(),
                                                {static_cast<int64_t>(model_input.size())}, DType::kF32));
  HIPQ_ASSIGN_OR_RETURN(const kernels::Tensor* out, step.run(input.t, 0));
  return to_host_f32(*im.backend, *out);
}

Result<std::vector<float>> Pipeline::vae_decode(const std::vector<float>& z, int64_t latent_h, int64_t latent_w) {
  // The precision's decode (a low placement's job may have left it in bf16).
  Impl& im = *impl_;
  HIPQ_RETURN_IF_ERROR(im.use_vae_dtype(vae_dtype_for(im.family, im.shapes.vae, im.loaded_dtype)));
  return im.run_vae(z, latent_h, latent_w);
}

std::vector<int> Pipeline::token_ids(std::string_view text, int encoder) const {
  const Impl& im = *impl_;
  const bool pad_with_eos = encoder == 2 ? im.enc2.pad_with_eos : im.enc1.pad_with_eos;
  auto ids = im.token_ids(std::string(text), pad_with_eos);
  return ids.ok() ? std::vector<int>(ids->begin(), ids->end()) : std::vector<int>();
}

const std::string& Pipeline::model_spec() const { return impl_->components.spec; }
const std::string& Pipeline::weights_sha256() const { return impl_->components.weights_sha256; }
const std::string& Pipeline::family() const { return impl_->family; }
bool Pipeline::is_refiner() const { return impl_->refiner_model; }
const ModelShapes& Pipeline::model_shapes() const { return impl_->shapes; }
kernels::DType Pipeline::vae_precision() const { return impl_->vae->precision(); }
const std::vector<std::string>& Pipeline::warnings() const { return impl_->components.warnings; }
nlohmann::json Pipeline::scheduler_config() const { return impl_->scheduler_json; }
kernels::Backend& Pipeline::backend() const { return *impl_->backend; }
double Pipeline::load_ms() const { return impl_->load_ms; }

// ---- outputs -------------------------------------------------------------------

Status write_latent_file(const std::filesystem::path& path, const GenerationOutput& out,
                         const spec::GenerationSettings& settings, const OutputInfo& info) {
  std::map<std::string, std::string> meta;
  meta["format"] = "hipq-latent/1";
  meta["settings"] = settings.to_json().dump();
  meta["model"] = info.model_spec;
  meta["weights_sha256"] = info.weights_sha256;
  meta["scheduler_config"] = info.scheduler_config.is_null() ? "{}" : info.scheduler_config.dump();
  meta["backend"] = info.backend;
  meta["device"] = info.device_name;
  meta["hipq_version"] = build_info::kVersion;
  meta["build_sha"] = build_info::kGitSha;
  return write_safetensors(path, {{"latent", HostTensor::from_f32(out.latent, out.latent_shape)}}, meta);
}

nlohmann::json timings_json(const GenerationOutput& out, const spec::GenerationSettings& settings, const OutputInfo& info) {
  auto list = [](const std::vector<PhaseTiming>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& p : v) a.push_back({{"phase", p.phase}, {"host_ms", p.host_ms}, {"gpu_ms", p.gpu_ms}});
    return a;
  };
  nlohmann::json j;
  j["phases"] = list(out.phases);
  j["steps"] = list(out.steps);
  if (out.step_models.size() == out.steps.size())
    for (size_t i = 0; i < out.steps.size() && !out.step_models.empty(); ++i) j["steps"][i]["model"] = out.step_models[i];
  if (!out.model_phases.empty()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& m : out.model_phases)
      a.push_back({{"phase", m.timing.phase}, {"model", m.model}, {"host_ms", m.timing.host_ms}, {"gpu_ms", m.timing.gpu_ms}});
    j["model_phases"] = a;
  }
  if (out.refiner) {
    const RefinerSplit& r = *out.refiner;
    j["refiner"] = {{"model", r.model_spec},
                    {"weights_sha256", r.weights_sha256},
                    {"switch_at", std::stod(spec::format_guidance(r.switch_at))},
                    {"base_cutoff", r.base_cutoff},
                    {"refiner_cutoff", r.refiner_cutoff},
                    {"base_steps", r.base_steps},
                    {"refiner_steps", r.refiner_steps},
                    {"refiner_start", r.refiner_start}};
  }
  j["peak_memory_bytes"] = out.peak_memory_bytes;
  if (out.decode_fallback)
    j["decode_fallback"] = {{"vae_tile", out.decode_fallback->vae_tile}, {"reason", out.decode_fallback->reason}};
  nlohmann::json phase_peaks = nlohmann::json::object();
  for (const PhasePeak& p : out.phase_peaks) phase_peaks[p.phase] = p.bytes;
  j["phase_peak_bytes"] = std::move(phase_peaks);
  j["warm"] = out.warm;
  j["denoise"] = {{"unet_batch", out.unet_batch},
                  {"model_calls", out.model_calls},
                  {"batch_jobs", out.batch_jobs},
                  {"guidance", out.unet_batch == out.batch_jobs ? "off" : "classifier-free"}};
  j["memory_plan"] = {{"placement", std::string(placement_name(out.memory_plan.placement))},
                      {"jobs", out.memory_plan.jobs},
                      {"vae_tile", out.memory_plan.vae_tile},
                      {"vae_dtype", std::string(kernels::dtype_name(out.memory_plan.vae_dtype))},
                      {"peak_bytes", out.memory_plan.peak()},
                      {"weights_bytes", out.memory_plan.weights()},
                      {"text_encode_bytes", out.memory_plan.text_encode},
                      {"image_encode_bytes", out.memory_plan.image_encode},
                      {"denoise_bytes", out.memory_plan.denoise},
                      {"decode_bytes", out.memory_plan.decode},
                      {"lora_base_bits_bytes", out.memory_plan.lora_base_bits},
                      {"usable_bytes", out.memory_plan.usable},
                      {"runtime_bytes", out.memory_plan.runtime}};
  j["settings"] = settings.to_json();
  j["model"] = info.model_spec;
  j["weights_sha256"] = info.weights_sha256;
  j["backend"] = info.backend;
  j["device"] = info.device_name;
  j["hipq_version"] = build_info::kVersion;
  j["build_sha"] = build_info::kGitSha;
  return j;
}

}  // namespace hipq::engine
