// Single-file checkpoints (the original Stability key naming used by most UIs)
// seen as diffusers-named components.
//
// map_checkpoint() reads only the safetensors header, detects the family from
// key names and shapes, and returns one WeightSource per component that
// renames lazily: get("down_blocks.0.resnets.0.conv1.weight") reads
// "model.diffusion_model.input_blocks.1.0.in_layers.2.weight" from the file.
// OpenCLIP's fused attention "in_proj_weight"/"in_proj_bias" are sliced into
// q_proj/k_proj/v_proj (zero-copy views); text_projection is transposed
// (a copy, done on get()). Prefixes handled:
//   model.diffusion_model.*                       -> unet
//   first_stage_model.*                           -> vae
//   conditioner.embedders.0.transformer.*         -> text_encoder   (sdxl, CLIP-L)
//   conditioner.embedders.1.model.*               -> text_encoder_2 (sdxl, OpenCLIP bigG)
//   conditioner.embedders.0.model.*               -> text_encoder_2 (sdxl refiner: OpenCLIP bigG
//                                                    alone; no text_encoder)
//   cond_stage_model.transformer.*                -> text_encoder   (sd1, CLIP-L)
//   cond_stage_model.model.*                      -> text_encoder   (sd2, OpenCLIP H)
// Errors: InvalidArgument when no known family matches (naming the file and the
// keys looked for); NotFound from get() for a name the mapping does not produce.
// Thread safety: the returned sources are immutable.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "base/result.h"
#include "engine/safetensors.h"
#include "engine/weight_source.h"

namespace hipq::engine {

struct MappedCheckpoint {
  std::string family;  // "sdxl" | "sd1" | "sd2"
  std::map<std::string, std::shared_ptr<WeightSource>> components;  // unet, vae, text_encoder[, text_encoder_2]
};

// One UNet name of the original (SGM/LDM) layout without its
// "model.diffusion_model." prefix -> the diffusers name ("" = not mapped).
// Indices in block positions must be decimal digits (std::stoi reads them).
// The LoRA reader (engine/lora/) maps kohya's SGM-style names through it.
std::string sgm_unet_name(const std::string& rest);

Result<MappedCheckpoint> map_checkpoint(std::shared_ptr<const SafetensorsFile> file);

}  // namespace hipq::engine
