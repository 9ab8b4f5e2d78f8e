// Thumbnails for the HTML report: reads a PNG, shrinks it (box filter, aspect
// kept) so its longer side is at most `max_side` pixels, and returns it as a
// "data:image/png;base64,…" URI that the report embeds (no network fetch).
//
// PNG reading and encoding are spec/png.h (the one codec).
// Errors: NotFound when the file does not exist; Corruption when libpng
// cannot read it (the message names the path and libpng's reason);
// InvalidArgument for max_side < 1.
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/result.h"
#include "spec/png.h"

namespace hipq::coordinator::report {

// Box-filter downscale so max(width, height) <= max_side (never upscales).
spec::RgbImage downscale(const spec::RgbImage& image, int max_side);
std::string base64_encode(const std::string& bytes);
Result<std::string> png_thumbnail_data_uri(const std::filesystem::path& path, int max_side);

}  // namespace hipq::coordinator::report
