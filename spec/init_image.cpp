#include "spec/init_image.h"

#include <png.h>
// jpeglib.h needs size_t and FILE declared first.
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <jpeglib.h>

#include "base/fs.h"

namespace hipq::spec {

namespace {

std::string size_text(uint64_t w, uint64_t h) { return std::to_string(w) + "x" + std::to_string(h); }

// The header's dimensions against the job's, before any pixel is decoded.
Status check_size(const std::string& label, uint64_t w, uint64_t h, ExpectedSize expected) {
  if (w == 0 || h == 0) return Status::Corruption(label + ": the image header says " + size_text(w, h) + " pixels");
  if (w > static_cast<uint64_t>(kMaxInitImageSide) || h > static_cast<uint64_t>(kMaxInitImageSide))
    return Status::InvalidArgument(label + ": the image is " + size_text(w, h) + ", larger than the " +
                                   std::to_string(kMaxInitImageSide) + " pixels a side an init image may have");
  if (expected.width > 0 && expected.height > 0 &&
      (w != static_cast<uint64_t>(expected.width) || h != static_cast<uint64_t>(expected.height))) {
    const bool larger = w > static_cast<uint64_t>(expected.width) || h > static_cast<uint64_t>(expected.height);
    return Status::InvalidArgument(label + ": the init image is " + size_text(w, h) + " but the job is " +
                                   size_text(static_cast<uint64_t>(expected.width),
                                             static_cast<uint64_t>(expected.height)) +
                                   (larger ? " (larger than the job's size)" : "") +
                                   "; hipq does not resize init images: resize or crop it to the job's size, "
                                   "or set the job's width and height to the image's");
  }
  return Status::Ok();
}

Result<RgbImage> decode_png_image(std::string_view bytes, const std::string& label, ExpectedSize expected) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, bytes.data(), bytes.size())) {
    std::string msg = img.message;
    png_image_free(&img);
    return Status::Corruption(label + ": not a readable PNG: " + msg);
  }
  if (Status s = check_size(label, img.width, img.height, expected); !s.ok()) {
    png_image_free(&img);
    return s;
  }
  if ((img.format & PNG_FORMAT_FLAG_LINEAR) != 0) {
    png_image_free(&img);
    return Status::InvalidArgument(label + ": a 16-bit PNG; save the init image with 8 bits per sample");
  }
  // RGBA, not RGB: libpng would composite the alpha onto a background; PIL's
  // convert("RGB") drops it, and so do we below.
  img.format = PNG_FORMAT_RGBA;
  std::vector<uint8_t> rgba(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, rgba.data(), 0, nullptr)) {
    std::string msg = img.message;
    png_image_free(&img);
    return Status::Corruption(label + ": the PNG's image data is damaged or truncated: " + msg);
  }
  // Every row decoded is not yet the whole file: one cut after its image data
  // (checksums, IEND) is truncated too, and refused as such.
  if (bytes.find(std::string_view("IEND\xae\x42\x60\x82", 8)) == std::string_view::npos)
    return Status::Corruption(label + ": the PNG is truncated (it ends before its IEND chunk)");
  RgbImage out;
  out.width = static_cast<int>(img.width);
  out.height = static_cast<int>(img.height);
  const size_t pixels = static_cast<size_t>(out.width) * static_cast<size_t>(out.height);
  out.rgb.resize(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) std::memcpy(&out.rgb[i * 3], &rgba[i * 4], 3);
  return out;
}

// libjpeg reports errors through a callback that must not return: it jumps
// back into decode_jpeg_image. Warnings (corrupt data, premature end of the
// file) are errors here: a truncated file is refused, not padded with gray.
struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

void jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_fail(cinfo);  // a warning: corrupt or truncated data
}

// Progressive files may hold any number of scans, each a pass over the image:
// more than this is refused (libjpeg-turbo's TurboJPEG API limits scans too).
constexpr int kMaxJpegScans = 500;

void jpeg_progress(j_common_ptr cinfo) {
  if (cinfo->is_decompressor) {
    auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
    if (d->input_scan_number > kMaxJpegScans) {
      auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
      std::snprintf(e->message, sizeof e->message, "more than %d progressive scans", kMaxJpegScans);
      std::longjmp(e->jump, 1);
    }
  }
}

// The two passes over a JPEG, written as C: no object with a destructor lives
// in a function that calls setjmp (a longjmp would skip it). Each returns
// kJpegOk or what went wrong; libjpeg's own message is in errors->message.
enum JpegResult { kJpegOk = 0, kJpegError, kJpegCmyk, kJpegShape, kJpegShortRows };

struct JpegHeader {
  JDIMENSION width = 0, height = 0;
};

