// The golden key and the golden file's metadata: what both the engine (which
// reads and writes golden files) and the database / CLI (which store and list
// them) must spell the same. docs/golden-format.md is the format's reference.
//
// A golden is a safetensors file:
//   tensors  "latent" f32 [1, 4, H/8, W/8]; optional "image" u8 [H, W, 3]
//   metadata "format" = "hipq-golden/1", "key", "provenance" (JSON),
//            "settings" (GenerationSettings JSON), "model", "weights_sha256",
//            "scheduler_config" (JSON), "content_sha256", "created_at",
//            "key_material"; "inputs" (InputDigests JSON) when the job names
//            LoRA, init image or refiner files.
// The key (golden_key) is sha256 of a canonical JSON of everything that
// determines the output: the weights' sha256 and the settings, the precision
// only when it is not fp32 (the reference draws fp16/bf16 noise from the same
// seed, another image; fp32 keys have no precision member). The device a
// golden was computed on is provenance. tools/golden/ computes the same key in
// Python; the canonical form is fixed in docs/golden-format.md.
//
// GoldenHeader is the metadata without the tensors (engine/golden.h adds
// them). read_golden_metadata refuses a file that is not a golden, settings or
// provenance that do not parse (Corruption); check_golden_header refuses a key
// that disagrees with settings and weights (Corruption), no weights_sha256
// (FailedPrecondition), and incomplete provenance (FailedPrecondition unless
// allow_unpinned). Every message names the file.
// Thread safety: pure functions over values (find_golden_file reads the disk).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"
#include "spec/generation_settings.h"
#include "spec/input_digests.h"

namespace hipq::spec {

inline constexpr std::string_view kGoldenFormat = "hipq-golden/1";
inline constexpr int kGoldenKeyVersion = 1;
inline constexpr std::string_view kGoldenLatentTensor = "latent";
inline constexpr std::string_view kGoldenImageTensor = "image";

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

// A golden's metadata (everything but the tensors).
struct GoldenHeader {
  std::string key;
  std::string model;              // model spec as given to the reference tool
  std::string weights_sha256;
  GenerationSettings settings;
  InputDigests inputs;            // LoRA / init image / refiner digests (empty for a plain job)
  nlohmann::json scheduler_config = nlohmann::json::object();
  GoldenProvenance provenance;
  std::string content_sha256;     // sha256 over the latent's bytes then the image's
};

// The canonical JSON the key hashes (sorted keys, no spaces, UTF-8 unescaped,
// guidance as format_guidance): {"guidance":"5","height":..,"key_version":1,
// "negative_prompt":..,"prompt":..,"rng":..,"sampler":..,"seed":..,"steps":..,
// "weights_sha256":..,"width":..}. The files a job names besides the model
// enter by content (`inputs`), only when set, so keys of plain jobs stay as
// they were: "loras": [{"scale":"0.8","sha256":..}] in order,
// "init_image_sha256" and "strength", "refiner": {"aesthetic_score":..,
// "negative_aesthetic_score":..,"switch_at":..,"weights_sha256":..}.
std::string golden_key_material(std::string_view weights_sha256, const GenerationSettings& settings,
                                const InputDigests& inputs = {});
std::string golden_key(std::string_view weights_sha256, const GenerationSettings& settings,
                       const InputDigests& inputs = {});
// "<key>.safetensors": the file name goldens are stored under in a directory.
std::string golden_file_name(std::string_view key);
// <dir>/<key>.safetensors when it exists, else NotFound.
Result<std::filesystem::path> find_golden_file(const std::filesystem::path& dir, std::string_view key);

// The "__metadata__" of a golden file; key is written as given (callers set it
// from golden_key).
std::map<std::string, std::string> golden_metadata(const GoldenHeader& header);
// Parses the metadata of `file` (named in messages) back.
Result<GoldenHeader> read_golden_metadata(const std::map<std::string, std::string>& metadata,
                                          const std::string& file);
// The checks on read after the content hash: weights named, key matching,
// provenance complete. Returns whether the golden is pinned (false only with
// allow_unpinned and incomplete provenance).
Result<bool> check_golden_header(const GoldenHeader& header, const std::string& file, bool allow_unpinned);

}  // namespace hipq::spec
