// ResnetBlock2D (diffusers): norm1 -> SiLU -> conv1 (+ time_emb_proj(SiLU(temb)))
// -> norm2 -> SiLU -> conv2, plus the input (through conv_shortcut, a 1x1
// conv, when the channel count changes).
//
// Keys under its prefix: norm1.{weight,bias} [in], conv1.{weight [out,in,3,3],bias},
// time_emb_proj.{weight [out,temb],bias} (UNet only), norm2, conv2,
// conv_shortcut.{weight [out,in,1,1],bias} (when in != out).
// The UNet uses eps 1e-5, the VAE 1e-6; groups 32 in both.
// Thread safety: immutable after binding.
#pragma once

#include <optional>
#include <string>

#include "engine/models/layers.h"

namespace hipq::engine {

struct ResnetBlock2D {
  GroupNorm norm1, norm2;
  Conv2d conv1, conv2;
  std::optional<Linear> time_emb_proj;
  std::optional<Conv2d> conv_shortcut;
  int64_t in = 0, out = 0;

  // temb_channels 0: no time embedding (the VAE).
  static Result<ResnetBlock2D> bind(WeightBinder& b, const std::string& prefix, int64_t in, int64_t out,
                                    int64_t temb_channels, int groups, float eps);
  // x: [N, in, H, W]; temb_silu: SiLU(temb) [N, temb_channels] or nullptr.
  // Returns [N, out, H, W].
  Result<DeviceTensor> forward(kernels::Backend& be, const kernels::Tensor& x,
                               const kernels::Tensor* temb_silu) const;
  // forward() on an input the caller gives up: with a conv shortcut, the
  // shortcut reads x first and norm1 then runs in place over it; norm2 runs in
  // place over conv1's output. The same values as forward(), at most
  // in + 2 * out channels held (forward(): 2 * in + out), which is what
  // bounds the VAE decode's widest moment (docs/memory.md).
  Result<DeviceTensor> forward_consuming(kernels::Backend& be, DeviceTensor x,
                                         const kernels::Tensor* temb_silu) const;
};

}  // namespace hipq::engine
