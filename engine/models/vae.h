// AutoencoderKL (diffusers): the decoder half the pipelines need —
// post_quant_conv, then decoder.{conv_in, mid_block (resnet, attention,
// resnet), up_blocks.{i}.resnets/upsamplers, conv_norm_out, conv_out} — and
// diffusers-compatible tiled decoding.
//
// The caller divides latents by the scaling factor first (SDXL 0.13025,
// SD 0.18215: VaeConfig::scaling_factor). Precision is chosen at load,
// independently of the UNet: SDXL's VAE overflows in fp16, so pipelines load
// it in f32 (force_upcast) whatever the UNet precision.
//
// Tiled decoding follows diffusers' AutoencoderKL.tiled_decode: latent tiles
// of tile_sample_size/8 with 25% overlap, each decoded alone, blended
// vertically then horizontally (in place, in raster order, as the reference
// does) and cropped. Only one tile is on the device at a time; blending
// happens on the host in fp32. Decoding is tiled only when the latent is
// larger than a tile (as in diffusers).
//
// parameters() lists the whole AutoencoderKL (the encoder and quant_conv of
// engine/models/vae_encoder.h too), so exported folders load in diffusers;
// load() binds only what decoding uses.
// Ownership: a VaeDecoder owns its device weights and must not outlive the
// Backend. Thread safety: immutable after load; decode on the backend's thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/models/attention.h"
#include "engine/models/device_tensor.h"
#include "engine/models/layers.h"
#include "engine/models/resample.h"
#include "engine/models/resnet_block.h"
#include "engine/weight_source.h"
#include "kernels/backend.h"

namespace hipq::engine {

// The epsilon of every group norm of the VAE (diffusers' AutoencoderKL).
inline constexpr float kVaeEps = 1e-6f;

struct VaeConfig {
  int64_t in_channels = 3;
  int64_t out_channels = 3;
  int64_t latent_channels = 4;
  std::vector<int64_t> block_out_channels{128, 256, 512, 512};
  int layers_per_block = 2;
  int norm_num_groups = 32;
  double scaling_factor = 0.18215;
  int64_t sample_size = 512;
  bool force_upcast = true;
  bool mid_block_add_attention = true;

  static VaeConfig sd15();
  static VaeConfig sdxl();
  static Result<VaeConfig> from_json(const nlohmann::json& j, const std::string& where);
  // Shapes from the weights; what shapes cannot tell (scaling_factor,
  // sample_size) from the family ("sd1" | "sd2" | "sdxl"; InvalidArgument
  // otherwise): the scaling factor is never a silent default.
  static Result<VaeConfig> from_weights(const WeightSource& w, std::string_view family);
  nlohmann::json to_json() const;
  // Pixels per latent along each axis (8 for the real models).
  int64_t upscale() const { return int64_t{1} << (block_out_channels.size() - 1); }
};

// The mid block's attention of the encoder and the decoder alike: group norm,
// one head of self attention over the H*W positions (biased q, k, v), plus
// the input. Keys under its prefix: group_norm, to_q, to_k, to_v, to_out.0.
struct VaeMidAttention {
  GroupNorm norm;
  Attention attn;
  static Result<VaeMidAttention> bind(WeightBinder& b, const std::string& prefix, int64_t channels, int groups);
  // x: [N, C, H, W] -> same shape and dtype.
  Result<DeviceTensor> forward(kernels::Backend& be, const kernels::Tensor& x) const;
};

struct VaeTiling {
  bool enabled = false;
  int64_t tile_sample_size = 0;  // pixels; 0 = config sample_size (diffusers' default)
  float overlap = 0.25f;         // diffusers' tile_overlap_factor
  // The low placement's tiles: the mid block runs on the whole latent, then
  // the tiles go through the up blocks in lockstep, every group norm with
  // the whole image's statistics (each tile's partial sums over the latent
  // region it owns, merged in fp64 in raster order); tile activations wait
  // in host memory between norms, one tile on the device at a time. The
  // tiles and their blending are diffusers' (below). false: diffusers' own
  // tiled_decode, each tile decoded alone (its goldens).
  bool whole_image_norms = false;
};

class VaeDecoder {
 public:
  static Result<VaeDecoder> load(const VaeConfig& cfg, const WeightSource& weights, kernels::Backend& backend,
                                 kernels::DType precision);
  static Result<std::vector<ParamSpec>> parameters(const VaeConfig& cfg);

  // z: [N, latent_channels, h, w] (already divided by scaling_factor), any
  // float dtype (cast to the VAE precision). Returns [N, out, h*8, w*8] in the
  // VAE precision, values ~[-1, 1] (the caller maps to RGB8).
  Result<DeviceTensor> decode(kernels::Backend& be, const kernels::Tensor& z, const VaeTiling& tiling = {}) const;

  const VaeConfig& config() const { return cfg_; }
  kernels::DType precision() const { return dtype_; }

 private:
  struct UpBlock {
    std::vector<ResnetBlock2D> resnets;
    std::vector<Upsample2D> upsamplers;
  };
  static Status bind_decoder(VaeDecoder& m, WeightBinder& b);
  Result<DeviceTensor> decode_tile(kernels::Backend& be, const kernels::Tensor& z) const;
  // post_quant_conv, conv_in and the mid block on the whole latent (fp32 on the host).
  Result<std::vector<float>> decode_mid(kernels::Backend& be, const kernels::Tensor& z) const;
  struct TileGrid;
  // Every tile's image (fp32, [N, out, h, w]) of the grid, decoded in
  // lockstep with the whole image's group-norm statistics (VaeTiling).
  Result<std::vector<std::vector<float>>> decode_tiles_whole_norms(kernels::Backend& be, const kernels::Tensor& z,
                                                                   const TileGrid& grid) const;

  VaeConfig cfg_;
  kernels::DType dtype_ = kernels::DType::kF32;
  Conv2d post_quant_conv_, conv_in_, conv_out_;
  ResnetBlock2D mid_res0_, mid_res1_;
  VaeMidAttention mid_attn_;
  std::vector<UpBlock> up_;
  GroupNorm norm_out_;
  std::vector<kernels::Buffer> weights_;
};

}  // namespace hipq::engine
