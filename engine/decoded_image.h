// The VAE's output as an image: [3, H, W] floats in [-1, 1] (NCHW, batch 1)
// to RGB8 exactly as diffusers does, (x / 2 + 0.5).clamp(0, 1), then
// numpy_to_pil's (x * 255).round(). PNG encoding is spec/png.h.
// Thread safety: a pure function.
#pragma once

#include "spec/png.h"

namespace hipq::engine {

spec::RgbImage rgb8_from_decoded(const float* chw, int width, int height);

}  // namespace hipq::engine
