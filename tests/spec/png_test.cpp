#include "spec/png.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/fs.h"
#include "tests/spec/png_text.h"

namespace hipq::spec {
namespace {

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::path(::testing::TempDir()) / ("hipq_png_" + name);
  std::filesystem::remove_all(d);
  return d;
}

RgbImage gradient(int w, int h) {
  RgbImage img;
  img.width = w;
  img.height = h;
  img.rgb.resize(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>((i * 37) % 256);
  return img;
}

TEST(PngTest, PngRoundTripIsLossless) {
  RgbImage img = gradient(24, 16);
  auto dir = temp_dir("round");
  auto path = dir / "nested" / "image.png";
  ASSERT_TRUE(write_png(path, img).ok());
  auto back = read_png(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->width, 24);
  EXPECT_EQ(back->height, 16);
  EXPECT_EQ(back->rgb, img.rgb);
}

// Large enough for several bands (one per core, 64 rows at least) whatever
// the machine: rows deflated apart must still decode (through libpng) to the
// same pixels, with every filter type in play (noise, flat runs, ramps), also
// at an odd width and a row count that does not split evenly.
TEST(PngTest, ImagesDeflatedInBandsDecodeToTheSamePixels) {
  for (auto [w, h] : {std::pair{1024, 1024}, std::pair{333, 517}, std::pair{7, 1}}) {
    RgbImage img;
    img.width = w;
    img.height = h;
    img.rgb.resize(static_cast<size_t>(w) * h * 3);
    uint32_t state = 12345;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w * 3; ++x) {
        state = state * 1664525u + 1013904223u;
        const size_t i = static_cast<size_t>(y) * w * 3 + x;
        img.rgb[i] = y % 3 == 0 ? static_cast<uint8_t>(state >> 24)          // noise
                     : y % 3 == 1 ? static_cast<uint8_t>(x + y)               // ramp
                                  : static_cast<uint8_t>(x < w ? 200 : 17);  // flat runs
      }
    auto bytes = encode_png(img, {{"parameters", "a prompt"}});
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto back = decode_png(*bytes, "banded");
    ASSERT_TRUE(back.ok()) << w << "x" << h << ": " << back.status().ToString();
    EXPECT_EQ(back->width, w);
    EXPECT_EQ(back->height, h);
    EXPECT_TRUE(back->rgb == img.rgb) << w << "x" << h;
  }
}

TEST(PngTest, WrongBufferSizeIsRejectedWithSizes) {
  RgbImage img = gradient(4, 4);
  img.rgb.pop_back();
  auto r = encode_png(img);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("4x4"), std::string::npos);
}

TEST(PngTest, DamagedPngIsCorruptionNamingTheFile) {
  auto bytes = encode_png(gradient(8, 8));
  ASSERT_TRUE(bytes.ok());
  auto dir = temp_dir("damaged");
  auto path = dir / "bad.png";
  ASSERT_TRUE(write_file_atomic(path, bytes->substr(0, bytes->size() / 2)).ok());
  auto r = read_png(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("bad.png"), std::string::npos);
  ASSERT_TRUE(write_file_atomic(path, "not a png at all").ok());
  EXPECT_EQ(read_png(path).status().code(), StatusCode::kCorruption);
}

TEST(PngTest, TextChunksAreReadByLibpngAsTextAndInternationalText) {
  RgbImage img = gradient(8, 4);
  const std::string utf8 = "ein Fuchs im Schnee \xe2\x9d\x84\nNegative prompt: Nebel";
  auto bytes = encode_png(img, {{"parameters", "a cat\nSteps: 4, Seed: 1"}, {"hipq", utf8}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto read = hipq::testing::read_png_text_with_libpng(*bytes);
  ASSERT_TRUE(read.error.empty()) << read.error;
  EXPECT_EQ(read.text["parameters"], "a cat\nSteps: 4, Seed: 1");
  EXPECT_EQ(read.compression["parameters"], PNG_TEXT_COMPRESSION_NONE);  // tEXt
  EXPECT_EQ(read.text["hipq"], utf8);
  EXPECT_EQ(read.compression["hipq"], PNG_ITXT_COMPRESSION_NONE);  // iTXt, UTF-8
  // The pixels are untouched by the inserted chunks.
  auto back = decode_png(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->rgb, img.rgb);
  // The chunks come before the image data: a reader that stops at IDAT sees them.
  EXPECT_LT(bytes->find("tEXtparameters"), bytes->find("IDAT"));
}

TEST(PngTest, NulInTextIsDroppedAndBadKeysAreRefused) {
  RgbImage img = gradient(4, 4);
  auto bytes = encode_png(img, {{"parameters", std::string("a\0b", 3)}});
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(hipq::testing::read_png_text_with_libpng(*bytes).text["parameters"], "ab");
  for (const std::string& key : {std::string(), std::string(80, 'k'), std::string("caf\xc3\xa9"),
                                 std::string("a\nb"), std::string(" lead")}) {
    auto r = encode_png(img, {{key, "x"}});
    ASSERT_FALSE(r.ok()) << "key '" << key << "' was accepted";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("text key"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace hipq::spec
