#include "engine/decoded_image.h"

#include <gtest/gtest.h>

#include <vector>

namespace hipq::engine {
namespace {

TEST(DecodedImageTest, DecodedToRgb8MatchesDiffusersRounding) {
  // 1x5 image, channels planar: values chosen for clamp and round-half-even.
  const int w = 5, h = 1;
  std::vector<float> chw(3 * w * h, 0.0f);
  float r[5] = {-2.0f, -1.0f, 0.0f, 1.0f, 3.0f};
  for (int i = 0; i < 5; ++i) chw[i] = r[i];
  // (x/2+0.5)*255 for x = 0 is exactly 127.5 -> 128 (half to even);
  // x = -0.5 -> 63.75 -> 64; x = 0.5 -> 191.25 -> 191.
  chw[w + 0] = -0.5f;
  chw[w + 1] = 0.5f;
  spec::RgbImage img = rgb8_from_decoded(chw.data(), w, h);
  EXPECT_EQ(img.rgb[0 * 3 + 0], 0);
  EXPECT_EQ(img.rgb[1 * 3 + 0], 0);
  EXPECT_EQ(img.rgb[2 * 3 + 0], 128);
  EXPECT_EQ(img.rgb[3 * 3 + 0], 255);
  EXPECT_EQ(img.rgb[4 * 3 + 0], 255);
  EXPECT_EQ(img.rgb[0 * 3 + 1], 64);
  EXPECT_EQ(img.rgb[1 * 3 + 1], 191);
  EXPECT_EQ(img.rgb[0 * 3 + 2], 128);
}

}  // namespace
}  // namespace hipq::engine
