// Golden files: a reference output (final latent, optionally the decoded image)
// with the provenance that says who made it, how, and from what.
//
// The key, the metadata and the provenance rules are spec/golden_format.h
// (shared with the database and the CLI); this file adds the tensors and the
// safetensors file around them (docs/golden-format.md).
//
// Validation on read: the header must parse (Corruption otherwise, incl.
// truncated data), "latent" must be f32 with 4 dims, content_sha256 must equal
// sha256 of the tensor bytes (Corruption "content hash mismatch"), then
// spec::check_golden_header (key, weights, provenance; missing provenance is
// FailedPrecondition unless allow_unpinned, in which case the golden is
// returned with pinned = false). Every message names the file.
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
#include "spec/golden_format.h"

namespace hipq::engine {

// The header (key, model, weights_sha256, settings, scheduler_config,
// provenance, content_sha256) and the tensors.
struct Golden : spec::GoldenHeader {
  bool pinned = true;             // false: provenance incomplete, imported with --allow-unpinned

  std::vector<float> latent;
  std::vector<int64_t> latent_shape;
  std::vector<uint8_t> image;     // optional: height * width * 3
  int image_width = 0;
  int image_height = 0;

  bool has_image() const { return !image.empty(); }
};

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
