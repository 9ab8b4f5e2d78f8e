// Golden files: a reference output (final latent, optionally the decoded image)
// with the provenance that says who made it, how, and from what.
//
// A golden is a safetensors file (docs/golden-format.md):
//   tensors  "latent" f32 [1, 4, H/8, W/8]; optional "image" u8 [H, W, 3]
//   metadata "format" = "hipq-golden/1", "key", "provenance" (JSON),
//            "settings" (GenerationSettings JSON), "model", "weights_sha256",
//            "scheduler_config" (JSON), "content_sha256", "created_at".
// The key (golden_key) is sha256 of a canonical JSON of everything that
// determines the output: the weights' sha256 and the settings, the precision
// only when it is not fp32 (the reference draws fp16/bf16 noise from the same
// seed, another image; fp32 keys have no precision member). The device a golden
// was computed on is provenance. tools/golden/ computes the
// same key in Python; the canonical form is fixed in docs/golden-format.md.
//
// Validation on read: the header must parse (Corruption otherwise, incl.
// truncated data), "latent" must be f32 with 4 dims, content_sha256 must equal
// sha256 of the tensor bytes (Corruption "content hash mismatch"), the key in
// the file must equal golden_key(weights_sha256, settings) (Corruption), and
// provenance must name the reference, its version, torch version (for
// diffusers goldens), device and precision and the weights sha256 — missing
// provenance is FailedPrecondition unless allow_unpinned, in which case the
// golden is returned with pinned = false. Every message names the file.
// Thread safety: pure functions over values and files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"
#include "engine/generation_settings.h"

namespace hipq::engine {

inline constexpr std::string_view kGoldenFormat = "hipq-golden/1";
inline constexpr int kGoldenKeyVersion = 1;

struct GoldenProvenance {
  std::string reference;          // "diffusers" | "hipq"
  std::string reference_version;  // diffusers version, or hipq version
  std::string reference_commit;   // git commit when known ("" otherwise)
  std::string torch_version;      // diffusers goldens only
  std::string device;             // "cpu", "NVIDIA H200", ...
  std::string precision;          // the precision the reference computed in
  std::string pipeline_class;     // "StableDiffusionXLPipeline", "hipq::engine::Pipeline"
  std::string scheduler_class;    // "EulerDiscreteScheduler", ...
  std::string created_at;         // ISO 8601 UTC
  std::string source;             // free text: run/batch promoted, tool command line
  nlohmann::json extra = nlohmann::json::object();

  nlohmann::json to_json() const;
  static Result<GoldenProvenance> from_json(const nlohmann::json& j);
  // Names of required fields that are empty ("reference_version", ...).
  std::vector<std::string> missing_fields() const;
};

struct Golden {
  std::string key;
  std::string model;              // model spec as given to the reference tool
  std::string weights_sha256;
  GenerationSettings settings;
  nlohmann::json scheduler_config = nlohmann::json::object();
  GoldenProvenance provenance;
  bool pinned = true;             // false: provenance incomplete, imported with --allow-unpinned

  std::vector<float> latent;
  std::vector<int64_t> latent_shape;
  std::vector<uint8_t> image;     // optional: height * width * 3
  int image_width = 0;
  int image_height = 0;
  std::string content_sha256;     // filled by write_golden / read_golden

  bool has_image() const { return !image.empty(); }
};

// The canonical JSON the key hashes (sorted keys, no spaces, UTF-8 unescaped,
// guidance as format_guidance): {"guidance":"5","height":..,"key_version":1,
// "negative_prompt":..,"prompt":..,"rng":..,"sampler":..,"seed":..,"steps":..,
// "weights_sha256":..,"width":..}.
std::string golden_key_material(std::string_view weights_sha256, const GenerationSettings& settings);
std::string golden_key(std::string_view weights_sha256, const GenerationSettings& settings);
// "<key>.safetensors": the file name goldens are stored under in a directory.
std::string golden_file_name(std::string_view key);
// <dir>/<key>.safetensors when it exists, else NotFound.
Result<std::filesystem::path> find_golden_file(const std::filesystem::path& dir, std::string_view key);

// sha256 over the latent's bytes then the image's bytes (when present).
std::string golden_content_sha256(const Golden& g);

// Fills key and content_sha256 from the contents, then writes atomically.
// InvalidArgument when the latent's size disagrees with its shape or the
// image's with its width/height.
Status write_golden(const std::filesystem::path& path, Golden golden);

struct GoldenReadOptions {
  bool allow_unpinned = false;   // accept incomplete provenance (pinned = false)
  bool load_tensors = true;      // false: metadata only (still checks the hash)
};
Result<Golden> read_golden(const std::filesystem::path& path, const GoldenReadOptions& options = {});

}  // namespace hipq::engine
