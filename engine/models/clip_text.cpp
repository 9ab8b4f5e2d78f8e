#include "engine/models/clip_text.h"

#include <algorithm>
#include <cmath>

#include "engine/models/config_json.h"
#include "engine/models/weight_binder.h"

namespace hipq::engine {

using kernels::Tensor;

ClipTextConfig ClipTextConfig::clip_vit_l14() { return ClipTextConfig{}; }

ClipTextConfig ClipTextConfig::open_clip_bigg14() {
  ClipTextConfig c;
  c.hidden_size = 1280;
  c.intermediate_size = 5120;
  c.num_hidden_layers = 32;
  c.num_attention_heads = 20;
  c.hidden_act = "gelu";
  c.projection_dim = 1280;
  c.with_projection = true;
  return c;
}

ClipTextConfig ClipTextConfig::open_clip_h14_sd2() {
  ClipTextConfig c;
  c.hidden_size = 1024;
  c.intermediate_size = 4096;
  c.num_hidden_layers = 23;  // of OpenCLIP's 24: SD 2.x conditions on the penultimate layer
  c.num_attention_heads = 16;
  c.hidden_act = "gelu";
  c.projection_dim = 512;
  c.with_projection = false;
  return c;
}

Result<ClipTextConfig> ClipTextConfig::from_json(const nlohmann::json& j, const std::string& where) {
  ConfigReader r(j, where);
  ClipTextConfig c;
  HIPQ_ASSIGN_OR_RETURN(c.vocab_size, r.integer("vocab_size", c.vocab_size));
  HIPQ_ASSIGN_OR_RETURN(c.hidden_size, r.integer("hidden_size", c.hidden_size));
  HIPQ_ASSIGN_OR_RETURN(c.intermediate_size, r.integer("intermediate_size", c.intermediate_size));
  HIPQ_ASSIGN_OR_RETURN(int64_t layers, r.integer("num_hidden_layers", c.num_hidden_layers));
  HIPQ_ASSIGN_OR_RETURN(int64_t heads, r.integer("num_attention_heads", c.num_attention_heads));
  c.num_hidden_layers = static_cast<int>(layers);
  c.num_attention_heads = static_cast<int>(heads);
  HIPQ_ASSIGN_OR_RETURN(c.max_position_embeddings, r.integer("max_position_embeddings", c.max_position_embeddings));
  HIPQ_ASSIGN_OR_RETURN(c.hidden_act, r.string("hidden_act", c.hidden_act));
  HIPQ_ASSIGN_OR_RETURN(double eps, r.number("layer_norm_eps", c.layer_norm_eps));
  c.layer_norm_eps = static_cast<float>(eps);
  HIPQ_ASSIGN_OR_RETURN(c.projection_dim, r.integer("projection_dim", c.projection_dim));
  HIPQ_ASSIGN_OR_RETURN(int64_t bos, r.integer("bos_token_id", c.bos_token_id));
  HIPQ_ASSIGN_OR_RETURN(int64_t eos, r.integer("eos_token_id", c.eos_token_id));
  HIPQ_ASSIGN_OR_RETURN(int64_t pad, r.integer("pad_token_id", c.pad_token_id));
  c.bos_token_id = static_cast<int>(bos);
  c.eos_token_id = static_cast<int>(eos);
  c.pad_token_id = static_cast<int>(pad);
  HIPQ_ASSIGN_OR_RETURN(std::vector<std::string> arch, r.string_list("architectures", {}));
  c.with_projection = std::find(arch.begin(), arch.end(), "CLIPTextModelWithProjection") != arch.end();
  if (c.hidden_act != "quick_gelu" && c.hidden_act != "gelu")
    return r.error("hidden_act", "is '" + c.hidden_act + "'; supported: quick_gelu, gelu");
  if (c.num_attention_heads <= 0 || c.hidden_size % c.num_attention_heads != 0)
    return r.error("num_attention_heads", "does not divide hidden_size " + std::to_string(c.hidden_size));
  if (c.num_hidden_layers < 1) return r.error("num_hidden_layers", "must be at least 1");
  return c;
}

Result<ClipTextConfig> ClipTextConfig::from_weights(const WeightSource& w) {
  ClipTextConfig c;
  HIPQ_ASSIGN_OR_RETURN(TensorMeta tok, w.meta("text_model.embeddings.token_embedding.weight"));
  HIPQ_ASSIGN_OR_RETURN(TensorMeta pos, w.meta("text_model.embeddings.position_embedding.weight"));
  HIPQ_ASSIGN_OR_RETURN(TensorMeta fc1, w.meta("text_model.encoder.layers.0.mlp.fc1.weight"));
  if (tok.shape.size() != 2 || pos.shape.size() != 2 || fc1.shape.size() != 2)
    return Status::InvalidArgument(w.describe() + ": CLIP embedding / fc1 tensors are not 2-D");
  c.vocab_size = tok.shape[0];
  c.hidden_size = tok.shape[1];
  c.max_position_embeddings = pos.shape[0];
  c.intermediate_size = fc1.shape[0];
  int layers = 0;
  while (w.contains("text_model.encoder.layers." + std::to_string(layers) + ".mlp.fc1.weight")) ++layers;
  c.num_hidden_layers = layers;
  c.num_attention_heads = static_cast<int>(std::max<int64_t>(1, c.hidden_size / 64));
  c.hidden_act = c.hidden_size == 768 ? "quick_gelu" : "gelu";
  c.with_projection = w.contains("text_projection.weight");
  if (c.with_projection) {
    HIPQ_ASSIGN_OR_RETURN(TensorMeta proj, w.meta("text_projection.weight"));
    c.projection_dim = proj.shape[0];
  } else {
    c.projection_dim = c.hidden_size;
  }
  return c;
}

nlohmann::json ClipTextConfig::to_json() const {
  nlohmann::json j;
  j["architectures"] = {with_projection ? "CLIPTextModelWithProjection" : "CLIPTextModel"};
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = bos_token_id;
  j["dropout"] = 0.0;
  j["eos_token_id"] = eos_token_id;
  j["hidden_act"] = hidden_act;
  j["hidden_size"] = hidden_size;
  j["initializer_factor"] = 1.0;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = intermediate_size;
  j["layer_norm_eps"] = layer_norm_eps;
  j["max_position_embeddings"] = max_position_embeddings;
  j["model_type"] = "clip_text_model";
  j["num_attention_heads"] = num_attention_heads;
  j["num_hidden_layers"] = num_hidden_layers;
  j["pad_token_id"] = pad_token_id;
  j["projection_dim"] = projection_dim;
  j["torch_dtype"] = "float32";
  j["vocab_size"] = vocab_size;
  return j;
}

Status ClipTextModel::bind_all(ClipTextModel& m, WeightBinder& b) {
  const ClipTextConfig& c = m.cfg_;
  const int64_t d = c.hidden_size;
  HIPQ_ASSIGN_OR_RETURN(m.token_embedding_, b.bind("text_model.embeddings.token_embedding.weight",
                                                   {c.vocab_size, d}, ParamInit::normal(0.02f)));
  HIPQ_ASSIGN_OR_RETURN(m.position_embedding_, b.bind("text_model.embeddings.position_embedding.weight",
                                                      {c.max_position_embeddings, d}, ParamInit::normal(0.01f)));
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "text_model.encoder.layers." + std::to_string(i);
    Layer l;
    HIPQ_ASSIGN_OR_RETURN(l.ln1, LayerNorm::bind(b, p + ".layer_norm1", d, c.layer_norm_eps));
    HIPQ_ASSIGN_OR_RETURN(l.q, Linear::bind(b, p + ".self_attn.q_proj", d, d));
    HIPQ_ASSIGN_OR_RETURN(l.k, Linear::bind(b, p + ".self_attn.k_proj", d, d));
    HIPQ_ASSIGN_OR_RETURN(l.v, Linear::bind(b, p + ".self_attn.v_proj", d, d));
    HIPQ_ASSIGN_OR_RETURN(l.o, Linear::bind(b, p + ".self_attn.out_proj", d, d));
    HIPQ_ASSIGN_OR_RETURN(l.ln2, LayerNorm::bind(b, p + ".layer_norm2", d, c.layer_norm_eps));
    HIPQ_ASSIGN_OR_RETURN(l.fc1, Linear::bind(b, p + ".mlp.fc1", d, c.intermediate_size));
    HIPQ_ASSIGN_OR_RETURN(l.fc2, Linear::bind(b, p + ".mlp.fc2", c.intermediate_size, d));
    m.layers_.push_back(std::move(l));
  }
  HIPQ_ASSIGN_OR_RETURN(m.final_ln_, LayerNorm::bind(b, "text_model.final_layer_norm", d, c.layer_norm_eps));
  if (c.with_projection) {
    HIPQ_ASSIGN_OR_RETURN(m.projection_, Linear::bind(b, "text_projection", d, c.projection_dim, false));
  }
  return Status::Ok();
}

