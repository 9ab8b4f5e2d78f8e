#include "engine/model_files.h"

#include <sys/stat.h>

#include <mutex>

#include "base/fs.h"
#include "engine/checkpoint_configs.h"
#include "engine/checkpoint_keys.h"
#include "engine/synthetic.h"
#include "engine/tokenizer.h"
#include "engine/weights_hash_cache.h"

namespace hipq::engine {
namespace fs = std::filesystem;

namespace {

constexpr const char* kWeightComponents[] = {"unet", "vae", "text_encoder", "text_encoder_2"};

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

Result<nlohmann::json> read_json(const fs::path& p) {
  HIPQ_ASSIGN_OR_RETURN(std::string text, read_file(p));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("'") + p.string() + "' is not valid JSON: " + e.what());
  }
}

// The weight files of one component folder, by diffusers' preference: the
// single full-precision file, its fp16 variant, then the sharded indexes.
Result<std::vector<fs::path>> component_weights(const fs::path& dir, std::shared_ptr<WeightSource>* source,
                                                const std::string& label) {
  for (const char* base : {"diffusion_pytorch_model", "model"}) {
    for (const char* variant : {"", ".fp16"}) {
      const fs::path single = dir / (std::string(base) + variant + ".safetensors");
      if (is_file(single)) {
        HIPQ_ASSIGN_OR_RETURN(*source, open_safetensors_source({single}, label + " '" + single.string() + "'"));
        return std::vector<fs::path>{single};
      }
    }
  }
  for (const char* base : {"diffusion_pytorch_model", "model"}) {
    for (const char* variant : {"", ".fp16"}) {
      const fs::path index = dir / (std::string(base) + ".safetensors" + variant + ".index.json");
      const fs::path index2 = dir / (std::string(base) + variant + ".safetensors.index.json");
      for (const auto& idx : {index, index2}) {
        if (!is_file(idx)) continue;
        HIPQ_ASSIGN_OR_RETURN(*source, open_safetensors_index(idx, label + " '" + idx.string() + "'"));
        HIPQ_ASSIGN_OR_RETURN(auto j, read_json(idx));
        std::vector<fs::path> files;
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
          const fs::path f = dir / it.value().get<std::string>();
          if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
        }
        std::sort(files.begin(), files.end());
        return files;
      }
    }
  }
  return Status::NotFound("no safetensors weights in '" + dir.string() +
                          "' (looked for diffusion_pytorch_model[.fp16].safetensors, model[.fp16].safetensors and "
                          "*.safetensors.index.json; .bin files are not read)");
}

// The family from a diffusers folder's configs: SDXL's UNet has the "text_time"
// added conditioning (whatever its width, e.g. the toy synthetic models); else the
// cross-attention width names it; else the pipeline class in model_index.json
// (with the text encoder's activation telling SD 2.x from SD 1.x).
// Empty when none of them tells.
std::string family_from_configs(const nlohmann::json& unet, const nlohmann::json& text_encoder,
                                const nlohmann::json& model_index) {
  if (unet.is_object()) {
    if (unet.value("addition_embed_type", nlohmann::json()).is_string() &&
        unet["addition_embed_type"].get<std::string>() == "text_time")
      return "sdxl";
    if (unet.contains("cross_attention_dim") && unet["cross_attention_dim"].is_number_integer()) {
      switch (unet["cross_attention_dim"].get<int>()) {
        case 2048: return "sdxl";
        case 1024: return "sd2";
        case 768: return "sd1";
        default: break;
      }
    }
  }
  if (model_index.is_object() && model_index.value("_class_name", nlohmann::json()).is_string()) {
    const std::string cls = model_index["_class_name"].get<std::string>();
    if (cls == "StableDiffusionXLPipeline") return "sdxl";
    if (cls == "StableDiffusionPipeline") {
      // SD 2.x's OpenCLIP text tower uses gelu; SD 1.x's CLIP-L quick_gelu.
      if (text_encoder.is_object() && text_encoder.value("hidden_act", nlohmann::json()).is_string() &&
          text_encoder["hidden_act"].get<std::string>() == "gelu")
        return "sd2";
      return "sd1";
    }
  }
  return {};
}

