#include "spec/png.h"

#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "base/fs.h"

namespace hipq::spec {

namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

// Length, type, data, CRC over type + data (PNG spec 5.3).
void append_chunk(std::string& out, const char type[4], const std::string& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  std::string body(type, 4);
  body += data;
  out += body;
  put_u32(out, static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(body.data()),
                                           static_cast<uInt>(body.size()))));
}

bool printable_ascii(std::string_view s, bool allow_newline) {
  for (unsigned char c : s) {
    if (c == '\n' && allow_newline) continue;
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

Result<std::string> text_chunks(const std::vector<PngText>& text) {
  std::string out;
  for (const PngText& t : text) {
    if (t.key.empty() || t.key.size() > 79 || !printable_ascii(t.key, false) || t.key.front() == ' ' ||
        t.key.back() == ' ')
      return Status::InvalidArgument("png: text key '" + t.key +
                                     "' must be 1..79 printable ASCII characters without leading or trailing spaces");
    std::string value;
    value.reserve(t.text.size());
    for (char c : t.text)
      if (c != '\0') value.push_back(c);
    if (printable_ascii(value, true)) {
      append_chunk(out, "tEXt", t.key + '\0' + value);
    } else {
      // keyword, NUL, compression flag 0, method 0, empty language tag, NUL,
      // empty translated keyword, NUL, UTF-8 text.
      append_chunk(out, "iTXt", t.key + std::string("\0\0\0", 3) + '\0' + '\0' + value);
    }
  }
  return out;
}

}  // namespace

Result<std::string> encode_png(const RgbImage& image, const std::vector<PngText>& text) {
  if (image.width <= 0 || image.height <= 0)
    return Status::InvalidArgument("png: image size " + std::to_string(image.width) + "x" +
                                   std::to_string(image.height) + " is empty");
  const size_t expected = static_cast<size_t>(image.width) * image.height * 3;
  if (image.rgb.size() != expected)
    return Status::InvalidArgument("png: buffer holds " + std::to_string(image.rgb.size()) + " bytes, " +
                                   std::to_string(image.width) + "x" + std::to_string(image.height) +
                                   " RGB needs " + std::to_string(expected));
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(image.width);
  img.height = static_cast<png_uint_32>(image.height);
  img.format = PNG_FORMAT_RGB;
  // One pass into a buffer of the worst-case size, not the simplified API's
  // size-then-fill pair, which compresses everything twice (the write is on the
  // job's critical path: 1024 px took ~2x as long). PNG_IMAGE_FLAG_FAST would
  // halve it again at ~50% larger files on noisy images; not taken.
  png_alloc_size_t size = PNG_IMAGE_PNG_SIZE_MAX(img);
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&img, out.data(), &size, 0, image.rgb.data(), 0, nullptr)) {
    std::string msg = img.message;
    png_image_free(&img);
    return Status::Internal("png encode: " + msg);
  }
  out.resize(size);
  if (!text.empty()) {
    HIPQ_ASSIGN_OR_RETURN(std::string chunks, text_chunks(text));
    // Signature (8) + IHDR (4 length + 4 type + 13 data + 4 CRC) = 33 bytes.
    constexpr size_t kAfterIhdr = 33;
    if (out.size() < kAfterIhdr || out.compare(12, 4, "IHDR") != 0)
      return Status::Internal("png encode: libpng wrote no IHDR chunk first");
    out.insert(kAfterIhdr, chunks);
  }
  return out;
}

Status write_png(const std::filesystem::path& path, const RgbImage& image, const std::vector<PngText>& text) {
  auto bytes = encode_png(image, text);
  if (!bytes.ok()) return bytes.status().WithContext(path.string());
  return write_file_atomic(path, *bytes);
}

Result<RgbImage> decode_png(std::string_view bytes, const std::string& label) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, bytes.data(), bytes.size())) {
    std::string msg = img.message;
    png_image_free(&img);
    return Status::Corruption(label + ": not a readable PNG: " + msg);
  }
  img.format = PNG_FORMAT_RGB;
  RgbImage out;
  out.width = static_cast<int>(img.width);
  out.height = static_cast<int>(img.height);
  out.rgb.resize(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, out.rgb.data(), 0, nullptr)) {
    std::string msg = img.message;
    png_image_free(&img);
    return Status::Corruption(label + ": PNG data is damaged: " + msg);
  }
  return out;
}

Result<RgbImage> read_png(const std::filesystem::path& path) {
  HIPQ_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  return decode_png(bytes, path.string());
}

}  // namespace hipq::spec
