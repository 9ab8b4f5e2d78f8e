#include "spec/init_image.h"

#include <gtest/gtest.h>

// jpeglib.h needs size_t and FILE declared first.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <jpeglib.h>

#include "base/fs.h"

namespace hipq::spec {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  auto d = fs::path(::testing::TempDir()) / ("hipq_init_image_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

RgbImage smooth(int w, int h) {
  RgbImage img;
  img.width = w;
  img.height = h;
  img.rgb.resize(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &img.rgb[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>(x * 255 / (w - 1));
      p[1] = static_cast<uint8_t>(y * 255 / (h - 1));
      p[2] = static_cast<uint8_t>(128);
    }
  return img;
}

// A baseline JPEG of `img` at quality 95 (libjpeg's compressor, the library the decoder uses).
std::string encode_jpeg(const RgbImage& img, bool progressive = false) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &mem, &size);
  c.image_width = static_cast<JDIMENSION>(img.width);
  c.image_height = static_cast<JDIMENSION>(img.height);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&img.rgb[static_cast<size_t>(c.next_scanline) * img.width * 3]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::string out(reinterpret_cast<char*>(mem), size);
  jpeg_destroy_compress(&c);
  std::free(mem);
  return out;
}

int max_diff(const RgbImage& a, const RgbImage& b) {
  int m = 0;
  for (size_t i = 0; i < a.rgb.size() && i < b.rgb.size(); ++i) m = std::max(m, std::abs(a.rgb[i] - b.rgb[i]));
  return m;
}

void expect_error(const Status& s, StatusCode code, const std::vector<std::string>& parts) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  for (const auto& p : parts) EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
}

TEST(InitImageTest, PngOfTheJobsSizeDecodesExactly) {
  const RgbImage img = smooth(24, 16);
  const auto path = temp_dir("png") / "init.png";
  ASSERT_TRUE(write_png(path, img).ok());
  auto back = read_init_image(path, {24, 16});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->width, 24);
  EXPECT_EQ(back->height, 16);
  EXPECT_EQ(back->rgb, img.rgb);
}

TEST(InitImageTest, JpegDecodesCloseToItsSourceBaselineAndProgressive) {
  const RgbImage img = smooth(32, 24);
  for (bool progressive : {false, true}) {
    auto back = decode_init_image(encode_jpeg(img, progressive), "init.jpg", {32, 24});
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->width, 32);
    EXPECT_EQ(back->height, 24);
    EXPECT_LE(max_diff(*back, img), 8) << "progressive " << progressive;  // quality 95 of a smooth image
  }
  // Deterministic: the same bytes, the same pixels.
  const std::string bytes = encode_jpeg(img);
  EXPECT_EQ(decode_init_image(bytes, "a.jpg")->rgb, decode_init_image(bytes, "a.jpg")->rgb);
}

TEST(InitImageTest, AnImageOfAnotherSizeIsRefusedNamingBothSizesAndTheFile) {
  const RgbImage img = smooth(24, 16);
  const auto path = temp_dir("size") / "wrong.png";
  ASSERT_TRUE(write_png(path, img).ok());
  auto r = read_init_image(path, {64, 64});
  expect_error(r.status(), StatusCode::kInvalidArgument, {path.string(), "24x16", "64x64", "does not resize"});
  auto larger = decode_init_image(encode_jpeg(smooth(80, 64)), "big.jpg", {64, 64});
  expect_error(larger.status(), StatusCode::kInvalidArgument, {"big.jpg", "80x64", "larger than the job"});
}

TEST(InitImageTest, AHeaderPastTheLimitsIsRefusedBeforeDecoding) {
  // A valid PNG whose IHDR then claims 100000 x 100000 (CRC fixed up): refused
  // from the header, before libpng would allocate 30 GB.
  std::string png = encode_png(smooth(8, 8)).value();
  auto put_u32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) png[at + static_cast<size_t>(i)] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  };
  put_u32(16, 100000);
  put_u32(20, 100000);
  // CRC-32 over "IHDR" and its 13 bytes.
  uint32_t crc = 0xffffffffu;
  for (size_t i = 12; i < 12 + 4 + 13; ++i) {
    crc ^= static_cast<uint8_t>(png[i]);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  put_u32(29, crc ^ 0xffffffffu);
  auto r = decode_init_image(png, "huge.png", {64, 64});
  expect_error(r.status(), StatusCode::kInvalidArgument, {"huge.png", "100000x100000"});
  auto any = decode_init_image(png, "huge.png");
  expect_error(any.status(), StatusCode::kInvalidArgument, {"huge.png", "16384"});
}

TEST(InitImageTest, TruncatedFilesAreRefusedWithTheirName) {
  const RgbImage img = smooth(32, 32);
  const std::string png = encode_png(img).value();
  const std::string jpg = encode_jpeg(img);
  for (size_t keep : {png.size() - 20, png.size() / 2, size_t{40}}) {
    auto r = decode_init_image(png.substr(0, keep), "cut.png", {32, 32});
    ASSERT_FALSE(r.ok()) << keep;
    expect_error(r.status(), StatusCode::kCorruption, {"cut.png"});
  }
  for (size_t keep : {jpg.size() - 10, jpg.size() / 2, size_t{30}}) {
    auto r = decode_init_image(jpg.substr(0, keep), "cut.jpg", {32, 32});
    ASSERT_FALSE(r.ok()) << keep;
    expect_error(r.status(), StatusCode::kCorruption, {"cut.jpg"});
  }
}

TEST(InitImageTest, NotAnImageIsRefused) {
  const auto dir = temp_dir("text");
  ASSERT_TRUE(write_file_atomic(dir / "notes.png", "just some text, named like a picture\n").ok());
  auto r = read_init_image(dir / "notes.png", {64, 64});
  expect_error(r.status(), StatusCode::kInvalidArgument, {"notes.png", "not a PNG or JPEG"});
  expect_error(decode_init_image("", "empty.png").status(), StatusCode::kInvalidArgument, {"empty.png"});
  // A PNG signature followed by garbage.
  expect_error(decode_init_image(std::string("\x89PNG\r\n\x1a\n", 8) + "garbage garbage", "liar.png").status(),
               StatusCode::kCorruption, {"liar.png"});
  auto missing = read_init_image(dir / "absent.png", {64, 64});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("absent.png"), std::string::npos) << missing.status().message();
  auto folder = read_init_image(dir, {64, 64});
  ASSERT_FALSE(folder.ok());
}

TEST(InitImageTest, SniffsFormatsByContentNotName) {
  EXPECT_EQ(sniff_image_format(encode_png(smooth(8, 8)).value()), ImageFormat::kPng);
  EXPECT_EQ(sniff_image_format(encode_jpeg(smooth(8, 8))), ImageFormat::kJpeg);
  EXPECT_EQ(sniff_image_format("GIF89a"), ImageFormat::kUnknown);
  // A JPEG named .png decodes as the JPEG it is.
  auto r = decode_init_image(encode_jpeg(smooth(16, 8)), "actually-a-jpeg.png", {16, 8});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

}  // namespace
}  // namespace hipq::spec
