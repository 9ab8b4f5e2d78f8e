// CLIP text transformers: transformers' CLIPTextModel (CLIP ViT-L/14, SD 1.x
// and SDXL's text_encoder) and CLIPTextModelWithProjection (OpenCLIP
// ViT-bigG/14, SDXL's text_encoder_2), keys exactly as their safetensors:
//   text_model.embeddings.token_embedding.weight       [vocab, D]
//   text_model.embeddings.position_embedding.weight    [max_positions, D]
//   text_model.encoder.layers.{i}.layer_norm1 / layer_norm2 .{weight,bias}
//   text_model.encoder.layers.{i}.self_attn.{q,k,v,out}_proj.{weight,bias}
//   text_model.encoder.layers.{i}.mlp.fc1 [I, D] / fc2 [D, I] .{weight,bias}
//   text_model.final_layer_norm.{weight,bias}
//   text_projection.weight [P, D]                        (with projection only)
// Pre-LayerNorm blocks, causal self-attention, activation quick_gelu (CLIP)
// or gelu (OpenCLIP), final layer norm.
//
// What the pipelines consume:
//  - SDXL: hidden_states[-2] of both encoders (the input of the last layer, NOT
//    final-layer-normed), concatenated to 2048 wide by the caller, and the
//    pooled projected embedding of encoder 2: final_layer_norm(last hidden) at
//    the EOS position (argmax of the ids, the reference's rule) @ text_projection^T.
//  - SD 1.x / 2.x: last_hidden_state (final layer norm applied).
//
// Ownership: a ClipTextModel owns its weights (device Buffers) and must not
// outlive the Backend it was loaded on. Thread safety: forward() uses the
// backend's one thread; the model is immutable after load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/models/device_tensor.h"
#include "engine/models/layers.h"
#include "engine/models/weight_binder.h"
#include "engine/weight_source.h"
#include "kernels/backend.h"

namespace hipq::engine {

struct ClipTextConfig {
  int64_t vocab_size = 49408;
  int64_t hidden_size = 768;
  int64_t intermediate_size = 3072;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int64_t max_position_embeddings = 77;
  std::string hidden_act = "quick_gelu";  // "quick_gelu" | "gelu"
  float layer_norm_eps = 1e-5f;
  int64_t projection_dim = 768;
  bool with_projection = false;  // CLIPTextModelWithProjection
  int bos_token_id = 0, eos_token_id = 2, pad_token_id = 1;  // as the SD configs write them

  // CLIP ViT-L/14 text (SD 1.x text_encoder, SDXL text_encoder).
  static ClipTextConfig clip_vit_l14();
  // OpenCLIP ViT-bigG/14 text with projection (SDXL text_encoder_2).
  static ClipTextConfig open_clip_bigg14();
  // OpenCLIP ViT-H/14 text as SD 2.x's diffusers text_encoder holds it (23 of
  // its 24 layers, no projection).
  static ClipTextConfig open_clip_h14_sd2();
  // transformers' CLIPTextConfig json. with_projection from "architectures".
  static Result<ClipTextConfig> from_json(const nlohmann::json& j, const std::string& where);
  // From tensor shapes (heads = hidden / 64, act quick_gelu for width 768 else gelu).
  static Result<ClipTextConfig> from_weights(const WeightSource& w);
  // The config.json transformers writes for this model.
  nlohmann::json to_json() const;
};

// What forward() should compute.
struct ClipTextRequest {
  bool last_hidden_state = true;  // final-layer-normed output of the last layer
  bool penultimate = false;       // hidden_states[-2]
  bool pooled = false;            // projected (with projection) or plain pooled output
};

struct ClipTextOutput {
  DeviceTensor last_hidden_state;  // [B, S, D] (empty unless requested)
  DeviceTensor penultimate;        // [B, S, D]
  DeviceTensor pooled;             // [B, P] with projection, else [B, D]
};

class ClipTextModel {
 public:
  // Binds every tensor of `weights` (NotFound/InvalidArgument naming the
  // tensor and the source) and uploads it in `precision`.
  static Result<ClipTextModel> load(const ClipTextConfig& cfg, const WeightSource& weights,
                                    kernels::Backend& backend, kernels::DType precision);
  // The parameter list of a config (names, shapes, default init).
  static Result<std::vector<struct ParamSpec>> parameters(const ClipTextConfig& cfg);

  // ids: batch * seq token ids (row-major), seq <= max_position_embeddings.
  // InvalidArgument for an id outside the vocabulary or a bad length.
  Result<ClipTextOutput> forward(kernels::Backend& be, const std::vector<int32_t>& ids, int batch,
                                 const ClipTextRequest& req) const;

  const ClipTextConfig& config() const { return cfg_; }
  kernels::DType precision() const { return dtype_; }
  int64_t weight_bytes() const;
  // Where each parameter lives on the device (a LoRA switch rewrites some in
  // place: WeightLoader::rewrite, engine/lora/lora_rebind.h).
  const std::vector<BoundParam>& bound_params() const { return bound_; }

 private:
  struct Layer {
    LayerNorm ln1, ln2;
    Linear q, k, v, o, fc1, fc2;
  };
  static Status bind_all(ClipTextModel& m, class WeightBinder& b);

  ClipTextConfig cfg_;
  kernels::DType dtype_ = kernels::DType::kF32;
  kernels::Tensor token_embedding_, position_embedding_;
  std::vector<Layer> layers_;
  LayerNorm final_ln_;
  Linear projection_;
  std::vector<kernels::Buffer> weights_;
  std::vector<BoundParam> bound_;
};

}  // namespace hipq::engine