Result<ModelComponents> open_folder(const fs::path& dir, std::string spec) {
  ModelComponents m;
  m.spec = std::move(spec);
  const fs::path index = dir / "model_index.json";
  if (!is_file(index))
    return Status::NotFound(std::string("'") + dir.string() + "' is a folder without model_index.json: not a diffusers model");
  HIPQ_ASSIGN_OR_RETURN(m.configs["model_index"], read_json(index));
  std::vector<fs::path> all_files;
  for (const char* comp : kWeightComponents) {
    const fs::path cdir = dir / comp;
    std::error_code ec;
    if (!fs::is_directory(cdir, ec)) continue;
    if (is_file(cdir / "config.json")) {
      HIPQ_ASSIGN_OR_RETURN(m.configs[comp], read_json(cdir / "config.json"));
    }
    std::shared_ptr<WeightSource> src;
    auto files = component_weights(cdir, &src, std::string(comp) + " weights in");
    if (!files.ok()) return files.status();
    m.weights[comp] = src;
    all_files.insert(all_files.end(), files->begin(), files->end());
  }
  for (const char* comp : {"unet", "vae"}) {
    if (!m.weights.count(comp))
      return Status::NotFound("diffusers folder '" + dir.string() + "' has no " + comp + "/ weights");
  }
  // The SDXL refiner has text_encoder_2 alone (model_index.json: text_encoder null).
  if (!m.weights.count("text_encoder") && !m.weights.count("text_encoder_2"))
    return Status::NotFound("diffusers folder '" + dir.string() + "' has no text_encoder/ (or text_encoder_2/) weights");
  for (const char* name : {"scheduler_config.json", "config.json"}) {
    if (is_file(dir / "scheduler" / name)) {
      HIPQ_ASSIGN_OR_RETURN(m.configs["scheduler"], read_json(dir / "scheduler" / name));
      break;
    }
  }
  if (is_file(dir / "tokenizer" / "vocab.json") && is_file(dir / "tokenizer" / "merges.txt")) {
    m.vocab = dir / "tokenizer" / "vocab.json";
    m.merges = dir / "tokenizer" / "merges.txt";
  } else if (is_file(dir / "tokenizer_2" / "vocab.json") && is_file(dir / "tokenizer_2" / "merges.txt")) {
    // The refiner ships tokenizer_2 alone (the same CLIP BPE vocabulary).
    m.vocab = dir / "tokenizer_2" / "vocab.json";
    m.merges = dir / "tokenizer_2" / "merges.txt";
  } else {
    HIPQ_ASSIGN_OR_RETURN(m.vocab, find_default_clip_vocab());
  }
  m.family = family_from_configs(m.configs.count("unet") ? m.configs["unet"] : nlohmann::json(),
                                 m.configs.count("text_encoder") ? m.configs["text_encoder"] : nlohmann::json(),
                                 m.configs["model_index"]);
  if (m.family.empty()) {
    HIPQ_ASSIGN_OR_RETURN(m.family, detect_family(*m.weights["unet"]));
  }
  HIPQ_ASSIGN_OR_RETURN(m.weights_sha256, weights_sha256(all_files));
  return m;
}

Result<ModelComponents> open_single_file(const fs::path& file, std::string spec) {
  HIPQ_ASSIGN_OR_RETURN(auto st, SafetensorsFile::open(file));
  HIPQ_ASSIGN_OR_RETURN(auto mapped, map_checkpoint(st));
  ModelComponents m;
  m.spec = std::move(spec);
  m.family = mapped.family;
  // The settings a folder's config files would carry (checkpoint_configs.h).
  std::string where = "'";
  where += file.string();
  where += "'";
  HIPQ_ASSIGN_OR_RETURN(CheckpointConfigs cc, checkpoint_configs(mapped, st->metadata(), where));
  m.configs = std::move(cc.configs);
  m.warnings = std::move(cc.warnings);
  m.weights = std::move(mapped.components);
  HIPQ_ASSIGN_OR_RETURN(m.vocab, find_default_clip_vocab());
  HIPQ_ASSIGN_OR_RETURN(m.weights_sha256, weights_sha256({file}));
  return m;
}

}  // namespace

