// Model sources: what a user names as a model, opened into per-component
// weight sources and configs with diffusers key names inside.
//
//  - a diffusers folder (model_index.json, unet/ vae/ text_encoder/
//    text_encoder_2/ tokenizer/ tokenizer_2/ scheduler/, each with config.json;
//    weights diffusion_pytorch_model[.fp16].safetensors or
//    model[.fp16].safetensors, or a sharded *.safetensors.index.json);
//  - a single-file checkpoint (*.safetensors) in the original SDXL / SD 1.x /
//    SD 2.x key naming, mapped lazily onto diffusers names (checkpoint_keys.h),
//    with the configs a folder would carry made from the family and the file's
//    metadata (checkpoint_configs.h), so a checkpoint and its diffusers folder
//    give the same outputs;
//  - "synthetic:NAME[@SEED]", delegated to make_synthetic_model (synthetic.h).
// Layout and search order: docs/model-sources.md.
//
// Errors: NotFound (no such path, no weights for a required component),
// Corruption (bad config.json / safetensors, naming the file), InvalidArgument
// (a spec that is none of the above, a checkpoint whose family is unknown).
// Thread safety: open_model is reentrant; ModelComponents (model_components.h)
// is a value whose sources are immutable and shareable.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/model_components.h"
#include "engine/weight_source.h"

namespace hipq::engine {

Result<ModelComponents> open_model(std::string_view spec);

// "sdxl" | "sd1" | "sd2" from a diffusers UNet's tensor names/shapes
// (cross-attention width 2048 + add_embedding -> sdxl, 1024 -> sd2, 768 -> sd1).
Result<std::string> detect_family(const WeightSource& unet);

// An SDXL refiner (stabilityai/stable-diffusion-xl-refiner-1.0's layout):
// SDXL (or a family still to be derived) with text encoder 2 and no text
// encoder 1 (its model_index.json lists text_encoder null; its checkpoint's
// conditioner holds OpenCLIP bigG alone).
bool is_sdxl_refiner(const ModelComponents& model);

// sha256 over the hex sha256 of each file, in the given order ("path\n" is not
// included, so a moved folder keeps its identity). Per-file hashes are cached
// in-process by (path, size, mtime) and across processes by WeightsHashCache
// (default_weights_hash_cache()).
Result<std::string> weights_sha256(const std::vector<std::filesystem::path>& files);

}  // namespace hipq::engine
