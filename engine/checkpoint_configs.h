// Checkpoint configs: the settings a diffusers folder's config files carry,
// made for a single-file checkpoint, which has no config files.
//
// A folder says in unet/config.json, vae/config.json, text_encoder*/config.json
// and scheduler/scheduler_config.json what the weights alone do not: the VAE
// scaling factor (SD 1.x/2.x 0.18215, SDXL 0.13025; none of these families has
// a shift factor), force_upcast, sample sizes, attention heads, the text
// encoders' activation and depth, and the scheduler's prediction type. For a
// checkpoint they are taken, in this order (later wins):
//   1. the weights' shapes (UNetConfig / VaeConfig / ClipTextConfig::from_weights);
//   2. the detected family, as diffusers' own single-file loading does:
//      - sd1:  UNet 8 heads per block; CLIP-L quick_gelu; VAE 0.18215, 512 px;
//              epsilon;
//      - sd2:  UNet 64-wide heads, linear projections, upcast attention;
//              OpenCLIP-H gelu with its last layer dropped (SD 2.x conditions on
//              the penultimate layer: diffusers' text_encoder has
//              resblocks - 1 layers); VAE 0.18215; 768 px v_prediction unless
//              the metadata says 512 px or epsilon;
//      - sdxl: UNet 64-wide heads, addition_time_embed_dim from the
//              add_embedding width; CLIP-L quick_gelu + OpenCLIP-bigG gelu with
//              projection; VAE 0.13025, 1024 px; epsilon;
//   3. the file's metadata, when present: Stability's ModelSpec keys
//      "modelspec.prediction_type" ("epsilon" | "v" | "v_prediction"),
//      "modelspec.resolution" ("768x768") and "modelspec.architecture"
//      (e.g. "stable-diffusion-v2-768-v"); then hipq's "hipq.config.<name>"
//      keys (name: unet, vae, text_encoder, text_encoder_2, scheduler), each a
//      JSON object merged over the config key by key (RFC 7386 merge patch).
// A setting that decides the output and that neither the weights, the family
// nor the metadata pin down is assumed and named in `warnings` (today: an SD
// 2.x checkpoint's prediction type and resolution).
// Layout and precedence: docs/model-sources.md.
// Errors: InvalidArgument for an unknown family; Corruption for metadata that
// is not the JSON / value it must be (naming the file and the key); the
// from_weights errors otherwise.
// Thread safety: a pure function.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/checkpoint_keys.h"

namespace hipq::engine {

struct CheckpointConfigs {
  // unet, vae, text_encoder[, text_encoder_2], scheduler, model_index
  std::map<std::string, nlohmann::json> configs;
  std::vector<std::string> warnings;  // "prediction_type: ... assumed v_prediction ..."
};

// `where` names the file in messages; `metadata` is its safetensors __metadata__.
Result<CheckpointConfigs> checkpoint_configs(const MappedCheckpoint& checkpoint,
                                             const std::map<std::string, std::string>& metadata,
                                             const std::string& where);

}  // namespace hipq::engine
