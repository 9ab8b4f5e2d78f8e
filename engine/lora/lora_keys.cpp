#include "engine/lora/lora_keys.h"

#include <algorithm>

#include "engine/checkpoint_keys.h"

namespace hipq::engine::lora {
namespace {

std::string underscore(std::string s) {
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

// A block index as std::stoi may read it: 1 to 4 decimal digits.
bool small_index(std::string_view s) {
  return !s.empty() && s.size() <= 4 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Splits "a_b_c" at its first `n` underscores: n index fields, then the rest.
bool take_indices(std::string_view s, int n, std::vector<std::string>* idx, std::string* rest) {
  for (int i = 0; i < n; ++i) {
    const size_t u = s.find('_');
    const std::string_view field = s.substr(0, u);
    if (!small_index(field)) return false;
    idx->emplace_back(field);
    if (u == std::string_view::npos) {
      s = {};
      if (i + 1 < n) return false;
      break;
    }
    s = s.substr(u + 1);
  }
  *rest = std::string(s);
  return true;
}

// A ResBlock-internal name of the SGM layout, underscored, with its dots back.
std::string dot_resnet_inner(const std::string& rest) {
  static const std::pair<const char*, const char*> kInner[] = {
      {"in_layers_2", "in_layers.2"}, {"out_layers_3", "out_layers.3"}, {"emb_layers_1", "emb_layers.1"}};
  for (const auto& [from, to] : kInner) {
    if (rest == from) return to;
  }
  return rest;
}

// kohya's SGM-style UNet module (underscored, no prefix) -> the SGM dotted
// name + ".weight" that sgm_unet_name() reads; "" when it is not one.
std::string sgm_dotted(const std::string& m) {
  std::vector<std::string> idx;
  std::string rest;
  for (const char* block : {"input_blocks_", "output_blocks_"}) {
    if (m.starts_with(block)) {
      std::string b(block);
      if (!take_indices(std::string_view(m).substr(b.size()), 2, &idx, &rest) || rest.empty()) return {};
      b.back() = '.';
      return b + idx[0] + "." + idx[1] + "." + dot_resnet_inner(rest) + ".weight";
    }
  }
  if (m.starts_with("middle_block_")) {
    if (!take_indices(std::string_view(m).substr(13), 1, &idx, &rest) || rest.empty()) return {};
    return "middle_block." + idx[0] + "." + dot_resnet_inner(rest) + ".weight";
  }
  if (m.starts_with("time_embed_")) {
    if (!take_indices(std::string_view(m).substr(11), 1, &idx, &rest) || !rest.empty()) return {};
    return "time_embed." + idx[0] + ".weight";
  }
  if (m.starts_with("label_emb_0_")) {
    if (!take_indices(std::string_view(m).substr(12), 1, &idx, &rest) || !rest.empty()) return {};
    return "label_emb.0." + idx[0] + ".weight";
  }
  if (m.starts_with("out_")) {
    if (!take_indices(std::string_view(m).substr(4), 1, &idx, &rest) || !rest.empty()) return {};
    return "out." + idx[0] + ".weight";
  }
  return {};
}

}  // namespace

const char* target_component(LoraTarget t) {
  switch (t) {
    case LoraTarget::kUnet: return "unet";
    case LoraTarget::kTextEncoder: case LoraTarget::kTextEncoder1: return "text_encoder";
    case LoraTarget::kTextEncoder2: return "text_encoder_2";
  }
  return "unet";
}

LoraKeyMap LoraKeyMap::for_model(const ModelComponents& model, const std::string& family) {
  LoraKeyMap m;
  m.family_ = family;
  for (const char* c : {"unet", "text_encoder", "text_encoder_2"}) {
    auto it = model.weights.find(c);
    if (it == model.weights.end() || it->second == nullptr) continue;
    Names& n = m.components_[c];
    n.source = it->second;
    for (const std::string& w : n.source->names()) {
      if (!w.ends_with(".weight")) continue;
      const std::string module = w.substr(0, w.size() - 7);
      n.dotted[module] = w;
      auto [pos, fresh] = n.underscored.emplace(underscore(module), w);
      if (!fresh) pos->second.clear();  // two modules read alike: never guess
    }
  }
  return m;
}

std::shared_ptr<WeightSource> LoraKeyMap::source(const std::string& component) const {
  auto it = components_.find(component);
  return it == components_.end() ? nullptr : it->second.source;
}

std::optional<LoraBinding> LoraKeyMap::lookup(const std::string& component, const std::string& module,
                                              bool underscored) const {
  auto c = components_.find(component);
  if (c == components_.end()) return std::nullopt;
  const auto& table = underscored ? c->second.underscored : c->second.dotted;
  auto it = table.find(module);
  if (it == table.end() || it->second.empty()) return std::nullopt;
  return LoraBinding{component, it->second};
}

std::optional<LoraBinding> LoraKeyMap::resolve(const LoraPair& pair) const {
  const std::string component = target_component(pair.target);
  if (auto b = lookup(component, pair.module, pair.underscored)) return b;
  if (pair.target != LoraTarget::kUnet || !pair.underscored) return std::nullopt;
  // kohya's SGM-style UNet names.
  const std::string sgm = sgm_dotted(pair.module);
  if (sgm.empty()) return std::nullopt;
  const std::string diffusers = sgm_unet_name(sgm);
  if (diffusers.empty() || !diffusers.ends_with(".weight")) return std::nullopt;
  return lookup(component, underscore(diffusers.substr(0, diffusers.size() - 7)), true);
}

std::string lora_family_hint(const LoraFile& file, std::string* evidence) {
  for (const LoraPair& p : file.pairs) {
    if (p.target == LoraTarget::kTextEncoder1 || p.target == LoraTarget::kTextEncoder2) {
      if (evidence) *evidence = p.key;
      return "sdxl";
    }
  }
  for (const LoraPair& p : file.pairs) {
    if (p.target == LoraTarget::kTextEncoder && p.underscored) {
      if (evidence) *evidence = p.key;
      return "sd1/sd2";
    }
  }
  // The cross-attention key projection reads the text embedding: 768 (SD 1.x),
  // 1024 (SD 2.x), 2048 (SDXL) wide in the released models.
  for (const LoraPair& p : file.pairs) {
    if (p.target != LoraTarget::kUnet) continue;
    const bool to_k = p.module.ends_with(p.underscored ? "attn2_to_k" : "attn2.to_k");
    if (!to_k) continue;
    const int64_t in = p.in_features();
    if (in == 2048) {
      if (evidence) *evidence = p.key;
      return "sdxl";
    }
    if (in == 768 || in == 1024) {
      if (evidence) *evidence = p.key;
      return "sd1/sd2";
    }
  }
  return {};
}

}  // namespace hipq::engine::lora
