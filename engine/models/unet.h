// UNet2DConditionModel (diffusers): the denoiser of SDXL and SD 1.x / 2.x,
// one implementation driven by UNetConfig, module tree following the diffusers
// checkpoint so keys bind 1:1:
//   conv_in, time_embedding.linear_1/linear_2, [add_embedding.linear_1/linear_2],
//   down_blocks.{i}.resnets.{j} / attentions.{j} / downsamplers.0.conv,
//   mid_block.resnets.{0,1} / attentions.0,
//   up_blocks.{i}.resnets.{j} / attentions.{j} / upsamplers.0.conv,
//   conv_norm_out, conv_out.
// SDXL ("addition_embed_type": "text_time"): the micro-conditioning time_ids
// are each embedded sinusoidally (addition_time_embed_dim wide), concatenated
// AFTER the pooled text embedding and passed through add_embedding; the result
// is added to the timestep embedding. The base takes six (original h, w, crop
// top, left, target h, w), the refiner five (original h, w, crop top, left,
// aesthetic score): how many is what add_embedding's input width leaves after
// the pooled text embedding (2816 = 1280 + 6 * 256, 2560 = 1280 + 5 * 256), so
// forward() reads it from the inputs: time_ids / N values per row.
// Classifier-free guidance is the caller's: one batch of two (negative,
// positive); every input carries the batch dimension N.
//
// Ownership: a UNet owns its weights (device Buffers) and must not outlive
// the Backend it was loaded on. Thread safety: immutable after load;
// forward() runs on the backend's thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/models/device_tensor.h"
#include "engine/models/layers.h"
#include "engine/models/weight_binder.h"
#include "engine/models/resample.h"
#include "engine/models/resnet_block.h"
#include "engine/models/transformer_2d.h"
#include "engine/weight_source.h"
#include "kernels/backend.h"

namespace hipq::engine {

struct UNetConfig {
  int64_t in_channels = 4;
  int64_t out_channels = 4;
  std::vector<int64_t> block_out_channels{320, 640, 1280, 1280};
  std::vector<std::string> down_block_types{"CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                                            "CrossAttnDownBlock2D", "DownBlock2D"};
  std::vector<std::string> up_block_types{"UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D",
                                          "CrossAttnUpBlock2D"};
  bool mid_block = true;  // mid_block_type "UNetMidBlock2DCrossAttn" (null: none)
  int layers_per_block = 2;
  std::vector<int64_t> transformer_layers_per_block{1, 1, 1, 1};  // per down block
  // Heads per block. diffusers' config calls this attention_head_dim (a
  // historical misnomer it keeps); num_attention_heads wins when set.
  std::vector<int64_t> num_attention_heads{8, 8, 8, 8};
  int64_t cross_attention_dim = 768;
  bool use_linear_projection = false;
  bool upcast_attention = false;
  std::string addition_embed_type;  // "" or "text_time"
  int64_t addition_time_embed_dim = 256;
  int64_t projection_class_embeddings_input_dim = 2816;
  int norm_num_groups = 32;
  float norm_eps = 1e-5f;
  bool flip_sin_to_cos = true;
  float freq_shift = 0.0f;
  int64_t sample_size = 64;

  static UNetConfig sd15();
  static UNetConfig sd21();
  static UNetConfig sdxl();
  // stabilityai/stable-diffusion-xl-refiner-1.0's unet/config.json: four
  // levels 384/768/1536/1536 (attention in the middle two and the mid block),
  // 4 transformer layers each, 64-wide heads, cross-attention 1280 (OpenCLIP
  // bigG alone), add_embedding 2560 wide (pooled 1280 + 5 time ids x 256).
  static UNetConfig sdxl_refiner();
  static Result<UNetConfig> from_json(const nlohmann::json& j, const std::string& where);
  static Result<UNetConfig> from_weights(const WeightSource& w);
  nlohmann::json to_json() const;

  int64_t time_embed_dim() const { return 4 * block_out_channels[0]; }
  bool is_sdxl() const { return addition_embed_type == "text_time"; }
  Status validate(const std::string& where) const;
};

// One UNet evaluation's inputs. sample [N, in, h, w], encoder_hidden_states
// [N, S, cross_attention_dim] and text_embeds [N, P] are tensors of the
// backend in the model's precision; timesteps and time_ids are host values
// (N and N*K, K time ids per row: P + K * addition_time_embed_dim must be
// projection_class_embeddings_input_dim; SDXL base 6, refiner 5).
struct UNetInputs {
  const kernels::Tensor* sample = nullptr;
  std::vector<float> timesteps;
  const kernels::Tensor* encoder_hidden_states = nullptr;
  const kernels::Tensor* text_embeds = nullptr;  // SDXL only
  std::vector<float> time_ids;                   // SDXL only
  // The same values already on the device as contiguous f32 ([N] and [N, K]);
  // when set they are used instead of the host vectors, so that forward()
  // makes no host-to-device copy (a captured graph replays with new values
  // written into these tensors).
  const kernels::Tensor* timesteps_device = nullptr;
  const kernels::Tensor* time_ids_device = nullptr;
  // The cross attentions' projections of encoder_hidden_states, made once for
  // a generation by project_context() (or nullptr: projected in every forward).
  const ContextKV* context_kv = nullptr;
};

class UNet {
 public:
  // `fp8` on: every Linear / GEGLU weight and the convolutions fp8.convs
  // takes in their e4m3 forms (the precision fp8: codes + a scale a row or
  // output channel, the rest in `precision`); FailedPrecondition with the
  // backend's reason where it has no fp8 products.
  static Result<UNet> load(const UNetConfig& cfg, const WeightSource& weights, kernels::Backend& backend,
                           kernels::DType precision, Fp8Weights fp8 = {});
  static Result<std::vector<ParamSpec>> parameters(const UNetConfig& cfg);