bool is_sdxl_refiner(const ModelComponents& m) {
  auto has = [&](const char* key) {
    auto it = m.weights.find(key);
    return it != m.weights.end() && it->second != nullptr;
  };
  // An empty family is derived from the weights later; only SDXL has text_encoder_2.
  return (m.family == "sdxl" || m.family.empty()) && !has("text_encoder") && has("text_encoder_2");
}

Result<std::string> detect_family(const WeightSource& unet) {
  const char* probe = "down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_k.weight";
  if (!unet.contains(probe))
    return Status::InvalidArgument(unet.describe() + ": cannot tell the model family: no '" + probe + "'");
  HIPQ_ASSIGN_OR_RETURN(TensorMeta meta, unet.meta(probe));
  if (meta.shape.size() != 2) return Status::InvalidArgument(unet.describe() + ": '" + probe + "' is not 2-D");
  const int64_t context = meta.shape[1];
  // SDXL's added (text, time) conditioning: whatever the width.
  if (unet.contains("add_embedding.linear_1.weight")) return std::string("sdxl");
  if (context == 1024) return std::string("sd2");
  if (context == 768) return std::string("sd1");
  return Status::InvalidArgument(unet.describe() + ": cross-attention width " + std::to_string(context) +
                                 " matches no known family (2048 sdxl, 1024 sd2, 768 sd1)");
}

Result<std::string> weights_sha256(const std::vector<fs::path>& files) {
  struct Key {
    std::string path;
    int64_t size, mtime_ns;
    bool operator<(const Key& o) const { return std::tie(path, size, mtime_ns) < std::tie(o.path, o.size, o.mtime_ns); }
  };
  static std::mutex mu;
  static std::map<Key, std::string> cache;
  std::string concat;
  for (const auto& f : files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) return Status::NotFound("cannot stat weight file '" + f.string() + "'");
    const Key key{fs::absolute(f).lexically_normal().string(), static_cast<int64_t>(st.st_size),
                  static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    std::string sha;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = cache.find(key);
      if (it != cache.end()) sha = it->second;
    }
    if (sha.empty()) {
      if (auto cache_file = default_weights_hash_cache()) {
        HIPQ_ASSIGN_OR_RETURN(sha, WeightsHashCache(*cache_file).sha256(f));
      } else {
        HIPQ_ASSIGN_OR_RETURN(sha, sha256_file(f));
      }
      std::lock_guard<std::mutex> lock(mu);
      cache[key] = sha;
    }
    concat += sha;
  }
  return sha256_hex(concat);
}

Result<ModelComponents> open_model(std::string_view spec) {
  if (spec.substr(0, 10) == "synthetic:") return make_synthetic_model(spec.substr(10));
  if (spec.empty()) return Status::InvalidArgument("empty model spec (expected a folder, a .safetensors file or synthetic:NAME)");
  const fs::path p{std::string(spec)};
  std::error_code ec;
  if (fs::is_directory(p, ec)) return open_folder(p, std::string(spec));
  if (fs::is_regular_file(p, ec)) {
    if (p.extension() != ".safetensors")
      return Status::InvalidArgument("model '" + p.string() +
                                     "' is a file but not .safetensors (pickled .ckpt files are not read)");
    return open_single_file(p, std::string(spec));
  }
  return Status::NotFound("model '" + std::string(spec) +
                          "' is neither a folder, a .safetensors file nor synthetic:NAME (no such path)");
}

}  // namespace hipq::engine
