#include "coordinator/report/thumbnail.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace hipq::coordinator::report {
namespace {

spec::RgbImage gradient(int w, int h) {
  spec::RgbImage img;
  img.width = w;
  img.height = h;
  img.rgb.resize(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &img.rgb[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>(x * 255 / (w - 1));
      p[1] = static_cast<uint8_t>(y * 255 / (h - 1));
      p[2] = 128;
    }
  }
  return img;
}

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("hipq-thumb-" + std::to_string(std::random_device{}()) + "-" + name);
}

TEST(ThumbnailTest, Base64MatchesRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
}

TEST(ThumbnailTest, PngRoundTripsAndDownscalesKeepingAspect) {
  const spec::RgbImage img = gradient(256, 128);
  auto png = spec::encode_png(img);
  ASSERT_TRUE(png.ok());
  const auto path = temp_file("g.png");
  { std::ofstream(path, std::ios::binary) << *png; }
  auto back = spec::read_png(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->width, 256);
  EXPECT_EQ(back->height, 128);
  EXPECT_EQ(back->rgb, img.rgb);
  const spec::RgbImage small = downscale(img, 64);
  EXPECT_EQ(small.width, 64);
  EXPECT_EQ(small.height, 32);
  // Box filter: the top-left output pixel averages the top-left 4×4 block.
  EXPECT_NEAR(small.rgb[0], (0 + 1 + 2 + 3) / 4.0, 1.0);
  EXPECT_EQ(small.rgb[2], 128);
  EXPECT_EQ(downscale(img, 1000).width, 256) << "never upscales";
  auto uri = png_thumbnail_data_uri(path, 32);
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->rfind("data:image/png;base64,iVBORw0KGgo", 0), 0u) << uri->substr(0, 40);
  std::filesystem::remove(path);
}

TEST(ThumbnailTest, MissingAndCorruptFilesAreErrorsNamingThePath) {
  const auto missing = temp_file("none.png");
  auto r = png_thumbnail_data_uri(missing, 32);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(missing.string()), std::string::npos);
  const auto bad = temp_file("bad.png");
  { std::ofstream(bad) << "not a png"; }
  EXPECT_EQ(png_thumbnail_data_uri(bad, 32).status().code(), StatusCode::kCorruption);
  std::filesystem::remove(bad);
}

}  // namespace
}  // namespace hipq::coordinator::report
