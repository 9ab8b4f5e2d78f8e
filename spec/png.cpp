#include "spec/png.h"

#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

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

// ---- image data: filtered rows, deflated in bands on several threads ----

// Row filter of PNG spec 9.2 for one scanline (3 bytes a pixel) given the
// previous one (zeros above the first row), written after its filter byte.
void filter_row(int type, const uint8_t* cur, const uint8_t* prev, size_t n, uint8_t* out) {
  constexpr size_t bpp = 3;
  for (size_t i = 0; i < n; ++i) {
    const int a = i >= bpp ? cur[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
    int pred = 0;
    switch (type) {
      case 1: pred = a; break;
      case 2: pred = b; break;
      case 3: pred = (a + b) / 2; break;
      case 4: {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        pred = pa <= pb && pa <= pc ? a : (pb <= pc ? b : c);
        break;
      }
      default: break;
    }
    out[i] = static_cast<uint8_t>(cur[i] - pred);
  }
}

// Rows [r0, r1) filtered (each row: filter byte, then its bytes), the filter
// chosen per row as libpng's default does: all five tried, the one with the
// smallest sum of the bytes read as signed values kept.
std::string filtered_rows(const RgbImage& im, int r0, int r1) {
  const size_t n = static_cast<size_t>(im.width) * 3;
  std::string out((n + 1) * static_cast<size_t>(r1 - r0), '\0');
  std::vector<uint8_t> zeros(n, 0), trial(n);
  for (int r = r0; r < r1; ++r) {
    const uint8_t* cur = im.rgb.data() + static_cast<size_t>(r) * n;
    const uint8_t* prev = r > 0 ? cur - n : zeros.data();
    auto* dst = reinterpret_cast<uint8_t*>(out.data()) + (n + 1) * static_cast<size_t>(r - r0);
    uint64_t best = UINT64_MAX;
    for (int type = 0; type < 5; ++type) {
      filter_row(type, cur, prev, n, trial.data());
      uint64_t cost = 0;
      for (uint8_t v : trial) cost += static_cast<uint64_t>(std::abs(static_cast<int>(static_cast<int8_t>(v))));
      if (cost < best) {
        best = cost;
        dst[0] = static_cast<uint8_t>(type);
        std::memcpy(dst + 1, trial.data(), n);
      }
    }
  }
  return out;
}

// One band as raw deflate data: ends on a byte boundary with a sync flush,
// or with the final block when `last`; so bands concatenate into one stream.
Status deflate_band(const std::string& in, bool last, std::string& out) {
  z_stream z;
  std::memset(&z, 0, sizeof z);
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_FILTERED) != Z_OK)
    return Status::Internal("png encode: deflateInit2 failed");
  out.resize(deflateBound(&z, static_cast<uLong>(in.size())) + 16);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, last ? Z_FINISH : Z_SYNC_FLUSH);
  const bool ok = last ? rc == Z_STREAM_END : rc == Z_OK && z.avail_in == 0 && z.avail_out != 0;
  out.resize(z.total_out);
  deflateEnd(&z);
  return ok ? Status::Ok() : Status::Internal("png encode: deflate did not finish a band");
}

// The zlib stream of the image data (PNG spec 10): bands of rows filtered and
// deflated on up to hardware_concurrency threads (8 at most), as pigz does;
// each band starts with an empty window. zlib is set as libpng sets it for
// filtered rows (level 6, Z_FILTERED). A 1024 px image (hipq_bench_png, one
// run of both): libpng 119 ms and 1,808,849 bytes; this 69 ms on 2 cores
// (131 on one) and 1,806,219 bytes (docs/benchmarks.md).
Result<std::string> image_data(const RgbImage& im) {
  constexpr int kMinRows = 64;
  const int cores = static_cast<int>(std::max(1u, std::min(8u, std::thread::hardware_concurrency())));
  const int bands = std::max(1, std::min(cores, im.height / kMinRows));
  std::vector<std::string> raw(bands), packed(bands);
  std::vector<Status> status(bands, Status::Ok());
  auto work = [&](int b) {
    const int r0 = static_cast<int>(static_cast<int64_t>(im.height) * b / bands);
    const int r1 = static_cast<int>(static_cast<int64_t>(im.height) * (b + 1) / bands);
    raw[b] = filtered_rows(im, r0, r1);
    status[b] = deflate_band(raw[b], b == bands - 1, packed[b]);
  };
  std::vector<std::thread> threads;
  for (int b = 1; b < bands; ++b) {
    try {
      threads.emplace_back(work, b);
    } catch (const std::system_error&) {  // no thread to be had: this band on this one
      work(b);
    }
  }
  work(0);
  for (std::thread& t : threads) t.join();
  std::string out("\x78\x9c", 2);  // zlib header: deflate, 32 KiB window, default level
  uLong adler = adler32(0L, Z_NULL, 0);
  for (int b = 0; b < bands; ++b) {
    HIPQ_RETURN_IF_ERROR(status[b]);
    out += packed[b];
    adler = adler32_combine(adler, adler32(1L, reinterpret_cast<const Bytef*>(raw[b].data()),
                                           static_cast<uInt>(raw[b].size())),
                            static_cast<z_off_t>(raw[b].size()));
  }
  put_u32(out, static_cast<uint32_t>(adler));
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
  if (expected > (size_t{1} << 30))
    return Status::InvalidArgument("png: image " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                                   " is larger than the 1 GiB of RGB this encoder takes");
  // Signature, IHDR (8-bit RGB, deflate, adaptive filters, no interlace),
  // the text chunks, the image data in IDAT chunks of at most 1 MiB, IEND.
  HIPQ_ASSIGN_OR_RETURN(std::string chunks, text_chunks(text));
  HIPQ_ASSIGN_OR_RETURN(std::string data, image_data(image));
  std::string out("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  put_u32(ihdr, static_cast<uint32_t>(image.width));
  put_u32(ihdr, static_cast<uint32_t>(image.height));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // depth 8, RGB, deflate, filter method 0, no interlace
  append_chunk(out, "IHDR", ihdr);
  out += chunks;
  constexpr size_t kIdat = size_t{1} << 20;
  for (size_t at = 0; at < data.size(); at += kIdat) append_chunk(out, "IDAT", data.substr(at, kIdat));
  append_chunk(out, "IEND", "");
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
