// InputDigests: the content sha256 of every file a job's settings name besides
// the model — each LoRA (in GenerationSettings::loras order), the init image,
// the refiner's weights — so that what a job runs on is pinned by content, not
// by path. The manifest computes the file digests when a batch is submitted;
// the database stores them beside the settings, the wire carries them to the
// worker, which refuses a job whose file changed since (a clear job error, not
// a silently different image), and the golden key hashes them instead of the
// paths (docs/golden-format.md).
//
// GenerationSettings stays the user's choice (paths and numbers); these are
// facts about the files, kept beside it.
// Thread safety: a plain value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"
#include "spec/generation_settings.h"

namespace hipq::spec {

struct InputDigests {
  std::vector<std::string> loras;  // lower-case hex sha256, one per settings.loras entry
  std::string init_image;          // "" when the job has no init image
  std::string refiner_weights;     // the refiner's weights sha256; "" when none or not known yet

  bool empty() const { return loras.empty() && init_image.empty() && refiner_weights.empty(); }
  // {"loras": [...], "init_image": "...", "refiner_weights": "..."}, each
  // member only when set ({} when empty).
  nlohmann::json to_json() const;
  // InvalidArgument naming the field for a wrong type, an unknown member or a
  // value that is not 64 lower-case hex digits.
  static Result<InputDigests> from_json(const nlohmann::json& j);
  // InvalidArgument when the digests do not fit `settings`: a LoRA count that
  // differs, an init image without a digest or a digest without one.
  Status check_against(const GenerationSettings& settings) const;

  bool operator==(const InputDigests&) const = default;
};

// True for 64 lower-case hex digits.
bool is_sha256_hex(std::string_view text);

}  // namespace hipq::spec

namespace hipq::spec {

// The identity of a LoRA set as dispatch affinity compares it: "" for none,
// else "<sha256>*<scale>" per LoRA in order, joined by ",", the scale as
// format_guidance prints it. The coordinator computes it from a job's LoRAs and
// their submitted digests, the worker from the set its pipeline holds, so the
// same files at the same scales match wherever they lie.
std::string lora_set_key(const std::vector<LoraSpec>& loras, const std::vector<std::string>& sha256s);

}  // namespace hipq::spec
