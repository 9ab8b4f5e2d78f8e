#include "engine/lora/lora_file.h"

#include <cmath>
#include <map>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hipq::engine::lora {
namespace {

using kernels::DType;

enum class Part { kDown, kUp, kAlpha };

struct Suffix {
  std::string_view text;
  Part part;
};

// Longest first where one suffix ends another.
constexpr Suffix kSuffixes[] = {
    {".lora_down.weight", Part::kDown},        {".lora_up.weight", Part::kUp},
    {".lora_A.weight", Part::kDown},           {".lora_B.weight", Part::kUp},
    {".lora.down.weight", Part::kDown},        {".lora.up.weight", Part::kUp},
    {".lora_linear_layer.down.weight", Part::kDown}, {".lora_linear_layer.up.weight", Part::kUp},
    {"_lora.down.weight", Part::kDown},        {"_lora.up.weight", Part::kUp},  // attn processors
    {".alpha", Part::kAlpha},
};

struct Prefix {
  std::string_view text;
  LoraTarget target;
  bool kohya;
};

constexpr Prefix kPrefixes[] = {
    {"lora_unet_", LoraTarget::kUnet, true},
    {"lora_te1_", LoraTarget::kTextEncoder1, true},
    {"lora_te2_", LoraTarget::kTextEncoder2, true},
    {"lora_te_", LoraTarget::kTextEncoder, true},
    {"unet.", LoraTarget::kUnet, false},
    {"base_model.model.", LoraTarget::kUnet, false},  // PEFT's own save of a UNet adapter
    {"text_encoder_2.", LoraTarget::kTextEncoder2, false},
    {"text_encoder.", LoraTarget::kTextEncoder, false},
};

// LyCORIS and other adapter kinds whose tensors hipq recognises but does not apply.
struct Unsupported {
  std::string_view marker;
  std::string_view kind;
};
constexpr Unsupported kUnsupported[] = {
    {".hada_", "LoHa (LyCORIS Hadamard product: hada_w1_a, hada_w1_b, ...)"},
    {".lokr_", "LoKr (LyCORIS Kronecker product: lokr_w1, lokr_w2, ...)"},
    {".lora_mid.", "LoCon with a Tucker core (LyCORIS lora_mid)"},
    {".dora_scale", "DoRA (weight-decomposed LoRA: dora_scale)"},
    {".oft_", "OFT (LyCORIS orthogonal fine-tuning: oft_blocks)"},
    {".lora_magnitude_vector", "DoRA (PEFT lora_magnitude_vector)"},
    {".w_norm", "norm-layer deltas (LyCORIS w_norm, b_norm)"},
    {".b_norm", "norm-layer deltas (LyCORIS w_norm, b_norm)"},
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

struct Group {
  std::optional<HostTensor> down, up, alpha;
  std::string down_name, up_name, alpha_name;
  LoraTarget target = LoraTarget::kUnet;
  std::string module;
  bool kohya = false;
};

// diffusers' pre-PEFT attention-processor names ("attn1.processor.to_q_lora",
// the "_lora" gone with the suffix): "attn1.processor.to_q" -> "attn1.to_q",
// "...processor.to_out" -> "...to_out.0".
std::string normalize_diffusers_module(std::string m) {
  const size_t p = m.find(".processor.");
  if (p != std::string::npos) {
    m = m.substr(0, p) + "." + m.substr(p + 11);
    if (m.ends_with(".to_out")) m += ".0";
  }
  return m;
}

// Alpha per target from diffusers' "lora_adapter_metadata" (PEFT LoraConfig
// packed as {"unet.lora_alpha": 8, "unet.r": 4, ...}), when present.
struct MetadataAlpha {
  std::map<LoraTarget, float> alpha;
};

const char* target_metadata_prefix(LoraTarget t) {
  switch (t) {
    case LoraTarget::kUnet: return "unet";
    case LoraTarget::kTextEncoder: case LoraTarget::kTextEncoder1: return "text_encoder";
    case LoraTarget::kTextEncoder2: return "text_encoder_2";
  }
  return "unet";
}

Result<MetadataAlpha> read_metadata_alpha(const SafetensorsFile& f) {
  MetadataAlpha out;
  auto it = f.metadata().find("lora_adapter_metadata");
  if (it == f.metadata().end()) return out;
  const std::string file = f.path().string();
  nlohmann::json j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return Status::InvalidArgument(file + ": metadata 'lora_adapter_metadata' is not a JSON object");
  }
  for (LoraTarget t : {LoraTarget::kUnet, LoraTarget::kTextEncoder, LoraTarget::kTextEncoder2}) {
    const std::string pre = target_metadata_prefix(t);
    // Flat ("unet.lora_alpha") or nested ({"unet": {"lora_alpha": ...}}).
    auto field = [&](const std::string& name) -> const nlohmann::json* {
      if (auto f1 = j.find(pre + "." + name); f1 != j.end()) return &*f1;
      if (auto sub = j.find(pre); sub != j.end() && sub->is_object()) {
        if (auto f2 = sub->find(name); f2 != sub->end()) return &*f2;
      }
      return nullptr;
    };
    for (const char* flag : {"use_rslora", "use_dora"}) {
      if (const auto* v = field(flag); v != nullptr && v->is_boolean() && v->get<bool>()) {
        return Status::Unimplemented(file + ": the adapter sets " + pre + "." + flag +
                                     "; hipq applies plain LoRA only (alpha / rank scaling, no magnitude vector)");
      }
    }
    if (const auto* v = field("alpha_pattern"); v != nullptr && v->is_object() && !v->empty()) {
      return Status::Unimplemented(file + ": the adapter sets a per-layer " + pre +
                                   ".alpha_pattern; hipq reads one lora_alpha per model (or an .alpha tensor per layer)");
    }
    if (const auto* v = field("lora_alpha"); v != nullptr) {
      if (!v->is_number() || !std::isfinite(v->get<double>())) {
        return Status::InvalidArgument(file + ": metadata " + pre + ".lora_alpha is not a finite number");
      }
      out.alpha[t] = v->get<float>();
    }
  }
  return out;
}

Status check_pair_shapes(const std::string& file, const std::string& key, const HostTensor& down,
                         const HostTensor& up) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(file + ": LoRA layer '" + key + "': " + why + " (down " +
                                   shape_str(down.shape) + ", up " + shape_str(up.shape) + ")");
  };
  for (const HostTensor* t : {&down, &up}) {
    if (!kernels::is_float(t->dtype)) return bad("tensors must be f32, f16, bf16 or f64");
    if (t->shape.size() != 2 && t->shape.size() != 4) return bad("tensors must have 2 (linear) or 4 (conv) dims");
    for (int64_t d : t->shape) {
      if (d <= 0) return bad("a dimension is 0");
    }
  }
  const int64_t rank = down.shape[0];
  if (up.shape[1] != rank) return bad("up's dim 1 must equal down's dim 0 (the rank)");
  if (rank > kMaxLoraRank) return bad("rank " + std::to_string(rank) + " is past hipq's limit of " +
                                      std::to_string(kMaxLoraRank));
  if (up.shape.size() == 4 && (up.shape[2] != 1 || up.shape[3] != 1)) {
    return bad("a conv up projection must be 1x1");
  }
  if (up.shape.size() == 4 && down.shape.size() != 4) return bad("a conv up projection needs a conv down projection");
  return Status::Ok();
}

}  // namespace

