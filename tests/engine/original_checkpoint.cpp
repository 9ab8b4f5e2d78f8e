#include "tests/engine/original_checkpoint.h"

#include <regex>
#include <utility>
#include <vector>

#include "engine/safetensors.h"

namespace hipq::engine::testing {
namespace {

using Tensors = std::vector<std::pair<std::string, HostTensor>>;

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

std::string replace_prefix(const std::string& s, const std::string& from, const std::string& to) {
  return to + s.substr(from.size());
}

// diffusers ResnetBlock2D -> ldm ResBlock (UNet).
std::string unet_resnet(const std::string& rest) {
  static const std::pair<const char*, const char*> kMap[] = {
      {"norm1.", "in_layers.0."}, {"conv1.", "in_layers.2."},        {"time_emb_proj.", "emb_layers.1."},
      {"norm2.", "out_layers.0."}, {"conv2.", "out_layers.3."},      {"conv_shortcut.", "skip_connection."}};
  for (const auto& [hf, sd] : kMap)
    if (starts_with(rest, hf)) return replace_prefix(rest, hf, sd);
  return rest;
}

// convert_diffusers_to_original_stable_diffusion.py's unet tables, for any
// number of blocks with `layers` resnets per down block.
Result<std::string> unet_key(const std::string& n, int layers, const std::vector<bool>& up_has_attention) {
  static const std::pair<const char*, const char*> kFixed[] = {
      {"time_embedding.linear_1.", "time_embed.0."}, {"time_embedding.linear_2.", "time_embed.2."},
      {"add_embedding.linear_1.", "label_emb.0.0."}, {"add_embedding.linear_2.", "label_emb.0.2."},
      {"conv_in.", "input_blocks.0.0."},             {"conv_norm_out.", "out.0."},
      {"conv_out.", "out.2."}};
  for (const auto& [hf, sd] : kFixed)
    if (starts_with(n, hf)) return replace_prefix(n, hf, sd);
  std::smatch m;
  static const std::regex kDown(R"(^down_blocks\.(\d+)\.(resnets|attentions|downsamplers)\.(\d+)\.(.*)$)");
  static const std::regex kUp(R"(^up_blocks\.(\d+)\.(resnets|attentions|upsamplers)\.(\d+)\.(.*)$)");
  static const std::regex kMid(R"(^mid_block\.(resnets|attentions)\.(\d+)\.(.*)$)");
  const int per = layers + 1;
  if (std::regex_match(n, m, kDown)) {
    const int i = std::stoi(m[1]), j = std::stoi(m[3]);
    const std::string kind = m[2], rest = m[4];
    if (kind == "resnets") return "input_blocks." + std::to_string(per * i + j + 1) + ".0." + unet_resnet(rest);
    if (kind == "attentions") return "input_blocks." + std::to_string(per * i + j + 1) + ".1." + rest;
    // downsamplers.0.conv.* -> input_blocks.N.0.op.*
    if (!starts_with(rest, "conv.")) return Status::Internal("unexpected downsampler tensor " + n);
    return "input_blocks." + std::to_string(per * (i + 1)) + ".0.op." + rest.substr(5);
  }
  if (std::regex_match(n, m, kUp)) {
    const int i = std::stoi(m[1]), j = std::stoi(m[3]);
    const std::string kind = m[2], rest = m[4];
    if (kind == "resnets") return "output_blocks." + std::to_string(per * i + j) + ".0." + unet_resnet(rest);
    if (kind == "attentions") return "output_blocks." + std::to_string(per * i + j) + ".1." + rest;
    // The upsampler follows the last layer's resnet (and attention, when the block has one).
    const int slot = up_has_attention.at(static_cast<size_t>(i)) ? 2 : 1;
    return "output_blocks." + std::to_string(per * i + layers) + "." + std::to_string(slot) + "." + rest;
  }
  if (std::regex_match(n, m, kMid)) {
    const int k = std::stoi(m[2]);
    if (std::string(m[1]) == "attentions") return "middle_block.1." + std::string(m[3]);
    return "middle_block." + std::to_string(k == 0 ? 0 : 2) + "." + unet_resnet(m[3]);
  }
  return Status::Internal("unet tensor without an original name: " + n);
}

std::string vae_resnet(const std::string& rest) {
  return starts_with(rest, "conv_shortcut.") ? replace_prefix(rest, "conv_shortcut.", "nin_shortcut.") : rest;
}

// convert_diffusers_to_original_stable_diffusion.py's vae tables. *squeeze is
// set for the mid attention's linear weights, stored as 1x1 convs.
Result<std::string> vae_key(const std::string& n, int num_blocks, bool* to_conv) {
  *to_conv = false;
  std::smatch m;
  static const std::regex kDown(R"(^encoder\.down_blocks\.(\d+)\.(resnets\.(\d+)|downsamplers\.0)\.(.*)$)");
  static const std::regex kUp(R"(^decoder\.up_blocks\.(\d+)\.(resnets\.(\d+)|upsamplers\.0)\.(.*)$)");
  static const std::regex kMidRes(R"(^(encoder|decoder)\.mid_block\.resnets\.(\d+)\.(.*)$)");
  static const std::regex kMidAttn(R"(^(encoder|decoder)\.mid_block\.attentions\.0\.(group_norm|to_q|to_k|to_v|to_out\.0)\.(.*)$)");
  if (std::regex_match(n, m, kDown)) {
    const std::string b = "encoder.down." + std::string(m[1]) + ".";
    if (m[3].matched) return b + "block." + std::string(m[3]) + "." + vae_resnet(m[4]);
    return b + "downsample." + std::string(m[4]);
  }
  if (std::regex_match(n, m, kUp)) {
    const std::string b = "decoder.up." + std::to_string(num_blocks - 1 - std::stoi(m[1])) + ".";
    if (m[3].matched) return b + "block." + std::string(m[3]) + "." + vae_resnet(m[4]);
    return b + "upsample." + std::string(m[4]);
  }
  if (std::regex_match(n, m, kMidRes))
    return std::string(m[1]) + ".mid.block_" + std::to_string(std::stoi(m[2]) + 1) + "." + vae_resnet(m[3]);
  if (std::regex_match(n, m, kMidAttn)) {
    static const std::map<std::string, std::string> kAttn = {
        {"group_norm", "norm"}, {"to_q", "q"}, {"to_k", "k"}, {"to_v", "v"}, {"to_out.0", "proj_out"}};
    const std::string part = m[2];
    *to_conv = part != "group_norm" && std::string(m[3]) == "weight";
    return std::string(m[1]) + ".mid.attn_1." + kAttn.at(part) + "." + std::string(m[3]);
  }
  for (const char* coder : {"encoder.", "decoder."}) {
    if (starts_with(n, std::string(coder) + "conv_norm_out."))
      return replace_prefix(n, std::string(coder) + "conv_norm_out.", std::string(coder) + "norm_out.");
  }
  return n;  // conv_in, conv_out, quant_conv, post_quant_conv keep their names
}

HostTensor reshaped(const HostTensor& t, std::vector<int64_t> shape) {
  return HostTensor::from_f32(t.to_f32(), std::move(shape));
}

HostTensor transposed(const HostTensor& t) {
  const std::vector<float> v = t.to_f32();
  const int64_t r = t.shape.at(0), c = t.shape.at(1);
  std::vector<float> out(v.size());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) out[static_cast<size_t>(j * r + i)] = v[static_cast<size_t>(i * c + j)];
  return HostTensor::from_f32(std::move(out), {c, r});
}

HostTensor rows(const std::vector<HostTensor>& parts) {
  std::vector<float> all;
  std::vector<int64_t> shape = parts.at(0).shape;
  shape[0] = 0;
  for (const HostTensor& p : parts) {
    auto v = p.to_f32();
    all.insert(all.end(), v.begin(), v.end());
    shape[0] += p.shape.at(0);
  }
  return HostTensor::from_f32(std::move(all), std::move(shape));
}

HostTensor scaled(const HostTensor& t, float s) {
  auto v = t.to_f32();
  for (float& x : v) x *= s;
  return HostTensor::from_f32(std::move(v), t.shape);
}

Status add_clip_l(const WeightSource& w, const std::string& prefix, Tensors& out) {
  for (const std::string& n : w.names()) {
    HIPQ_ASSIGN_OR_RETURN(HostTensor t, w.get(n));
    out.emplace_back(prefix + n, std::move(t));
  }
  return Status::Ok();
}

// transformers' CLIPTextModel(WithProjection) -> OpenCLIP's text tower.
// extra_layer: SD 2.x, whose checkpoints hold the tower's last layer too.
Status add_open_clip(const WeightSource& w, const std::string& prefix, bool extra_layer, Tensors& out) {
  int layers = 0;
  while (w.contains("text_model.encoder.layers." + std::to_string(layers) + ".mlp.fc1.weight")) ++layers;
  auto get = [&](const std::string& n) { return w.get(n); };
  HIPQ_ASSIGN_OR_RETURN(HostTensor tok, get("text_model.embeddings.token_embedding.weight"));
  out.emplace_back(prefix + "token_embedding.weight", tok);
  HIPQ_ASSIGN_OR_RETURN(HostTensor pos, get("text_model.embeddings.position_embedding.weight"));
  out.emplace_back(prefix + "positional_embedding", pos);
  for (const char* p : {"weight", "bias"}) {
    HIPQ_ASSIGN_OR_RETURN(HostTensor t, get(std::string("text_model.final_layer_norm.") + p));
    out.emplace_back(prefix + "ln_final." + p, t);
  }
  const int64_t width = tok.shape.at(1);
  if (w.contains("text_projection.weight")) {
    HIPQ_ASSIGN_OR_RETURN(HostTensor proj, get("text_projection.weight"));
    out.emplace_back(prefix + "text_projection", transposed(proj));  // OpenCLIP: x @ text_projection
  } else {
    // SD 2.x checkpoints carry the projection diffusers' CLIPTextModel leaves out.
    std::vector<float> eye(static_cast<size_t>(width * width), 0.f);
    for (int64_t i = 0; i < width; ++i) eye[static_cast<size_t>(i * width + i)] = 1.f;
    out.emplace_back(prefix + "text_projection", HostTensor::from_f32(std::move(eye), {width, width}));
  }
  out.emplace_back(prefix + "logit_scale", HostTensor::from_f32({4.6052f}, {}));
  auto layer = [&](int from, int to, float scale) -> Status {
    const std::string l = "text_model.encoder.layers." + std::to_string(from) + ".";
    const std::string r = prefix + "transformer.resblocks." + std::to_string(to) + ".";
    auto one = [&](const std::string& n) -> Result<HostTensor> {
      HIPQ_ASSIGN_OR_RETURN(HostTensor t, get(l + n));
      return scale == 1.f ? t : scaled(t, scale);
    };
    for (const char* kind : {"weight", "bias"}) {
      std::vector<HostTensor> qkv;
      for (const char* p : {"q_proj", "k_proj", "v_proj"}) {
        HIPQ_ASSIGN_OR_RETURN(HostTensor t, one(std::string("self_attn.") + p + "." + kind));
        qkv.push_back(std::move(t));
      }
      out.emplace_back(r + "attn.in_proj_" + kind, rows(qkv));
    }
    static const std::pair<const char*, const char*> kMap[] = {{"self_attn.out_proj.", "attn.out_proj."},
                                                               {"layer_norm1.", "ln_1."},
                                                               {"layer_norm2.", "ln_2."},
                                                               {"mlp.fc1.", "mlp.c_fc."},
                                                               {"mlp.fc2.", "mlp.c_proj."}};
    for (const auto& [hf, oc] : kMap) {
      for (const char* kind : {"weight", "bias"}) {
        HIPQ_ASSIGN_OR_RETURN(HostTensor t, one(std::string(hf) + kind));
        out.emplace_back(r + oc + kind, std::move(t));
      }
    }
    return Status::Ok();
  };
  for (int i = 0; i < layers; ++i) HIPQ_RETURN_IF_ERROR(layer(i, i, 1.f));
  // A last layer of its own values (layer 0's, scaled): diffusers' text
  // encoder must not run it.
  if (extra_layer) HIPQ_RETURN_IF_ERROR(layer(0, layers, 1.7f));
  return Status::Ok();
}

Result<const WeightSource*> weights(const ModelComponents& m, const std::string& key) {
  auto it = m.weights.find(key);
  if (it == m.weights.end()) return Status::NotFound("model has no " + key);
  return it->second.get();
}

}  // namespace

