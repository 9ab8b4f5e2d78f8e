// Export: any model source (diffusers folder, single-file checkpoint,
// synthetic weights) written as a complete diffusers folder that diffusers'
// `from_pretrained` loads unchanged — how reference outputs are produced for
// exactly hipq's weights.
//
// Layout written (docs/models.md):
//   model_index.json                 StableDiffusionXLPipeline | StableDiffusionPipeline
//   unet/config.json + diffusion_pytorch_model.safetensors
//   vae/config.json  + diffusion_pytorch_model.safetensors
//   text_encoder/config.json + model.safetensors       (text_encoder_2/ for SDXL)
//   tokenizer/  vocab.json merges.txt tokenizer_config.json special_tokens_map.json
//   tokenizer_2/ (SDXL: same vocabulary, pads with "!")
//   (the SDXL refiner: text_encoder_2/ and tokenizer_2/ alone, model_index
//   StableDiffusionXLImg2ImgPipeline)
//   scheduler/scheduler_config.json
// Configs come from the source (ModelComponents::configs) or are derived from
// the weights' shapes; the CLIP vocabulary is copied, or converted from
// bpe_simple_vocab_16e6.txt.gz the way transformers' CLIPTokenizer does.
// Each file is written atomically; an existing folder is updated in place.
// Errors: IOError naming the path; NotFound for a component or vocabulary the
// source lacks; InvalidArgument for an unknown family or dtype.
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/model_components.h"
#include "kernels/dtype.h"

namespace hipq::engine {

struct ExportOptions {
  kernels::DType dtype = kernels::DType::kF32;  // tensors are cast to this (f32 | f16 | bf16)
  // Components to write (empty: all the source has); tokenizers, scheduler and
  // model_index are always written.
  std::vector<std::string> components;
};

Status export_diffusers_folder(const ModelComponents& model, const std::filesystem::path& out,
                               const ExportOptions& options = {});

// diffusers' model_index.json for a family ("sdxl" | "sd1" | "sd2"); with
// `refiner` (SDXL), the refiner's: StableDiffusionXLImg2ImgPipeline,
// text_encoder / tokenizer null, requires_aesthetics_score true,
// force_zeros_for_empty_prompt false (stable-diffusion-xl-refiner-1.0's).
nlohmann::json diffusers_model_index(std::string_view family, bool refiner = false);
// The scheduler config hipq assumes for a family when a source has none:
// EulerDiscreteScheduler with the SD/SDXL training betas.
nlohmann::json default_scheduler_config(std::string_view family);

// vocab.json (token -> id) and merges.txt contents from CLIP's
// bpe_simple_vocab_16e6.txt.gz, as transformers builds them. Corruption for a
// file that is not that vocabulary.
struct ClipVocabFiles {
  std::string vocab_json;
  std::string merges_txt;
};
Result<ClipVocabFiles> clip_vocab_files_from_bpe(const std::filesystem::path& bpe_gz);

}  // namespace hipq::engine
