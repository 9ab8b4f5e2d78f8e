#include "engine/checkpoint_keys.h"

#include <algorithm>
#include <cstring>

namespace hipq::engine {
namespace {

using kernels::DType;

// How a diffusers tensor is made from a checkpoint tensor.
enum class Op { kDirect, kRows, kTranspose, kSqueeze };

struct Entry {
  std::string source;  // checkpoint name
  Op op = Op::kDirect;
  int part = 0;        // kRows: which third (q, k, v)
};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "a.b.c" -> components.
std::vector<std::string> split_dots(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t d = s.find('.', start);
    out.emplace_back(s.substr(start, d == std::string_view::npos ? std::string_view::npos : d - start));
    if (d == std::string_view::npos) break;
    start = d + 1;
  }
  return out;
}

std::string join_from(const std::vector<std::string>& parts, size_t from) {
  std::string out;
  for (size_t i = from; i < parts.size(); ++i) out += (out.empty() ? "" : ".") + parts[i];
  return out;
}

// ResBlock internals: ldm name -> diffusers name.
std::string resnet_inner(const std::string& rest) {
  static const std::pair<const char*, const char*> kMap[] = {
      {"in_layers.0.", "norm1."},          {"in_layers.2.", "conv1."},  {"emb_layers.1.", "time_emb_proj."},
      {"out_layers.0.", "norm2."},         {"out_layers.3.", "conv2."}, {"skip_connection.", "conv_shortcut."},
      {"nin_shortcut.", "conv_shortcut."},
  };
  for (const auto& [from, to] : kMap) {
    if (starts_with(rest, from)) return std::string(to) + rest.substr(std::strlen(from));
  }
  return rest;  // norm1/conv1/norm2/conv2 of the VAE keep their names
}

constexpr int kLayersPerBlock = 2;  // SD 1.x, 2.x and SDXL

}  // namespace

// model.diffusion_model.<rest> -> diffusers UNet name ("" = not mapped).
std::string sgm_unet_name(const std::string& rest) {
  const auto p = split_dots(rest);
  if (p.size() < 2) return {};
  auto rest_from = [&](size_t i) { return join_from(p, i); };
  if (p[0] == "time_embed") return (p[1] == "0" ? "time_embedding.linear_1." : "time_embedding.linear_2.") + rest_from(2);
  if (p[0] == "label_emb" && p.size() > 3)
    return (p[2] == "0" ? "add_embedding.linear_1." : "add_embedding.linear_2.") + rest_from(3);
  if (p[0] == "out") return (p[1] == "0" ? "conv_norm_out." : "conv_out.") + rest_from(2);
  if (p[0] == "input_blocks" && p.size() > 3) {
    const int i = std::stoi(p[1]);
    if (i == 0) return "conv_in." + rest_from(3);
    const int block = (i - 1) / (kLayersPerBlock + 1);
    const int layer = (i - 1) % (kLayersPerBlock + 1);
    const std::string b = "down_blocks." + std::to_string(block) + ".";
    if (layer == kLayersPerBlock) {
      if (p[3] == "op") return b + "downsamplers.0.conv." + rest_from(4);
      return {};
    }
    if (p[2] == "0") return b + "resnets." + std::to_string(layer) + "." + resnet_inner(rest_from(3));
    return b + "attentions." + std::to_string(layer) + "." + rest_from(3);
  }
  if (p[0] == "middle_block" && p.size() > 2) {
    if (p[1] == "0") return "mid_block.resnets.0." + resnet_inner(rest_from(2));
    if (p[1] == "1") return "mid_block.attentions.0." + rest_from(2);
    if (p[1] == "2") return "mid_block.resnets.1." + resnet_inner(rest_from(2));
    return {};
  }
  if (p[0] == "output_blocks" && p.size() > 3) {
    const int i = std::stoi(p[1]);
    const int block = i / (kLayersPerBlock + 1);
    const int layer = i % (kLayersPerBlock + 1);
    const std::string b = "up_blocks." + std::to_string(block) + ".";
    if (p[2] == "0") return b + "resnets." + std::to_string(layer) + "." + resnet_inner(rest_from(3));
    if (p[3] == "conv") return b + "upsamplers.0.conv." + rest_from(4);
    return b + "attentions." + std::to_string(layer) + "." + rest_from(3);
  }
  return {};
}