Status write_original_checkpoint(const ModelComponents& m, const std::filesystem::path& out,
                                 const std::map<std::string, std::string>& metadata) {
  const std::string& family = m.family;
  if (family != "sd1" && family != "sd2" && family != "sdxl")
    return Status::InvalidArgument("write_original_checkpoint: family '" + family + "'");
  Tensors tensors;

  HIPQ_ASSIGN_OR_RETURN(const WeightSource* unet, weights(m, "unet"));
  const nlohmann::json& ucfg = m.configs.at("unet");
  const int layers = ucfg.at("layers_per_block").get<int>();
  std::vector<bool> up_attention;
  for (const auto& t : ucfg.at("up_block_types")) up_attention.push_back(t.get<std::string>() == "CrossAttnUpBlock2D");
  for (const std::string& n : unet->names()) {
    HIPQ_ASSIGN_OR_RETURN(std::string key, unet_key(n, layers, up_attention));
    HIPQ_ASSIGN_OR_RETURN(HostTensor t, unet->get(n));
    tensors.emplace_back("model.diffusion_model." + key, std::move(t));
  }

  HIPQ_ASSIGN_OR_RETURN(const WeightSource* vae, weights(m, "vae"));
  const int vae_blocks = static_cast<int>(m.configs.at("vae").at("block_out_channels").size());
  for (const std::string& n : vae->names()) {
    bool to_conv = false;
    HIPQ_ASSIGN_OR_RETURN(std::string key, vae_key(n, vae_blocks, &to_conv));
    HIPQ_ASSIGN_OR_RETURN(HostTensor t, vae->get(n));
    if (to_conv) t = reshaped(t, {t.shape.at(0), t.shape.at(1), 1, 1});
    tensors.emplace_back("first_stage_model." + key, std::move(t));
  }

  // The SDXL refiner (sgm's sd_xl_refiner.yaml): OpenCLIP bigG is its only
  // embedder, conditioner.embedders.0.model.*.
  if (family == "sdxl" && !m.weights.count("text_encoder")) {
    HIPQ_ASSIGN_OR_RETURN(const WeightSource* te2, weights(m, "text_encoder_2"));
    HIPQ_RETURN_IF_ERROR(add_open_clip(*te2, "conditioner.embedders.0.model.", false, tensors));
    return write_safetensors(out, tensors, metadata);
  }
  HIPQ_ASSIGN_OR_RETURN(const WeightSource* te, weights(m, "text_encoder"));
  if (family == "sd1") HIPQ_RETURN_IF_ERROR(add_clip_l(*te, "cond_stage_model.transformer.", tensors));
  if (family == "sd2") HIPQ_RETURN_IF_ERROR(add_open_clip(*te, "cond_stage_model.model.", true, tensors));
  if (family == "sdxl") {
    HIPQ_RETURN_IF_ERROR(add_clip_l(*te, "conditioner.embedders.0.transformer.", tensors));
    HIPQ_ASSIGN_OR_RETURN(const WeightSource* te2, weights(m, "text_encoder_2"));
    HIPQ_RETURN_IF_ERROR(add_open_clip(*te2, "conditioner.embedders.1.model.", false, tensors));
  }
  return write_safetensors(out, tensors, metadata);
}

}  // namespace hipq::engine::testing
