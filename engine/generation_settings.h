// GenerationSettings: everything a user chooses for one image (prompt, seed,
// size, steps, guidance, sampler, precision, RNG kind), as one value that
// travels from manifest to worker to golden file.
//
// The model is not part of it (a Pipeline is loaded for one model). JSON form
// (to_json/from_json) is the one stored in jobs.settings, latent metadata and
// golden metadata; field names are those of this struct. from_json fills
// absent fields with the defaults below and rejects unknown types/values with
// InvalidArgument naming the field. validate() checks the combination before
// any work (size a multiple of 8, steps >= 1, known sampler / precision / rng).
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"

namespace hipq::engine {

struct GenerationSettings {
  std::string prompt;
  std::string negative_prompt;
  uint64_t seed = 0;
  int width = 1024;
  int height = 1024;
  int steps = 30;
  float guidance = 5.0f;
  std::string sampler = "euler";     // euler | euler_karras | ddim | dpmpp_2m | dpmpp_2m_karras
  std::string precision = "fp32";    // fp32 | fp16 | bf16
  std::string rng = "torch-cpu";     // torch-cpu | torch-cuda

  nlohmann::json to_json() const;
  // Absent fields keep their defaults; InvalidArgument for a field of the
  // wrong type ("settings.steps: expected an integer, got \"x\"").
  static Result<GenerationSettings> from_json(const nlohmann::json& j);
  // InvalidArgument naming the flag/field: "width 1000 is not a multiple of 8", ...
  Status validate() const;

  bool operator==(const GenerationSettings&) const = default;
};

// Names accepted by validate(), for help texts.
const std::vector<std::string>& known_samplers();
const std::vector<std::string>& known_precisions();
const std::vector<std::string>& known_rngs();

// `guidance` as it appears in golden keys and file metadata: "%.6g" of the
// float ("5", "7.5"), so C++ and Python print the same text.
std::string format_guidance(float guidance);

}  // namespace hipq::engine