namespace {

// first_stage_model.<rest> -> diffusers AutoencoderKL name.
std::string vae_name(const std::string& rest, int num_up_blocks, Op* op) {
  const auto p = split_dots(rest);
  if (p.size() < 2) return rest;  // quant_conv.weight etc.
  auto rest_from = [&](size_t i) { return join_from(p, i); };
  const std::string& coder = p[0];
  if (coder != "encoder" && coder != "decoder") return rest;  // quant_conv, post_quant_conv
  if (p[1] == "norm_out") return coder + ".conv_norm_out." + rest_from(2);
  if (p[1] == "conv_in" || p[1] == "conv_out") return rest;
  if (p[1] == "down" && p.size() > 4) {
    const std::string b = coder + ".down_blocks." + p[2] + ".";
    if (p[3] == "block") return b + "resnets." + p[4] + "." + resnet_inner(rest_from(5));
    if (p[3] == "downsample") return b + "downsamplers.0." + rest_from(4);
  }
  if (p[1] == "up" && p.size() > 4) {
    const std::string b = coder + ".up_blocks." + std::to_string(num_up_blocks - 1 - std::stoi(p[2])) + ".";
    if (p[3] == "block") return b + "resnets." + p[4] + "." + resnet_inner(rest_from(5));
    if (p[3] == "upsample") return b + "upsamplers.0." + rest_from(4);
  }
  if (p[1] == "mid" && p.size() > 3) {
    if (p[2] == "block_1") return coder + ".mid_block.resnets.0." + resnet_inner(rest_from(3));
    if (p[2] == "block_2") return coder + ".mid_block.resnets.1." + resnet_inner(rest_from(3));
    if (p[2] == "attn_1") {
      static const std::pair<const char*, const char*> kAttn[] = {
          {"norm", "group_norm"}, {"q", "to_q"}, {"k", "to_k"}, {"v", "to_v"}, {"proj_out", "to_out.0"}};
      for (const auto& [from, to] : kAttn) {
        if (p[3] == from) {
          // The checkpoint's 1x1 convs become linear layers: [C, C, 1, 1] -> [C, C].
          if (p[3] != "norm" && p.back() == "weight") *op = Op::kSqueeze;
          return coder + ".mid_block.attentions.0." + to + "." + rest_from(4);
        }
      }
    }
  }
  return {};
}

// transformers' CLIPTextModel layout under an optional "text_model." prefix.
std::string clip_name(const std::string& rest) {
  if (starts_with(rest, "text_model.") || starts_with(rest, "text_projection")) return rest;
  return "text_model." + rest;
}

// OpenCLIP text tower (model.*) -> transformers' CLIPTextModel(WithProjection).
void map_open_clip(const std::string& ckpt_prefix, const std::vector<std::string>& keys,
                   std::map<std::string, Entry>& out) {
  for (const auto& key : keys) {
    if (!starts_with(key, ckpt_prefix)) continue;
    const std::string rest = key.substr(ckpt_prefix.size());
    const auto p = split_dots(rest);
    if (rest == "token_embedding.weight") {
      out["text_model.embeddings.token_embedding.weight"] = {key};
    } else if (rest == "positional_embedding") {
      out["text_model.embeddings.position_embedding.weight"] = {key};
    } else if (p[0] == "ln_final") {
      out["text_model.final_layer_norm." + join_from(p, 1)] = {key};
    } else if (rest == "text_projection") {
      out["text_projection.weight"] = {key, Op::kTranspose};
    } else if (p[0] == "transformer" && p.size() > 4 && p[1] == "resblocks") {
      const std::string l = "text_model.encoder.layers." + p[2] + ".";
      const std::string tail = join_from(p, 3);
      if (tail == "attn.in_proj_weight" || tail == "attn.in_proj_bias") {
        const std::string kind = tail == "attn.in_proj_weight" ? "weight" : "bias";
        const char* names[] = {"q_proj", "k_proj", "v_proj"};
        for (int part = 0; part < 3; ++part) out[l + "self_attn." + names[part] + "." + kind] = {key, Op::kRows, part};
      } else if (starts_with(tail, "attn.out_proj.")) {
        out[l + "self_attn.out_proj." + tail.substr(14)] = {key};
      } else if (starts_with(tail, "ln_1.")) {
        out[l + "layer_norm1." + tail.substr(5)] = {key};
      } else if (starts_with(tail, "ln_2.")) {
        out[l + "layer_norm2." + tail.substr(5)] = {key};
      } else if (starts_with(tail, "mlp.c_fc.")) {
        out[l + "mlp.fc1." + tail.substr(9)] = {key};
      } else if (starts_with(tail, "mlp.c_proj.")) {
        out[l + "mlp.fc2." + tail.substr(11)] = {key};
      }
    }
    // logit_scale, attn_mask and the vision tower have no diffusers counterpart.
  }
}

class MappedSource : public WeightSource {
 public:
  MappedSource(std::string label, std::shared_ptr<const SafetensorsFile> file, std::map<std::string, Entry> map)
      : label_(std::move(label)), file_(std::move(file)), map_(map.begin(), map.end()) {}

