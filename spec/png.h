// PNG files: 8-bit RGB, no interlace. The one PNG codec of hipq: the engine
// writes decoded images with it, the report its thumbnails. Reading is
// libpng's; writing is zlib's deflate behind our own chunk framing, so that
// bands of rows are filtered (libpng's default adaptive choice) and deflated
// on several threads into one stream (libpng compresses on one: 119 ms for a
// 1024 px image, on the job's critical path).
//
// write_png encodes in memory and writes through write_file_atomic (parents
// created, never a half-written file). Text chunks (PngText) go right after
// IHDR, before the image data, so readers that stop early still see them: a
// tEXt chunk when key and text are printable ASCII, else an uncompressed iTXt
// (UTF-8). Keys are 1..79 Latin-1 characters without NUL (PNG spec 11.3.4);
// a NUL inside the text is dropped (neither chunk may hold one). read_png accepts 8-bit gray/RGB/RGBA
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

namespace hipq::spec {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes per pixel
};

// One textual chunk: `key` as the PNG keyword ("parameters", "Software").
struct PngText {
  std::string key;
  std::string text;
};

// InvalidArgument for a key that is empty, longer than 79 bytes, or not
// printable ASCII.
Result<std::string> encode_png(const RgbImage& image, const std::vector<PngText>& text = {});
Status write_png(const std::filesystem::path& path, const RgbImage& image, const std::vector<PngText>& text = {});
Result<RgbImage> decode_png(std::string_view bytes, const std::string& label = "png data");
Result<RgbImage> read_png(const std::filesystem::path& path);

}  // namespace hipq::spec