const char* lora_format_name(LoraFormat f) { return f == LoraFormat::kKohya ? "kohya" : "diffusers"; }

int64_t LoraPair::in_features() const {
  int64_t n = 1;
  for (size_t i = 1; i < down.shape.size(); ++i) n *= down.shape[i];
  return n;
}

Result<LoraFile> read_lora_file(const std::filesystem::path& path) {
  auto file = SafetensorsFile::open(path);
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kNotFound || file.status().code() == StatusCode::kIOError) {
      return file.status().WithContext("LoRA " + path.string());
    }
    return Status::InvalidArgument(path.string() + " is not a LoRA .safetensors file (" + file.status().message() +
                                   "); hipq reads LoRA adapters as safetensors only: convert a .ckpt/.pt/.bin "
                                   "with safetensors' convert script");
  }
  return parse_lora(std::move(file).value());
}

Result<LoraFile> parse_lora(std::shared_ptr<const SafetensorsFile> f) {
  const std::string file = f->path().string();
  LoraFile out;
  out.path = f->path();
  out.name = f->path().stem().string();
  out.file = f;
  HIPQ_ASSIGN_OR_RETURN(MetadataAlpha meta_alpha, read_metadata_alpha(*f));

  std::map<std::string, Group> groups;
  std::vector<std::string> unknown;
  int kohya = 0, diffusers = 0;
  for (const std::string& name : f->names()) {
    for (const Unsupported& u : kUnsupported) {
      if (name.find(u.marker) != std::string::npos) {
        return Status::Unimplemented(file + ": tensor '" + name + "' belongs to " + std::string(u.kind) +
                                     ", an adapter kind hipq does not apply; hipq applies LoRA and LoCon "
                                     "(lora_down/lora_up, lora_A/lora_B) only");
      }
    }
    if (name.ends_with(".diff") || name.ends_with(".diff_b")) {
      return Status::Unimplemented(file + ": tensor '" + name + "' is a full weight difference (LyCORIS 'full': "
                                   "diff, diff_b), an adapter kind hipq does not apply; hipq applies LoRA and LoCon "
                                   "(lora_down/lora_up, lora_A/lora_B) only");
    }
    const Suffix* suffix = nullptr;
    for (const Suffix& s : kSuffixes) {
      if (name.ends_with(s.text)) {
        suffix = &s;
        break;
      }
    }
    const Prefix* prefix = nullptr;
    for (const Prefix& p : kPrefixes) {
      if (name.starts_with(p.text)) {
        prefix = &p;
        break;
      }
    }
    if (suffix == nullptr || prefix == nullptr || name.size() <= prefix->text.size() + suffix->text.size()) {
      unknown.push_back(name);
      continue;
    }
    const std::string key = name.substr(0, name.size() - suffix->text.size());
    Group& g = groups[key];
    g.target = prefix->target;
    g.kohya = prefix->kohya;
    g.module = key.substr(prefix->text.size());
    HIPQ_ASSIGN_OR_RETURN(HostTensor t, f->get(name));
    switch (suffix->part) {
      case Part::kDown: g.down = t; g.down_name = name; break;
      case Part::kUp: g.up = t; g.up_name = name; break;
      case Part::kAlpha: g.alpha = t; g.alpha_name = name; break;
    }
    (prefix->kohya ? kohya : diffusers)++;
  }
  if (!unknown.empty()) {
    std::string list;
    for (size_t i = 0; i < unknown.size() && i < 5; ++i) list += (i ? ", '" : "'") + unknown[i] + "'";
    return Status::InvalidArgument(file + ": " + std::to_string(unknown.size()) + " of " +
                                   std::to_string(f->names().size()) + " tensors are not LoRA pairs hipq knows (" +
                                   list + (unknown.size() > 5 ? ", ..." : "") +
                                   "); expected kohya lora_unet_/lora_te*_ .lora_down/.lora_up/.alpha or diffusers "
                                   "unet./text_encoder*. .lora_A/.lora_B keys (docs/adapters.md)");
  }
  if (groups.empty()) {
    return Status::InvalidArgument(file + ": holds no LoRA tensors (docs/adapters.md lists the formats hipq reads)");
  }
  out.format = kohya >= diffusers ? LoraFormat::kKohya : LoraFormat::kDiffusers;
  for (auto& [key, g] : groups) {
    if (!g.down || !g.up) {
      return Status::InvalidArgument(file + ": LoRA layer '" + key + "' has " +
                                     (g.down ? "a down" : g.up ? "an up" : "only an alpha") +
                                     " tensor but no " + (g.down ? "up" : "down") +
                                     " tensor; the file is incomplete");
    }
    HIPQ_RETURN_IF_ERROR(check_pair_shapes(file, key, *g.down, *g.up));
    LoraPair p;
    p.key = key;
    p.target = g.target;
    p.underscored = g.kohya;
    p.module = g.kohya ? g.module : normalize_diffusers_module(g.module);
    p.down = *g.down;
    p.up = *g.up;
    p.rank = p.down.shape[0];
    p.alpha = static_cast<float>(p.rank);
    if (g.alpha) {
      if (g.alpha->numel() != 1) {
        return Status::InvalidArgument(file + ": '" + g.alpha_name + "' must hold one number, has shape " +
                                       shape_str(g.alpha->shape));
      }
      p.alpha = g.alpha->to_f32()[0];
    } else if (auto it = meta_alpha.alpha.find(g.target == LoraTarget::kTextEncoder1 ? LoraTarget::kTextEncoder
                                                                                     : g.target);
               it != meta_alpha.alpha.end()) {
      p.alpha = it->second;
    }
    if (!std::isfinite(p.alpha)) {
      return Status::InvalidArgument(file + ": LoRA layer '" + key + "' has alpha " + std::to_string(p.alpha) +
                                     ", not a finite number");
    }
    out.pairs.push_back(std::move(p));
  }
  return out;
}

}  // namespace hipq::engine::lora