Result<ClipTextModel> ClipTextModel::load(const ClipTextConfig& cfg, const WeightSource& weights,
                                          kernels::Backend& backend, kernels::DType precision) {
  ClipTextModel m;
  m.cfg_ = cfg;
  m.dtype_ = precision;
  WeightLoader loader(weights, backend, precision);
  HIPQ_RETURN_IF_ERROR(bind_all(m, loader));
  m.weights_ = loader.take_buffers();
  m.bound_ = loader.take_bound();
  return m;
}

Result<std::vector<ParamSpec>> ClipTextModel::parameters(const ClipTextConfig& cfg) {
  ClipTextModel m;
  m.cfg_ = cfg;
  SpecRecorder rec;
  HIPQ_RETURN_IF_ERROR(bind_all(m, rec));
  return rec.take_specs();
}

int64_t ClipTextModel::weight_bytes() const {
  int64_t n = 0;
  for (const auto& b : weights_) n += static_cast<int64_t>(b.bytes());
  return n;
}

Result<ClipTextOutput> ClipTextModel::forward(kernels::Backend& be, const std::vector<int32_t>& ids, int batch,
                                              const ClipTextRequest& req) const {
  if (batch <= 0 || ids.empty() || ids.size() % static_cast<size_t>(batch) != 0)
    return Status::InvalidArgument("ClipTextModel: " + std::to_string(ids.size()) +
                                   " ids do not form a batch of " + std::to_string(batch));
  const int64_t seq = static_cast<int64_t>(ids.size()) / batch;
  if (seq > cfg_.max_position_embeddings)
    return Status::InvalidArgument("ClipTextModel: sequence of " + std::to_string(seq) +
                                   " tokens is longer than max_position_embeddings " +
                                   std::to_string(cfg_.max_position_embeddings));
  for (int32_t id : ids)
    if (id < 0 || id >= cfg_.vocab_size)
      return Status::InvalidArgument("ClipTextModel: token id " + std::to_string(id) +
                                     " is outside the vocabulary of " + std::to_string(cfg_.vocab_size));
  const int64_t d = cfg_.hidden_size;
  const kernels::Activation act =
      cfg_.hidden_act == "gelu" ? kernels::Activation::kGelu : kernels::Activation::kQuickGelu;

  HIPQ_ASSIGN_OR_RETURN(DeviceTensor id_t, DeviceTensor::from_host_i32(be, ids.data(), {batch, seq}));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor x, DeviceTensor::make(be, dtype_, {batch, seq, d}));
  HIPQ_RETURN_IF_ERROR(be.embedding(id_t.t, token_embedding_, x.t));
  Tensor pos = position_embedding_.slice(0, 0, seq);  // positions 0..seq-1: [S, D]
  HIPQ_RETURN_IF_ERROR(be.binary(kernels::BinaryOp::kAdd, x.t, pos, x.t));

  const bool need_last = req.last_hidden_state || req.pooled;
  const int run_layers = need_last ? cfg_.num_hidden_layers : cfg_.num_hidden_layers - 1;
  ClipTextOutput out;
  kernels::AttentionOptions ao;
  ao.heads = cfg_.num_attention_heads;
  ao.scale = 1.0f / std::sqrt(static_cast<float>(d / cfg_.num_attention_heads));
  ao.causal = true;
  for (int i = 0; i < run_layers; ++i) {
    if (req.penultimate && i == cfg_.num_hidden_layers - 1) {
      HIPQ_ASSIGN_OR_RETURN(out.penultimate, contiguous_copy(be, x.t, dtype_));
    }
    const Layer& l = layers_[static_cast<size_t>(i)];
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor h, l.ln1(be, x.t));
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor q, l.q(be, h.t));
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor k, l.k(be, h.t));
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor v, l.v(be, h.t));
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor a, DeviceTensor::make(be, dtype_, {batch, seq, d}));
    HIPQ_RETURN_IF_ERROR(be.attention(q.t, k.t, v.t, a.t, ao));
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor x1, l.o(be, a.t, kernels::Activation::kNone, &x.t));
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor h2, l.ln2(be, x1.t));
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor f, l.fc1(be, h2.t, act));
    HIPQ_ASSIGN_OR_RETURN(x, l.fc2(be, f.t, kernels::Activation::kNone, &x1.t));
  }
  if (req.penultimate && !out.penultimate.buffer.data()) {
    // Only reached when the last layer was skipped: x is its input.
    out.penultimate = std::move(x);
    return out;
  }
  if (!need_last) return out;
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor last, final_ln_(be, x.t));
  if (req.pooled) {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor pooled, DeviceTensor::make(be, dtype_, {batch, d}));
    for (int b = 0; b < batch; ++b) {
      // The reference pools at argmax(ids): the first EOS (the largest id).
      auto row = ids.begin() + static_cast<int64_t>(b) * seq;
      const int64_t eos_pos = std::max_element(row, row + seq) - row;
      Tensor src = last.t.slice(0, b, 1).slice(1, eos_pos, 1).reshape({1, d});
      Tensor dst = pooled.t.slice(0, b, 1);
      HIPQ_RETURN_IF_ERROR(be.copy(src, dst));
    }
    if (cfg_.with_projection) {
      HIPQ_ASSIGN_OR_RETURN(out.pooled, projection_(be, pooled.t));
    } else {
      out.pooled = std::move(pooled);
    }
  }
  if (req.last_hidden_state) out.last_hidden_state = std::move(last);
  return out;
}

}  // namespace hipq::engine
