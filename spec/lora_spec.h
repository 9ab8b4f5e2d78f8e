// LoraSpec: one LoRA adapter a job applies — the file and its scale — as the
// CLI (`--lora PATH[:SCALE]`), and later manifests, the wire and the golden key
// spell it. The file's content sha256 identifies it in keys and PNG metadata
// (engine/lora/lora_file.h computes it); the path alone does not.
// Thread safety: a value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"

namespace hipq::spec {

struct LoraSpec {
  std::string path;
  float scale = 1.0f;

  // InvalidArgument: empty path, or a scale that is not finite or outside
  // [-kMaxScale, kMaxScale] (A1111 and ComfyUI sliders stop well inside it).
  Status validate() const;
  // {"path": "...", "scale": 0.8}
  nlohmann::json to_json() const;
  // InvalidArgument naming the field; unknown fields are refused.
  static Result<LoraSpec> from_json(const nlohmann::json& j);
  // "PATH" or "PATH:SCALE" (the last ':' splits when what follows parses as a
  // number, so a path holding ':' still works without a scale).
  static Result<LoraSpec> parse(std::string_view text);

  bool operator==(const LoraSpec&) const = default;
};

inline constexpr float kMaxLoraScale = 16.0f;

// validate() of each; InvalidArgument naming the entry's index.
Status validate_loras(const std::vector<LoraSpec>& loras);

}  // namespace hipq::spec
