#include "coordinator/report/thumbnail.h"

#include <algorithm>

namespace hipq::coordinator::report {

spec::RgbImage downscale(const spec::RgbImage& in, int max_side) {
  const int longer = std::max(in.width, in.height);
  if (longer <= max_side || longer == 0) return in;
  const double scale = static_cast<double>(max_side) / longer;
  spec::RgbImage out;
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
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::NotFound("image " + path.string() + " does not exist");
  HIPQ_ASSIGN_OR_RETURN(spec::RgbImage img, spec::read_png(path));
  HIPQ_ASSIGN_OR_RETURN(std::string png, spec::encode_png(downscale(img, max_side)));
  return "data:image/png;base64," + base64_encode(png);
}

}  // namespace hipq::coordinator::report
