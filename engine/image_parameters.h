// The text chunks hipq writes into every PNG: the generation settings in the
// "parameters" convention of AUTOMATIC1111's web UI (also written by
// stable-diffusion.cpp and read by ComfyUI, Civitai, sd-parsers, exiftool),
// followed by hipq's own fields, and the same facts as JSON under "hipq".
//
//   a watercolor lighthouse at dawn
//   Negative prompt: blurry
//   Steps: 30, Sampler: Euler, CFG scale: 5, Seed: 1, Size: 1024x1024,
//   Model hash: 3f1c0b9a2d, Model: sdxl-base, RNG: CPU, Batch: parti (4),
//   Job: 17, Precision: fp16, Build: hipq 0.1.0 (1a2b3c4), Version: hipq
//
// (one line after the negative prompt; wrapped here). The format is in
// docs/pipeline.md, "PNG metadata". Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spec/generation_settings.h"
#include "spec/png.h"

namespace hipq::engine {

// One LoRA applied to the weights (engine/lora/lora_set.h AppliedLora).
struct LoraProvenance {
  std::string name;        // file stem: <lora:NAME:SCALE>
  std::string a1111_hash;  // "Lora hashes" value: 12 hex digits (the web UI's addnet hash)
  std::string sha256;      // of the whole file
  float scale = 1.0f;
};

// What an image records beside its settings.
struct ImageProvenance {
  std::string model_spec;      // folder, file or synthetic:NAME; written as its base name
  std::string weights_sha256;  // hex; "Model hash" is its first 10 digits
  std::string batch_name;      // "" when not part of a batch (hipq generate)
  int64_t batch_id = 0;        // 0 = none
  int64_t job_id = 0;          // 0 = none
  int attempt = 0;             // 0 = none
  // LoRAs folded into the weights: " <lora:NAME:SCALE>" each after the prompt
  // line (as the web UI's prompt carries them) and "Lora hashes:
  // "NAME: HASH, ..."" among the fields; "loras" in the hipq JSON.
  std::vector<LoraProvenance> loras;
};

// "Euler", "DPM++ 2M", ... as the web UI names the sampler; "" for an unknown one.
std::string a1111_sampler_name(const std::string& sampler);
// The "parameters" text shown above.
std::string a1111_parameters(const spec::GenerationSettings& settings, const ImageProvenance& provenance);
// "parameters", "hipq" (settings, model, weights_sha256, batch, job, build as
// JSON) and "Software" chunks, in that order.
std::vector<spec::PngText> png_metadata(const spec::GenerationSettings& settings, const ImageProvenance& provenance);

}  // namespace hipq::engine
