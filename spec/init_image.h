// Init images of img2img jobs: a PNG or JPEG file the user names, decoded to
// RGB8 with bounded cost and refused with its name when it is not what the job
// needs. The size rule (docs/pipeline.md, "img2img"): the image must be exactly
// the job's width x height; hipq never resizes (diffusers would resize with
// PIL's bicubic filter, a silent stretch for a different aspect ratio).
//
// Bounded cost: the file is read only when it is a regular file of at most
// kMaxInitImageBytes; the header's dimensions are checked against the
// expected size (and kMaxInitImageSide) before a pixel is decoded, so a
// 100000 x 100000 header costs a header read. Decoders never trust the
// header beyond that: a file whose data ends early, lies about its size or
// is damaged is Corruption naming the file.
//
// Conversion to RGB as diffusers' load_image (PIL convert("RGB")): gray is
// replicated, alpha dropped (not composited), palettes expanded, 16-bit PNG
// samples keep their high byte. JPEG: libjpeg-turbo with its defaults (ISLOW
// IDCT, fancy upsampling), as PIL decodes it; CMYK JPEGs are refused.
// Errors: InvalidArgument (not an image, wrong size, too large), Corruption
// (damaged or truncated data), the read errors of base/fs.h. Each names the
// label (the path). Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/result.h"
#include "spec/png.h"

namespace hipq::spec {

// Larger files are refused before they are read.
inline constexpr int64_t kMaxInitImageBytes = int64_t{256} << 20;
// Larger sides are refused from the header, whatever the job asks.
inline constexpr int kMaxInitImageSide = 16384;

enum class ImageFormat { kUnknown, kPng, kJpeg };
// From the first bytes (the signatures); kUnknown otherwise.
ImageFormat sniff_image_format(std::string_view bytes);

// The size the image must have; 0 x 0 accepts any size up to kMaxInitImageSide.
struct ExpectedSize {
  int width = 0;
  int height = 0;
};

Result<RgbImage> decode_init_image(std::string_view bytes, const std::string& label, ExpectedSize expected = {});
Result<RgbImage> read_init_image(const std::filesystem::path& path, ExpectedSize expected = {});

}  // namespace hipq::spec
