// AutoencoderKL's encoder half (diffusers): encoder.{conv_in, down_blocks.{i}
// (DownEncoderBlock2D: resnets, then Downsample2D with the asymmetric pad
// (0, 1, 0, 1) and a stride-2 conv, except after the last block), mid_block
// (resnet, attention, resnet), conv_norm_out + SiLU, conv_out to
// 2 * latent_channels}, then quant_conv: the moments of the latent
// distribution (DiagonalGaussianDistribution's parameters: mean | logvar along
// the channels). img2img encodes its init image with it (engine/img2img.h).
//
// Built from the same layers as the decoder (engine/models/layers.h,
// resnet_block.h, resample.h, VaeMidAttention), so the cpu reference and the
// hip path are the backends' existing ops. Precision is chosen at load (SDXL's
// pipelines encode in fp32 when the VAE config has force_upcast).
// Ownership: a VaeEncoder owns its device weights and must not outlive the
// Backend. Thread safety: immutable after load; encode on the backend's thread.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "engine/models/device_tensor.h"
#include "engine/models/layers.h"
#include "engine/models/resample.h"
#include "engine/models/resnet_block.h"
#include "engine/models/vae.h"
#include "engine/weight_source.h"
#include "kernels/backend.h"

namespace hipq::engine {

class VaeEncoder {
 public:
  // NotFound naming the first missing encoder tensor (a VAE file without its
  // encoder cannot run img2img), the loader's errors otherwise.
  static Result<VaeEncoder> load(const VaeConfig& cfg, const WeightSource& weights, kernels::Backend& backend,
                                 kernels::DType precision);
  // Binds (or, with a SpecRecorder, declares) every encoder and quant_conv
  // parameter in diffusers' state-dict order; `into` (may be null) receives
  // the layers. VaeDecoder::parameters lists the encoder through it.
  static Status bind_encoder(WeightBinder& b, const VaeConfig& cfg, VaeEncoder* into);

  // x: [N, in_channels, H, W] images in [-1, 1] (H, W multiples of 8), any
  // float dtype (cast to the encoder's precision). Returns the moments
  // [N, 2 * latent_channels, H/8, W/8] in the encoder's precision: mean, then logvar.
  Result<DeviceTensor> encode(kernels::Backend& be, const kernels::Tensor& x) const;

  const VaeConfig& config() const { return cfg_; }
  kernels::DType precision() const { return dtype_; }

 private:
  struct DownBlock {
    std::vector<ResnetBlock2D> resnets;
    std::vector<Downsample2D> downsamplers;
  };

  VaeConfig cfg_;
  kernels::DType dtype_ = kernels::DType::kF32;
  Conv2d conv_in_, conv_out_, quant_conv_;
  std::vector<DownBlock> down_;
  ResnetBlock2D mid_res0_, mid_res1_;
  VaeMidAttention mid_attn_;
  GroupNorm norm_out_;
  std::vector<kernels::Buffer> weights_;
};

// DiagonalGaussianDistribution.sample of diffusers on the host, fp32:
// mean + exp(0.5 * clamp(logvar, -30, 20)) * noise, per element; `moments`
// [N, 2C, h, w] as encode() returns them, `noise` N*C*h*w values (drawn by
// the caller in the moments' dtype from the job's generator). Returns
// [N, C, h, w]. InvalidArgument when the sizes disagree.
Result<std::vector<float>> sample_latent_distribution(const std::vector<float>& moments,
                                                      const std::vector<int64_t>& moments_shape,
                                                      const std::vector<float>& noise);

}  // namespace hipq::engine
