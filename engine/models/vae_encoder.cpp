#include "engine/models/vae_encoder.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace hipq::engine {

using kernels::Tensor;

Status VaeEncoder::bind_encoder(WeightBinder& b, const VaeConfig& c, VaeEncoder* into) {
  VaeEncoder scratch;
  VaeEncoder& m = into != nullptr ? *into : scratch;
  const int g = c.norm_num_groups;
  HIPQ_ASSIGN_OR_RETURN(m.conv_in_, Conv2d::bind(b, "encoder.conv_in", c.in_channels, c.block_out_channels[0], 3, 1, 1));
  int64_t out = c.block_out_channels[0];
  const size_t n = c.block_out_channels.size();
  m.down_.clear();
  for (size_t i = 0; i < n; ++i) {
    const std::string p = "encoder.down_blocks." + std::to_string(i);
    const int64_t in = out;
    out = c.block_out_channels[i];
    DownBlock blk;
    for (int j = 0; j < c.layers_per_block; ++j) {
      HIPQ_ASSIGN_OR_RETURN(ResnetBlock2D r, ResnetBlock2D::bind(b, p + ".resnets." + std::to_string(j),
                                                                j == 0 ? in : out, out, 0, g, kVaeEps));
      blk.resnets.push_back(std::move(r));
    }
    if (i + 1 < n) {
      HIPQ_ASSIGN_OR_RETURN(Downsample2D d, Downsample2D::bind(b, p + ".downsamplers.0", out, /*padding=*/0));
      blk.downsamplers.push_back(std::move(d));
    }
    m.down_.push_back(std::move(blk));
  }
  const int64_t top = c.block_out_channels.back();
  HIPQ_ASSIGN_OR_RETURN(m.mid_res0_, ResnetBlock2D::bind(b, "encoder.mid_block.resnets.0", top, top, 0, g, kVaeEps));
  if (c.mid_block_add_attention) {
    HIPQ_ASSIGN_OR_RETURN(m.mid_attn_, VaeMidAttention::bind(b, "encoder.mid_block.attentions.0", top, g));
  }
  HIPQ_ASSIGN_OR_RETURN(m.mid_res1_, ResnetBlock2D::bind(b, "encoder.mid_block.resnets.1", top, top, 0, g, kVaeEps));
  HIPQ_ASSIGN_OR_RETURN(m.norm_out_, GroupNorm::bind(b, "encoder.conv_norm_out", top, g, kVaeEps));
  HIPQ_ASSIGN_OR_RETURN(m.conv_out_, Conv2d::bind(b, "encoder.conv_out", top, 2 * c.latent_channels, 3, 1, 1));
  HIPQ_ASSIGN_OR_RETURN(m.quant_conv_,
                        Conv2d::bind(b, "quant_conv", 2 * c.latent_channels, 2 * c.latent_channels, 1, 1, 0));
  return Status::Ok();
}

Result<VaeEncoder> VaeEncoder::load(const VaeConfig& cfg, const WeightSource& weights, kernels::Backend& backend,
                                    kernels::DType precision) {
  VaeEncoder m;
  m.cfg_ = cfg;
  m.dtype_ = precision;
  WeightLoader loader(weights, backend, precision);
  Status bound = bind_encoder(loader, cfg, &m);
  if (!bound.ok()) return bound.WithContext("VAE encoder (img2img needs the VAE's encoder weights)");
  m.weights_ = loader.take_buffers();
  return m;
}

Result<DeviceTensor> VaeEncoder::encode(kernels::Backend& be, const Tensor& x) const {
  const int64_t f = cfg_.upscale();
  if (x.ndim != 4 || x.dim(1) != cfg_.in_channels || !kernels::is_float(x.dtype) || x.dim(2) % f != 0 ||
      x.dim(3) % f != 0 || x.dim(2) == 0 || x.dim(3) == 0)
    return Status::InvalidArgument("VaeEncoder: image " + x.describe() + " is not [N, " +
                                   std::to_string(cfg_.in_channels) + ", H, W] floats with H and W multiples of " +
                                   std::to_string(f));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor xc, contiguous_copy(be, x, dtype_));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor h, conv_in_(be, xc.t));
  for (const DownBlock& blk : down_) {
    for (const ResnetBlock2D& r : blk.resnets) {
      HIPQ_ASSIGN_OR_RETURN(h, r.forward(be, h.t, nullptr));
    }
    for (const Downsample2D& d : blk.downsamplers) {
      HIPQ_ASSIGN_OR_RETURN(h, d.forward(be, h.t));
    }
  }
  HIPQ_ASSIGN_OR_RETURN(h, mid_res0_.forward(be, h.t, nullptr));
  if (cfg_.mid_block_add_attention) {
    HIPQ_ASSIGN_OR_RETURN(h, mid_attn_.forward(be, h.t));
  }
  HIPQ_ASSIGN_OR_RETURN(h, mid_res1_.forward(be, h.t, nullptr));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor o, norm_out_(be, h.t, /*silu=*/true));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor moments, conv_out_(be, o.t));
  return quant_conv_(be, moments.t);
}

Result<std::vector<float>> sample_latent_distribution(const std::vector<float>& moments,
                                                      const std::vector<int64_t>& shape,
                                                      const std::vector<float>& noise) {
  if (shape.size() != 4 || shape[1] % 2 != 0)
    return Status::InvalidArgument("sample_latent_distribution: moments shape is not [N, 2C, h, w]");
  const int64_t n = shape[0], c = shape[1] / 2, plane = shape[2] * shape[3];
  if (static_cast<int64_t>(moments.size()) != n * 2 * c * plane || static_cast<int64_t>(noise.size()) != n * c * plane)
    return Status::InvalidArgument("sample_latent_distribution: " + std::to_string(moments.size()) + " moments and " +
                                   std::to_string(noise.size()) + " noise values do not fit [" + std::to_string(n) +
                                   ", " + std::to_string(2 * c) + ", h, w]");
  std::vector<float> out(static_cast<size_t>(n * c * plane));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < plane; ++i) {
        const float mean = moments[static_cast<size_t>((b * 2 * c + ch) * plane + i)];
        const float logvar = std::clamp(moments[static_cast<size_t>((b * 2 * c + c + ch) * plane + i)], -30.0f, 20.0f);
        const float std_dev = std::exp(0.5f * logvar);
        const size_t at = static_cast<size_t>((b * c + ch) * plane + i);
        const float spread = std_dev * noise[at];  // torch rounds the product, then adds
        out[at] = mean + spread;
      }
  return out;
}

}  // namespace hipq::engine
