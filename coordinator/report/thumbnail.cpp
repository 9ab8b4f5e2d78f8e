#include "coordinator/report/thumbnail.h"

#include <png.h>

#include <algorithm>
#include <cstring>

namespace hipq::coordinator::report {

Result<RgbImage> read_png_rgb(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::NotFound("image " + path.string() + " does not exist");
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) {
    return Status::Corruption("image " + path.string() + " is not a readable PNG: " + image.message);
  }
  image.format = PNG_FORMAT_RGB;
  RgbImage out;
  out.width = static_cast<int>(image.width);
  out.height = static_cast<int>(image.height);
  out.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr)) {
    std::string msg = image.message;
    png_image_free(&image);
    return Status::Corruption("image " + path.string() + ": " + msg);
  }
  return out;
}

Result<std::string> encode_png(const RgbImage& img) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(img.width);
  image.height = static_cast<png_uint_32>(img.height);
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, img.rgb.data(), 0, nullptr)) {
    return Status::Internal(std::string("PNG encode (size pass): ") + image.message);
  }
  std::string bytes(size, '\0');
  if (!png_image_write_to_memory(&image, bytes.data(), &size, 0, img.rgb.data(), 0, nullptr)) {
    return Status::Internal(std::string("PNG encode: ") + image.message);
  }
  bytes.resize(size);
  return bytes;
}

RgbImage downscale(const RgbImage& in, int max_side) {
  const int longer = std::max(in.width, in.height);
  if (longer <= max_side || longer == 0) return in;
  const double scale = static_cast<double>(max_side) / longer;
  RgbImage out;
  out.width = std::max(1, static_cast<int>(in.width * scale + 0.5));
  out.height = std::max(1, static_cast<int>(in.height * scale + 0.5));
  out.rgb.resize(static_cast<size_t>(out.width) * out.height * 3);
  for (int y = 0; y < out.height; ++y) {
    const int y0 = y * in.height / out.height, y1 = std::max(y0 + 1, (y + 1) * in.height / out.height);
    for (int x = 0; x < out.width; ++x) {
      const int x0 = x * in.width / out.width, x1 = std::max(x0 + 1, (x + 1) * in.width / out.width);
      for (int c = 0; c < 3; ++c) {
        unsigned sum = 0;
        for (int yy = y0; yy < y1; ++yy) {
          for (int xx = x0; xx < x1; ++xx) sum += in.rgb[(static_cast<size_t>(yy) * in.width + xx) * 3 + c];
        }
        const unsigned n = static_cast<unsigned>((y1 - y0) * (x1 - x0));
        out.rgb[(static_cast<size_t>(y) * out.width + x) * 3 + c] = static_cast<uint8_t>((sum + n / 2) / n);
      }
    }
  }
  return out;
}

std::string base64_encode(const std::string& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8) |
                       static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> png_thumbnail_data_uri(const std::filesystem::path& path, int max_side) {
  if (max_side < 1) return Status::InvalidArgument("thumbnail size must be at least 1 pixel");
  HIPQ_ASSIGN_OR_RETURN(RgbImage img, read_png_rgb(path));
  HIPQ_ASSIGN_OR_RETURN(std::string png, encode_png(downscale(img, max_side)));
  return "data:image/png;base64," + base64_encode(png);
}

}  // namespace hipq::coordinator::report
