// Thumbnails for the HTML report: reads a PNG, shrinks it (box filter, aspect
// kept) so its longer side is at most `max_side` pixels, and returns it as a
// "data:image/png;base64,…" URI that the report embeds (no network fetch).
//
// Errors: NotFound when the file does not exist; Corruption when libpng
// cannot read it (the message names the path and libpng's reason);
// InvalidArgument for max_side < 1.
// Thread safety: reentrant (libpng's simplified API, no shared state).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/result.h"

namespace hipq::coordinator::report {

struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3, row-major
};

Result<RgbImage> read_png_rgb(const std::filesystem::path& path);
Result<std::string> encode_png(const RgbImage& image);
// Box-filter downscale so max(width, height) <= max_side (never upscales).
RgbImage downscale(const RgbImage& image, int max_side);
std::string base64_encode(const std::string& bytes);
Result<std::string> png_thumbnail_data_uri(const std::filesystem::path& path, int max_side);

}  // namespace hipq::coordinator::report
