// Reads a PNG's text chunks with libpng's own reader (not hipq's), as other
// tools would: {key -> text} for every tEXt, zTXt and iTXt chunk, or an error
// string when libpng refuses the file.
#pragma once

#include <png.h>

#include <csetjmp>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

namespace hipq::testing {

struct PngTextRead {
  std::map<std::string, std::string> text;
  std::map<std::string, int> compression;  // key -> PNG_TEXT_COMPRESSION_NONE / PNG_ITXT_COMPRESSION_NONE ...
  std::string error;
};

inline PngTextRead read_png_text_with_libpng(std::string_view bytes) {
  PngTextRead out;
  struct Reader {
    std::string_view data;
    size_t pos = 0;
  } reader{bytes, 0};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) {
    png_destroy_read_struct(&png, &info, nullptr);
    out.error = "libpng: cannot allocate";
    return out;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    out.error = "libpng refused the file";
    return out;
  }
  png_set_read_fn(png, &reader, [](png_structp p, png_bytep dst, png_size_t n) {
    auto* r = static_cast<Reader*>(png_get_io_ptr(p));
    if (r->pos + n > r->data.size()) png_error(p, "read past the end");
    std::memcpy(dst, r->data.data() + r->pos, n);
    r->pos += n;
  });
  png_read_info(png, info);
  png_textp text = nullptr;
  int count = 0;
  png_get_text(png, info, &text, &count);
  for (int i = 0; i < count; ++i) {
    size_t len = text[i].compression >= PNG_ITXT_COMPRESSION_NONE ? text[i].itxt_length : text[i].text_length;
    out.text[text[i].key] = std::string(text[i].text, len);
    out.compression[text[i].key] = text[i].compression;
  }
  png_destroy_read_struct(&png, &info, nullptr);
  return out;
}

}  // namespace hipq::testing
