#include "engine/checkpoint_configs.h"

#include <algorithm>

#include "engine/export.h"
#include "engine/models/clip_text.h"
#include "engine/models/unet.h"
#include "engine/models/vae.h"

namespace hipq::engine {
namespace {

// What a family's diffusers folders say and the weights cannot.
struct SdVariant {
  int resolution = 512;                     // px: UNet sample_size * 8, VAE sample_size
  std::string prediction_type = "epsilon";
  bool resolution_known = true;             // from the family alone or the metadata
  bool prediction_known = true;
};

std::string meta_value(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

Result<SdVariant> variant_of(const std::string& family, const std::map<std::string, std::string>& meta,
                             const std::string& where, std::vector<std::string>* warnings) {
  SdVariant v;
  if (family == "sdxl") {
    v.resolution = 1024;
  } else if (family == "sd2") {
    // diffusers' single-file loader maps an SD 2.x checkpoint onto
    // stabilityai/stable-diffusion-2-1 (768 px, v_prediction) unless told.
    v.resolution = 768;
    v.prediction_type = "v_prediction";
    v.resolution_known = v.prediction_known = false;
  } else if (family != "sd1") {
    return Status::InvalidArgument(where + ": unknown model family '" + family + "'");
  }
  // ModelSpec's architecture names the SD 2.x variant: "stable-diffusion-v2-512",
  // "stable-diffusion-v2-768-v".
  const std::string arch = meta_value(meta, "modelspec.architecture");
  if (family == "sd2" && arch.starts_with("stable-diffusion-v2")) {
    const bool is_v = arch.ends_with("-v");
    v.prediction_type = is_v ? "v_prediction" : "epsilon";
    v.prediction_known = true;
    if (arch.find("768") != std::string::npos || arch.find("512") != std::string::npos) {
      v.resolution = arch.find("768") != std::string::npos ? 768 : 512;
      v.resolution_known = true;
    }
  }
  if (const std::string p = meta_value(meta, "modelspec.prediction_type"); !p.empty()) {
    if (p == "epsilon") {
      v.prediction_type = "epsilon";
    } else if (p == "v" || p == "v_prediction") {
      v.prediction_type = "v_prediction";
    } else {
      return Status::Corruption(where + ": metadata modelspec.prediction_type \"" + p +
                                "\" is none of epsilon, v, v_prediction");
    }
    v.prediction_known = true;
  }
  if (const std::string r = meta_value(meta, "modelspec.resolution"); !r.empty()) {
    const size_t x = r.find('x');
    int w = 0, h = 0;
    try {
      if (x == std::string::npos) throw std::invalid_argument("no x");
      size_t used = 0;
      w = std::stoi(r.substr(0, x), &used);
      if (used != x) throw std::invalid_argument("width");
      h = std::stoi(r.substr(x + 1), &used);
      if (used != r.size() - x - 1) throw std::invalid_argument("height");
    } catch (const std::exception&) {
      return Status::Corruption(where + ": metadata modelspec.resolution \"" + r + "\" is not WIDTHxHEIGHT");
    }
    if (w <= 0 || h <= 0 || w % 8 != 0 || h % 8 != 0 || w > 16384 || h > 16384)
      return Status::Corruption(where + ": metadata modelspec.resolution \"" + r +
                                "\" is not a size in multiples of 8 px up to 16384");
    if (w == h) {
      v.resolution = w;
      v.resolution_known = true;
    } else {
      warnings->push_back(where + ": metadata modelspec.resolution \"" + r +
                          "\" is not square; sample_size stays " + std::to_string(v.resolution) + " px");
    }
  }
  if (family == "sd2" && v.resolution_known && !v.prediction_known && v.resolution == 512) {
    // SD 2.x 512 px checkpoints (2.0-base, 2.1-base) are the epsilon ones.
    v.prediction_type = "epsilon";
  }
  return v;
}

// Heads of 64 channels (SD 2.x, SDXL); SD 1.x has 8 per block whatever the width.
std::vector<int64_t> heads_for(const std::string& family, const std::vector<int64_t>& channels) {
  std::vector<int64_t> heads;
  for (int64_t c : channels) heads.push_back(family == "sd1" ? 8 : std::max<int64_t>(1, c / 64));
  return heads;
}

Result<ClipTextConfig> text_config(const WeightSource& w, const std::string& act, bool projection) {
  HIPQ_ASSIGN_OR_RETURN(ClipTextConfig c, ClipTextConfig::from_weights(w));
  c.hidden_act = act;
  c.num_attention_heads = static_cast<int>(std::max<int64_t>(1, c.hidden_size / 64));
  c.with_projection = projection;
  if (!projection) c.projection_dim = c.hidden_size;
  return c;
}

// Merges metadata "hipq.config.<name>" over `config`; returns the patch ({} when none).
Result<nlohmann::json> apply_metadata_config(const std::map<std::string, std::string>& meta, const std::string& name,
                                             const std::string& where, nlohmann::json& config) {
  const std::string key = "hipq.config." + name;
  auto it = meta.find(key);
  if (it == meta.end()) return nlohmann::json::object();
  nlohmann::json patch;
  try {
    patch = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(where + ": metadata " + key + " is not JSON: " + e.what());
  }
  if (!patch.is_object()) return Status::Corruption(where + ": metadata " + key + " must be a JSON object");
  config.merge_patch(patch);
  return patch;
}

}  // namespace

Result<CheckpointConfigs> checkpoint_configs(const MappedCheckpoint& ckpt,
                                             const std::map<std::string, std::string>& meta,
                                             const std::string& where) {
  const std::string& family = ckpt.family;
  CheckpointConfigs out;
  HIPQ_ASSIGN_OR_RETURN(SdVariant variant, variant_of(family, meta, where, &out.warnings));
  auto weights = [&](const std::string& key) -> Result<const WeightSource*> {
    auto it = ckpt.components.find(key);
    if (it == ckpt.components.end() || !it->second)
      return Status::NotFound(where + ": no " + key + " weights in the checkpoint");
    return it->second.get();
  };

  HIPQ_ASSIGN_OR_RETURN(const WeightSource* unet_w, weights("unet"));
  HIPQ_ASSIGN_OR_RETURN(UNetConfig unet, UNetConfig::from_weights(*unet_w));
  unet.num_attention_heads = heads_for(family, unet.block_out_channels);
  unet.upcast_attention = family == "sd2";  // stable-diffusion-2-1's unet/config.json
  unet.sample_size = variant.resolution / 8;

  // The SDXL refiner's conditioner holds OpenCLIP bigG alone (no text_encoder).
  const bool refiner = family == "sdxl" && !ckpt.components.count("text_encoder") &&
                       ckpt.components.count("text_encoder_2");
  const char* te_act = family == "sd2" ? "gelu" : "quick_gelu";
  ClipTextConfig te;
  if (!refiner) {
    HIPQ_ASSIGN_OR_RETURN(const WeightSource* te_w, weights("text_encoder"));
    HIPQ_ASSIGN_OR_RETURN(te, text_config(*te_w, te_act, /*projection=*/false));
  }
  if (family == "sd2") {
    // SD 2.x conditions on OpenCLIP-H's penultimate layer; diffusers' text
    // encoder is the tower without its last layer (final_layer_norm kept).
    if (te.num_hidden_layers < 2)
      return Status::Corruption(where + ": an SD 2.x text encoder needs at least 2 layers, found " +
                                std::to_string(te.num_hidden_layers));
    te.num_hidden_layers -= 1;
  }
  if (!refiner) out.configs["text_encoder"] = te.to_json();
  if (family == "sdxl") {
    HIPQ_ASSIGN_OR_RETURN(const WeightSource* te2_w, weights("text_encoder_2"));
    HIPQ_ASSIGN_OR_RETURN(ClipTextConfig te2, text_config(*te2_w, "gelu", /*projection=*/true));
    out.configs["text_encoder_2"] = te2.to_json();
    // add_embedding input = pooled text (projection_dim) + 6 time ids (the
    // refiner: 5, the last its aesthetic score) of addition_time_embed_dim each.
    const int64_t ids = refiner ? 5 : 6;
    const int64_t time_width = unet.projection_class_embeddings_input_dim - te2.projection_dim;
    if (time_width <= 0 || time_width % ids != 0)
      return Status::Corruption(where + ": add_embedding input width " +
                                std::to_string(unet.projection_class_embeddings_input_dim) +
                                " is not the pooled width " + std::to_string(te2.projection_dim) + " plus " +
                                std::to_string(ids) + " time embeddings");
    unet.addition_time_embed_dim = time_width / ids;
  }
  out.configs["unet"] = unet.to_json();

  HIPQ_ASSIGN_OR_RETURN(const WeightSource* vae_w, weights("vae"));
  HIPQ_ASSIGN_OR_RETURN(VaeConfig vae, VaeConfig::from_weights(*vae_w, family));
  vae.force_upcast = true;  // every family's vae/config.json (SD 1.x/2.x by diffusers' default)
  vae.sample_size = variant.resolution;
  out.configs["vae"] = vae.to_json();

  nlohmann::json scheduler = default_scheduler_config(family);
  scheduler["prediction_type"] = variant.prediction_type;
  out.configs["scheduler"] = scheduler;
  out.configs["model_index"] = diffusers_model_index(family, refiner);

  std::map<std::string, nlohmann::json> patches;
  for (const char* name : {"unet", "vae", "text_encoder", "text_encoder_2", "scheduler"}) {
    auto it = out.configs.find(name);
    if (it == out.configs.end()) continue;
    HIPQ_ASSIGN_OR_RETURN(patches[name], apply_metadata_config(meta, name, where, it->second));
  }

  const auto& s = out.configs["scheduler"];
  const bool prediction_pinned = variant.prediction_known || patches["scheduler"].contains("prediction_type");
  const bool resolution_pinned = variant.resolution_known || patches["unet"].contains("sample_size");
  if (!prediction_pinned)
    out.warnings.push_back(where + ": prediction_type cannot be known from an SD 2.x checkpoint without metadata; "
                           "assumed " + s.value("prediction_type", std::string()) +
                           " (SD 2.x 768-v). A 512 px base checkpoint is epsilon: say so with metadata "
                           "modelspec.prediction_type, or export it (hipq weights export) and edit "
                           "scheduler/scheduler_config.json");
  if (!resolution_pinned)
    out.warnings.push_back(where + ": sample_size (native resolution) cannot be known from an SD 2.x checkpoint "
                           "without metadata; assumed " + std::to_string(variant.resolution) +
                           " px (metadata modelspec.resolution pins it)");
  return out;
}

}  // namespace hipq::engine
