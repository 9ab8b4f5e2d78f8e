// PNG files for decoded images (libpng): 8-bit RGB, no interlace.
//
// write_png encodes in memory and writes through write_file_atomic (parents
// created, never a half-written file). read_png accepts 8-bit gray/RGB/RGBA
// (and palette, expanded) and returns RGB8. Errors name the path: IOError for
// the OS, Corruption for a malformed PNG, InvalidArgument for a buffer whose
// size is not width*height*3. Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/status.h"

namespace hipq::engine {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes per pixel
};

Result<std::string> encode_png(const RgbImage& image);
Status write_png(const std::filesystem::path& path, const RgbImage& image);
Result<RgbImage> decode_png(std::string_view bytes, const std::string& label = "png data");
Result<RgbImage> read_png(const std::filesystem::path& path);

// VAE output [3, H, W] (values in [-1, 1], NCHW, batch 1) to RGB8 as diffusers
// does: (x / 2 + 0.5).clamp(0, 1), then numpy_to_pil's (x * 255).round().
RgbImage rgb8_from_decoded(const float* chw, int width, int height);

}  // namespace hipq::engine
