// Downsample2D and Upsample2D (diffusers, use_conv=True): the resolution
// changes between UNet / VAE levels.
//
// Downsample2D: conv 3x3 stride 2 padding 1 (the UNet); with padding 0 (the
// VAE encoder) diffusers first pads the input by one zero row and column at
// the bottom and right (F.pad(x, (0, 1, 0, 1))), which forward() does with a
// fill and a strided copy into a padded buffer; key "conv.{weight,bias}".
// Upsample2D: nearest 2x, then conv 3x3 padding 1; key "conv.{weight,bias}".
// At exactly 2x the conv reads the half-size input as its upsample
// (Conv2dOptions::upsample_x2; the same values, no full-size copy made).
// When the skip connection has an odd size (latents not divisible by the
// level's factor), diffusers interpolates to that size; for nearest
// neighbour that equals 2x followed by a crop, which is what we do.
// Thread safety: immutable after binding.
#pragma once

#include <string>

#include "engine/models/layers.h"

namespace hipq::engine {

struct Downsample2D {
  Conv2d conv;
  static Result<Downsample2D> bind(WeightBinder& b, const std::string& prefix, int64_t channels, int padding = 1);
  Result<DeviceTensor> forward(kernels::Backend& be, const kernels::Tensor& x) const;
};

struct Upsample2D {
  Conv2d conv;
  static Result<Upsample2D> bind(WeightBinder& b, const std::string& prefix, int64_t channels);
  // out_h/out_w: target size (0: exactly 2x).
  Result<DeviceTensor> forward(kernels::Backend& be, const kernels::Tensor& x, int64_t out_h = 0,
                               int64_t out_w = 0) const;
};

}  // namespace hipq::engine
