#include "engine/decoded_image.h"

#include <algorithm>
#include <cmath>

namespace hipq::engine {

spec::RgbImage rgb8_from_decoded(const float* chw, int width, int height) {
  spec::RgbImage img;
  img.width = width;
  img.height = height;
  img.rgb.resize(static_cast<size_t>(width) * height * 3);
  const size_t plane = static_cast<size_t>(width) * height;
  for (int c = 0; c < 3; ++c) {
    for (size_t i = 0; i < plane; ++i) {
      // Same float32 ops and order as diffusers: x / 2 + 0.5, clamp, * 255, round half to even.
      float v = chw[c * plane + i] / 2.0f + 0.5f;
      v = std::clamp(v, 0.0f, 1.0f);
      if (std::isnan(chw[c * plane + i])) v = 0.0f;
      v = std::nearbyint(v * 255.0f);
      img.rgb[i * 3 + c] = static_cast<uint8_t>(v);
    }
  }
  return img;
}

}  // namespace hipq::engine