  // The model output (noise prediction) [N, out, h, w] in the model's precision.
  // InvalidArgument for shapes/dtypes that do not fit the config.
  Result<DeviceTensor> forward(kernels::Backend& be, const UNetInputs& in) const;
  // Every cross attention's k | v projection of `encoder_hidden_states`, for
  // UNetInputs::context_kv (the UNet must stay where it is while they are used).
  Result<ContextKV> project_context(kernels::Backend& be, const kernels::Tensor& encoder_hidden_states) const;

  const UNetConfig& config() const { return cfg_; }
  kernels::DType precision() const { return dtype_; }
  // The weights this UNet holds in e4m3, as load was told.
  const Fp8Weights& fp8_weights() const { return fp8_; }
  // Where each parameter lives on the device (a LoRA switch rewrites some in
  // place: WeightLoader::rewrite, engine/lora/lora_rebind.h).
  const std::vector<BoundParam>& bound_params() const { return bound_; }

 private:
  struct DownBlock {
    std::vector<ResnetBlock2D> resnets;
    std::vector<Transformer2DModel> attentions;  // empty for DownBlock2D
    std::vector<Downsample2D> downsamplers;      // 0 or 1
  };
  struct UpBlock {
    std::vector<ResnetBlock2D> resnets;
    std::vector<Transformer2DModel> attentions;
    std::vector<Upsample2D> upsamplers;
  };
  static Status bind_all(UNet& m, WeightBinder& b);
  Result<DeviceTensor> time_embedding(kernels::Backend& be, const UNetInputs& in, int64_t n) const;
  // Time ids per batch row (0 without any).
  static int64_t time_id_count(const UNetInputs& in, int64_t n);
  // InvalidArgument unless ctx is [n, S, cross_attention_dim] in the model precision (n < 0: any batch).
  Status check_context(const kernels::Tensor& ctx, int64_t n) const;

  UNetConfig cfg_;
  kernels::DType dtype_ = kernels::DType::kF32;
  Conv2d conv_in_, conv_out_;
  Linear time_linear_1_, time_linear_2_;
  Linear add_linear_1_, add_linear_2_;
  std::vector<DownBlock> down_;
  ResnetBlock2D mid_res0_, mid_res1_;
  Transformer2DModel mid_attn_;
  std::vector<UpBlock> up_;
  GroupNorm norm_out_;
  std::vector<kernels::Buffer> weights_;
  std::vector<BoundParam> bound_;
  Fp8Weights fp8_;
};

}  // namespace hipq::engine