  std::string describe() const override { return label_; }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [n, e] : map_) out.push_back(n);
    return out;
  }
  bool contains(std::string_view name) const override { return map_.find(name) != map_.end(); }
  Result<TensorMeta> meta(std::string_view name) const override {
    auto it = map_.find(name);
    if (it == map_.end()) return not_found(name);
    HIPQ_ASSIGN_OR_RETURN(TensorInfo info, file_->info(it->second.source));
    HIPQ_ASSIGN_OR_RETURN(auto shape, mapped_shape(it->second, info.shape, name));
    return TensorMeta{info.dtype, shape};
  }
  Result<HostTensor> get(std::string_view name) const override {
    auto it = map_.find(name);
    if (it == map_.end()) return not_found(name);
    const Entry& e = it->second;
    HIPQ_ASSIGN_OR_RETURN(HostTensor t, file_->get(e.source));
    HIPQ_ASSIGN_OR_RETURN(auto shape, mapped_shape(e, t.shape, name));
    switch (e.op) {
      case Op::kDirect: return t;
      case Op::kSqueeze: t.shape = shape; return t;
      case Op::kRows: {
        const size_t bytes = t.nbytes / 3;
        t.data = static_cast<const unsigned char*>(t.data) + bytes * static_cast<size_t>(e.part);
        t.nbytes = bytes;
        t.shape = shape;
        return t;
      }
      case Op::kTranspose: {
        HostTensor out = HostTensor::owned(t.dtype, shape);
        const size_t es = kernels::dtype_size(t.dtype);
        const int64_t rows = t.shape[0], cols = t.shape[1];
        const auto* src = static_cast<const unsigned char*>(t.data);
        auto* dst = static_cast<unsigned char*>(out.mutable_data());
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) std::memcpy(dst + (c * rows + r) * es, src + (r * cols + c) * es, es);
        return out;
      }
    }
    return Status::Internal("checkpoint mapping: unknown op");
  }

 private:
  Status not_found(std::string_view name) const {
    return Status::NotFound(label_ + ": no tensor '" + std::string(name) + "' (after mapping checkpoint keys)");
  }
  Result<std::vector<int64_t>> mapped_shape(const Entry& e, const std::vector<int64_t>& s, std::string_view name) const {
    auto bad = [&](const char* want) {
      std::string shape;
      for (auto d : s) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      return Status::Corruption(label_ + ": checkpoint tensor '" + e.source + "' for '" + std::string(name) +
                                "' has shape [" + shape + "], expected " + want);
    };
    switch (e.op) {
      case Op::kDirect: return s;
      case Op::kRows:
        if (s.empty() || s[0] % 3 != 0) return bad("a first dimension divisible by 3");
        {
          auto out = s;
          out[0] /= 3;
          return out;
        }
      case Op::kTranspose:
        if (s.size() != 2) return bad("2 dimensions");
        return std::vector<int64_t>{s[1], s[0]};
      case Op::kSqueeze:
        if (s.size() == 2) return s;
        if (s.size() != 4 || s[2] != 1 || s[3] != 1) return bad("[C, C, 1, 1]");
        return std::vector<int64_t>{s[0], s[1]};
    }
    return s;
  }

  std::string label_;
  std::shared_ptr<const SafetensorsFile> file_;
  std::map<std::string, Entry, std::less<>> map_;
};

}  // namespace