void jpeg_setup(jpeg_decompress_struct* cinfo, JpegErrors* errors) {
  std::memset(cinfo, 0, sizeof *cinfo);
  cinfo->err = jpeg_std_error(&errors->mgr);
  errors->mgr.error_exit = jpeg_fail;
  errors->mgr.emit_message = jpeg_message;
  errors->message[0] = '\0';
}

JpegResult jpeg_header(const unsigned char* data, unsigned long size, JpegErrors* errors, JpegHeader* header) {
  jpeg_decompress_struct cinfo;
  jpeg_setup(&cinfo, errors);
  if (setjmp(errors->jump) != 0) {
    jpeg_destroy_decompress(&cinfo);
    return kJpegError;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, size);
  jpeg_read_header(&cinfo, TRUE);
  header->width = cinfo.image_width;
  header->height = cinfo.image_height;
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  jpeg_destroy_decompress(&cinfo);
  return cmyk ? kJpegCmyk : kJpegOk;
}

// Decodes into `out`, sized width * height * 3 by the caller from jpeg_header.
JpegResult jpeg_pixels(const unsigned char* data, unsigned long size, JpegErrors* errors, JpegHeader header,
                       unsigned char* out) {
  jpeg_decompress_struct cinfo;
  jpeg_progress_mgr progress;
  jpeg_setup(&cinfo, errors);
  progress.progress_monitor = jpeg_progress;
  if (setjmp(errors->jump) != 0) {
    jpeg_destroy_decompress(&cinfo);
    return kJpegError;
  }
  jpeg_create_decompress(&cinfo);
  cinfo.mem->max_memory_to_use = 1L << 30;
  cinfo.progress = &progress;
  jpeg_mem_src(&cinfo, data, size);
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_components != 3 || cinfo.output_width != header.width || cinfo.output_height != header.height) {
    jpeg_destroy_decompress(&cinfo);
    return kJpegShape;
  }
  const size_t row = static_cast<size_t>(cinfo.output_width) * 3;
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW rows[1] = {out + static_cast<size_t>(cinfo.output_scanline) * row};
    if (jpeg_read_scanlines(&cinfo, rows, 1) != 1) {
      jpeg_destroy_decompress(&cinfo);
      return kJpegShortRows;
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return kJpegOk;
}

Result<RgbImage> decode_jpeg_image(std::string_view bytes, const std::string& label, ExpectedSize expected) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  JpegErrors errors;
  JpegHeader header;
  switch (jpeg_header(data, size, &errors, &header)) {
    case kJpegOk: break;
    case kJpegCmyk: return Status::InvalidArgument(label + ": a CMYK JPEG; save the init image as RGB");
    default: return Status::Corruption(label + ": not a readable JPEG: " + errors.message);
  }
  HIPQ_RETURN_IF_ERROR(check_size(label, header.width, header.height, expected));
  RgbImage out;
  out.width = static_cast<int>(header.width);
  out.height = static_cast<int>(header.height);
  out.rgb.resize(static_cast<size_t>(out.width) * static_cast<size_t>(out.height) * 3);
  switch (jpeg_pixels(data, size, &errors, header, out.rgb.data())) {
    case kJpegOk: return out;
    case kJpegShape: return Status::Corruption(label + ": the JPEG does not decode to the RGB image its header describes");
    case kJpegShortRows: return Status::Corruption(label + ": the JPEG's data ended before its last row");
    default: return Status::Corruption(label + ": the JPEG is damaged or truncated: " + errors.message);
  }
}

}  // namespace

ImageFormat sniff_image_format(std::string_view bytes) {
  if (bytes.size() >= 8 && bytes.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) return ImageFormat::kPng;
  if (bytes.size() >= 3 && bytes.substr(0, 3) == std::string_view("\xff\xd8\xff", 3)) return ImageFormat::kJpeg;
  return ImageFormat::kUnknown;
}

Result<RgbImage> decode_init_image(std::string_view bytes, const std::string& label, ExpectedSize expected) {
  switch (sniff_image_format(bytes)) {
    case ImageFormat::kPng: return decode_png_image(bytes, label, expected);
    case ImageFormat::kJpeg: return decode_jpeg_image(bytes, label, expected);
    case ImageFormat::kUnknown: break;
  }
  return Status::InvalidArgument(label + ": not a PNG or JPEG file (init images must be PNG or JPEG)");
}

Result<RgbImage> read_init_image(const std::filesystem::path& path, ExpectedSize expected) {
  auto bytes = read_regular_file(path, kMaxInitImageBytes);
  if (!bytes.ok()) return bytes.status().WithContext("init image");
  return decode_init_image(*bytes, path.string(), expected);
}

}  // namespace hipq::spec
