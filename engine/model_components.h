// ModelComponents: one opened model — per-component weight sources with
// diffusers key names inside, their configs, the CLIP vocabulary and the
// identity of the weights. Made by open_model (model_files.h) and
// make_synthetic_model (synthetic.h), read by the pipeline and export.h.
// Thread safety: a value; the sources it holds are immutable and shareable.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/weight_source.h"

namespace hipq::engine {

struct ModelComponents {
  std::string spec;    // what the user passed: folder, file.safetensors, synthetic:NAME
  std::string family;  // "sdxl" | "sd1" | "sd2" ("" = derive from weights)
  // keys: unet, vae, text_encoder, text_encoder_2 (diffusers key names inside)
  std::map<std::string, std::shared_ptr<WeightSource>> weights;
  // same keys + "scheduler", "model_index" when present
  std::map<std::string, nlohmann::json> configs;
  std::filesystem::path vocab;   // CLIP BPE: vocab.json (+ merges) or bpe_simple_vocab_16e6.txt.gz
  std::filesystem::path merges;  // empty when vocab is the .txt.gz
  std::string weights_sha256;    // identifies the weights (synthetic: sha of name+seed+config)
  // Settings that had to be assumed (a single-file checkpoint's prediction
  // type, ...), one sentence each naming the setting; callers log them.
  std::vector<std::string> warnings;
};

}  // namespace hipq::engine
