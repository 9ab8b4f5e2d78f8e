// Test tooling: writes a diffusers-layout model (a folder opened with
// open_model) as one single-file checkpoint in the original Stability key
// layout, the way diffusers' scripts/convert_diffusers_to_original_*.py do:
//
//   unet            -> model.diffusion_model.{input_blocks, middle_block, output_blocks, time_embed, label_emb, out}
//   vae             -> first_stage_model.{encoder, decoder}.{down, mid, up}..., 1x1-conv attention
//   text_encoder    -> sd1: cond_stage_model.transformer.text_model.*
//                      sdxl: conditioner.embedders.0.transformer.text_model.*
//                      sd2: cond_stage_model.model.* (OpenCLIP, fused in_proj)
//   text_encoder_2  -> conditioner.embedders.1.model.* (OpenCLIP, fused in_proj);
//                      the SDXL refiner (no text_encoder): conditioner.embedders.0.model.*
//
// The mapping is written here from the conversion scripts' tables, not by
// inverting engine/checkpoint_keys.cpp, so a mistake on either side shows.
// SD 2.x checkpoints carry OpenCLIP-H's whole tower: one more resblock than
// diffusers' text encoder (which stops at the penultimate layer); the extra
// layer is written with values of its own, as a real checkpoint has them.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "base/status.h"
#include "engine/model_files.h"

namespace hipq::engine::testing {

// `metadata` goes into __metadata__ as given (e.g. "hipq.config.unet",
// "modelspec.prediction_type").
Status write_original_checkpoint(const ModelComponents& model, const std::filesystem::path& out,
                                 const std::map<std::string, std::string>& metadata = {});

}  // namespace hipq::engine::testing
