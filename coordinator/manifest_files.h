// Manifest files: the checks a manifest's LoRA files and init images get when
// the manifest is checked (`hipq check`) or submitted, and their content
// sha256, which pins them (spec/input_digests.h): a job runs on the bytes that
// were checked, or fails naming the file.
//
// The coordinator links no engine, so the LoRA check is the cheap part of
// engine/lora/lora_file.h: a regular, readable file whose safetensors header
// parses (8-byte length, a JSON object of tensors with dtype, shape and
// data_offsets inside the file) and names LoRA pairs (.lora_down/.lora_up,
// .lora_A/.lora_B, .lora.down/.lora.up); the LyCORIS kinds hipq does not
// apply are refused by name. Matching the pairs to a model's layers happens
// on the worker, before any device work. Init images are decoded with
// spec/init_image.h at the job's size (the size rule of docs/pipeline.md).
//
// Errors: InvalidArgument (not a LoRA file, an unsupported kind, a wrong
// size), Unimplemented for a LyCORIS kind, NotFound / PermissionDenied /
// IOError from reading; each message names the file.
// Thread safety: pure functions (they read files).
#pragma once

#include <filesystem>
#include <string>

#include "base/result.h"

namespace hipq::coordinator {

// Largest safetensors header a LoRA file may have (the engine's bound).
inline constexpr uint64_t kMaxLoraHeaderBytes = 100ull * 1024 * 1024;

// Checks `path` as a LoRA file (above); its sha256 when it passes.
Result<std::string> check_lora_file(const std::filesystem::path& path);
// Decodes `path` as an init image of exactly width x height; its sha256.
Result<std::string> check_init_image_file(const std::filesystem::path& path, int width, int height);

}  // namespace hipq::coordinator