Result<MappedCheckpoint> map_checkpoint(std::shared_ptr<const SafetensorsFile> file) {
  const auto keys = file->names();
  auto has_prefix = [&](std::string_view prefix) {
    return std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return starts_with(k, prefix); });
  };
  MappedCheckpoint out;
  // OpenCLIP bigG: the base's second embedder, the refiner's only one.
  std::string open_clip_g;
  if (has_prefix("conditioner.embedders.1.model.")) {
    out.family = "sdxl";
    open_clip_g = "conditioner.embedders.1.model.";
  } else if (has_prefix("conditioner.embedders.0.model.")) {
    out.family = "sdxl";  // the refiner (sd_xl_refiner_1.0.safetensors)
    open_clip_g = "conditioner.embedders.0.model.";
  } else if (has_prefix("cond_stage_model.model.")) {
    out.family = "sd2";
  } else if (has_prefix("cond_stage_model.transformer.")) {
    out.family = "sd1";
  } else {
    return Status::InvalidArgument(
        "'" + file->path().string() +
        "' is not a single-file SDXL / SD 1.x / SD 2.x checkpoint: no key starts with conditioner.embedders.1.model., "
        "conditioner.embedders.0.model. (SDXL refiner), "
        "cond_stage_model.model. or cond_stage_model.transformer.");
  }
  if (!has_prefix("model.diffusion_model."))
    return Status::InvalidArgument(std::string("'") + file->path().string() + "': no UNet (model.diffusion_model.*) keys");

  // VAE decoder up-block count (reversed between the two namings).
  int num_up = 0;
  for (const auto& k : keys) {
    if (starts_with(k, "first_stage_model.decoder.up.")) {
      const auto p = split_dots(k);
      num_up = std::max(num_up, std::stoi(p[3]) + 1);
    }
  }

  std::map<std::string, Entry> unet, vae, te, te2;
  for (const auto& k : keys) {
    if (starts_with(k, "model.diffusion_model.")) {
      const std::string n = sgm_unet_name(k.substr(22));
      if (!n.empty()) unet[n] = {k};
    } else if (starts_with(k, "first_stage_model.")) {
      Op op = Op::kDirect;
      const std::string n = vae_name(k.substr(18), num_up, &op);
      if (!n.empty()) vae[n] = {k, op};
    } else if (starts_with(k, "conditioner.embedders.0.transformer.")) {
      te[clip_name(k.substr(36))] = {k};
    } else if (starts_with(k, "cond_stage_model.transformer.")) {
      te[clip_name(k.substr(29))] = {k};
    }
  }
  if (out.family == "sdxl") map_open_clip(open_clip_g, keys, te2);
  if (out.family == "sd2") map_open_clip("cond_stage_model.model.", keys, te);

  const std::string where = std::string("'") + file->path().string() + "'";
  out.components["unet"] = std::make_shared<MappedSource>("unet in " + where, file, std::move(unet));
  if (!vae.empty()) out.components["vae"] = std::make_shared<MappedSource>("vae in " + where, file, std::move(vae));
  if (!te.empty())
    out.components["text_encoder"] = std::make_shared<MappedSource>("text_encoder in " + where, file, std::move(te));
  if (!te2.empty())
    out.components["text_encoder_2"] =
        std::make_shared<MappedSource>("text_encoder_2 in " + where, file, std::move(te2));
  return out;
}

}  // namespace hipq::engine
