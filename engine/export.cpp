#include "engine/export.h"

#include <zlib.h>

#include <algorithm>
#include <sstream>

#include "base/fs.h"
#include "engine/models/clip_text.h"
#include "engine/models/unet.h"
#include "engine/models/vae.h"
#include "engine/safetensors.h"
#include "engine/synthetic_weights.h"

namespace hipq::engine {

namespace fs = std::filesystem;
using kernels::DType;

namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2 / CLIP bytes_to_unicode, in its order (printable bytes first).
std::vector<std::string> byte_symbols() {
  std::vector<int> bs, cs;
  for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
  cs = bs;
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    if (std::find(bs.begin(), bs.end(), b) == bs.end()) {
      bs.push_back(b);
      cs.push_back(256 + n++);
    }
  }
  std::vector<std::string> out;
  for (int c : cs) out.push_back(utf8(static_cast<uint32_t>(c)));
  return out;
}

Result<std::string> read_gz(const fs::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return Status::IOError("cannot open " + path.string());
  std::string data;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(n));
  const bool failed = n < 0;
  gzclose(f);
  if (failed) return Status::Corruption(path.string() + ": not a readable gzip file");
  return data;
}

HostTensor cast(const HostTensor& t, DType dtype) {
  if (t.dtype == dtype) return t;
  HostTensor out = HostTensor::owned(dtype, t.shape);
  void* dst = out.mutable_data();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) kernels::store_from_f32(dst, dtype, i, kernels::load_as_f32(t.data, t.dtype, i));
  return out;
}

Result<nlohmann::json> component_config(const ModelComponents& m, const std::string& key, const WeightSource& w,
                                        const std::string& family) {
  if (auto it = m.configs.find(key); it != m.configs.end()) return it->second;
  if (key == "unet") {
    HIPQ_ASSIGN_OR_RETURN(UNetConfig c, UNetConfig::from_weights(w));
    return c.to_json();
  }
  if (key == "vae") {
    HIPQ_ASSIGN_OR_RETURN(VaeConfig c, VaeConfig::from_weights(w, family));
    return c.to_json();
  }
  HIPQ_ASSIGN_OR_RETURN(ClipTextConfig c, ClipTextConfig::from_weights(w));
  return c.to_json();
}

Status write_json(const fs::path& path, const nlohmann::json& j) {
  return write_file_atomic(path, j.dump(2) + "\n");
}

Status write_tokenizer(const ModelComponents& m, const fs::path& dir, const std::string& pad_token) {
  if (m.vocab.empty()) return Status::NotFound("model " + m.spec + " has no CLIP vocabulary to export");
  std::string vocab_json, merges_txt;
  if (m.merges.empty()) {
    HIPQ_ASSIGN_OR_RETURN(ClipVocabFiles files, clip_vocab_files_from_bpe(m.vocab));
    vocab_json = std::move(files.vocab_json);
    merges_txt = std::move(files.merges_txt);
  } else {
    HIPQ_ASSIGN_OR_RETURN(vocab_json, read_file(m.vocab));
    HIPQ_ASSIGN_OR_RETURN(merges_txt, read_file(m.merges));
  }
  HIPQ_RETURN_IF_ERROR(write_file_atomic(dir / "vocab.json", vocab_json));
  HIPQ_RETURN_IF_ERROR(write_file_atomic(dir / "merges.txt", merges_txt));
  nlohmann::json special = {{"bos_token", "<|startoftext|>"},
                            {"eos_token", "<|endoftext|>"},
                            {"pad_token", pad_token},
                            {"unk_token", "<|endoftext|>"}};
  HIPQ_RETURN_IF_ERROR(write_json(dir / "special_tokens_map.json", special));
  nlohmann::json cfg = special;
  cfg["add_prefix_space"] = false;
  cfg["clean_up_tokenization_spaces"] = true;
  cfg["do_lower_case"] = true;
  cfg["errors"] = "replace";
  cfg["model_max_length"] = 77;
  cfg["tokenizer_class"] = "CLIPTokenizer";
  return write_json(dir / "tokenizer_config.json", cfg);
}

Status write_weights(const WeightSource& w, const fs::path& file, DType dtype) {
  std::vector<std::string> names;
  if (const auto* syn = dynamic_cast<const SyntheticWeightSource*>(&w)) {
    for (const ParamSpec& s : syn->specs()) names.push_back(s.name);
  } else {
    names = w.names();
  }
  std::vector<std::pair<std::string, HostTensor>> tensors;
  tensors.reserve(names.size());
  for (const std::string& n : names) {
    HIPQ_ASSIGN_OR_RETURN(HostTensor t, w.get(n));
    if (!kernels::is_float(t.dtype) || t.dtype == DType::kF64) {
      tensors.emplace_back(n, std::move(t));  // integer buffers pass through unchanged
    } else {
      tensors.emplace_back(n, cast(t, dtype));
    }
  }
  return write_safetensors(file, tensors, {{"format", "pt"}});
}

}  // namespace

nlohmann::json diffusers_model_index(std::string_view family, bool refiner) {
  nlohmann::json j;
  if (family == "sdxl" && refiner) {
    j["_class_name"] = "StableDiffusionXLImg2ImgPipeline";
    j["_diffusers_version"] = "0.30.0";
    j["force_zeros_for_empty_prompt"] = false;
    j["requires_aesthetics_score"] = true;
    j["scheduler"] = {"diffusers", "EulerDiscreteScheduler"};
    j["text_encoder"] = {nullptr, nullptr};
    j["text_encoder_2"] = {"transformers", "CLIPTextModelWithProjection"};
    j["tokenizer"] = {nullptr, nullptr};
    j["tokenizer_2"] = {"transformers", "CLIPTokenizer"};
    j["unet"] = {"diffusers", "UNet2DConditionModel"};
    j["vae"] = {"diffusers", "AutoencoderKL"};
    return j;
  }
  if (family == "sdxl") {
    j["_class_name"] = "StableDiffusionXLPipeline";
    j["_diffusers_version"] = "0.30.0";
    j["force_zeros_for_empty_prompt"] = true;
    j["text_encoder_2"] = {"transformers", "CLIPTextModelWithProjection"};
    j["tokenizer_2"] = {"transformers", "CLIPTokenizer"};
  } else {
    j["_class_name"] = "StableDiffusionPipeline";
    j["_diffusers_version"] = "0.30.0";
    j["feature_extractor"] = {nullptr, nullptr};
    j["requires_safety_checker"] = false;
    j["safety_checker"] = {nullptr, nullptr};
  }
  j["scheduler"] = {"diffusers", "EulerDiscreteScheduler"};
  j["text_encoder"] = {"transformers", "CLIPTextModel"};
  j["tokenizer"] = {"transformers", "CLIPTokenizer"};
  j["unet"] = {"diffusers", "UNet2DConditionModel"};
  j["vae"] = {"diffusers", "AutoencoderKL"};
  return j;
}

nlohmann::json default_scheduler_config(std::string_view family) {
  nlohmann::json j;
  j["_class_name"] = "EulerDiscreteScheduler";
  j["_diffusers_version"] = "0.30.0";
  j["beta_end"] = 0.012;
  j["beta_schedule"] = "scaled_linear";
  j["beta_start"] = 0.00085;
  j["clip_sample"] = false;
  j["interpolation_type"] = "linear";
  j["num_train_timesteps"] = 1000;
  j["prediction_type"] = family == "sd2" ? "v_prediction" : "epsilon";
  j["sample_max_value"] = 1.0;
  j["set_alpha_to_one"] = false;
  j["skip_prk_steps"] = true;
  j["steps_offset"] = 1;
  j["timestep_spacing"] = "leading";
  j["trained_betas"] = nullptr;
  j["use_karras_sigmas"] = false;
  return j;
}

Result<ClipVocabFiles> clip_vocab_files_from_bpe(const fs::path& bpe_gz) {
  HIPQ_ASSIGN_OR_RETURN(std::string text, read_gz(bpe_gz));
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  // CLIP uses lines 1 .. 49152-256-2 (the first line is a version header).
  constexpr size_t kMerges = 49152 - 256 - 2;
  if (lines.size() < kMerges + 1)
    return Status::Corruption(bpe_gz.string() + ": " + std::to_string(lines.size()) +
                              " lines; CLIP's bpe_simple_vocab_16e6 has at least " + std::to_string(kMerges + 1));
  const std::vector<std::string> bytes = byte_symbols();
  std::vector<std::string> vocab = bytes;
  for (const std::string& b : bytes) vocab.push_back(b + "</w>");
  ClipVocabFiles out;
  out.merges_txt = "#version: 0.2\n";
  for (size_t i = 1; i <= kMerges; ++i) {
    const std::string& m = lines[i];
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || m.find(' ', sp + 1) != std::string::npos)
      return Status::Corruption(bpe_gz.string() + ": line " + std::to_string(i + 1) + " is not a merge 'a b'");
    vocab.push_back(m.substr(0, sp) + m.substr(sp + 1));
    out.merges_txt += m + "\n";
  }
  vocab.push_back("<|startoftext|>");
  vocab.push_back("<|endoftext|>");
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < vocab.size(); ++i) j[vocab[i]] = i;
  out.vocab_json = j.dump();
  return out;
}

Status export_diffusers_folder(const ModelComponents& m, const fs::path& out, const ExportOptions& options) {
  if (options.dtype != DType::kF32 && options.dtype != DType::kF16 && options.dtype != DType::kBF16)
    return Status::InvalidArgument("export: dtype must be f32, f16 or bf16");
  std::string family = m.family;
  if (family.empty()) {
    auto it = m.weights.find("unet");
    if (it == m.weights.end()) return Status::NotFound("export: model " + m.spec + " has no unet");
    HIPQ_ASSIGN_OR_RETURN(UNetConfig unet, UNetConfig::from_weights(*it->second));
    family = unet.is_sdxl() ? "sdxl" : (unet.cross_attention_dim == 1024 ? "sd2" : "sd1");
  }
  if (family != "sdxl" && family != "sd1" && family != "sd2")
    return Status::InvalidArgument("export: unknown model family '" + family + "'");
  // The SDXL refiner (model_files.h is_sdxl_refiner): text encoder 2 alone.
  const bool refiner = family == "sdxl" && !m.weights.count("text_encoder") && m.weights.count("text_encoder_2");
  const std::vector<std::string> all =
      refiner ? std::vector<std::string>{"text_encoder_2", "unet", "vae"}
              : family == "sdxl" ? std::vector<std::string>{"text_encoder", "text_encoder_2", "unet", "vae"}
                                 : std::vector<std::string>{"text_encoder", "unet", "vae"};
  for (const std::string& c : options.components)
    if (std::find(all.begin(), all.end(), c) == all.end())
      return Status::InvalidArgument("export: unknown component '" + c + "' for a " + family + " model");
  HIPQ_RETURN_IF_ERROR(ensure_directory(out));
  for (const std::string& key : all) {
    if (!options.components.empty() &&
        std::find(options.components.begin(), options.components.end(), key) == options.components.end())
      continue;
    auto it = m.weights.find(key);
    if (it == m.weights.end()) return Status::NotFound("export: model " + m.spec + " has no " + key + " weights");
    HIPQ_ASSIGN_OR_RETURN(nlohmann::json cfg, component_config(m, key, *it->second, family));
    const fs::path dir = out / key;
    HIPQ_RETURN_IF_ERROR(write_json(dir / "config.json", cfg));
    const char* file = key.starts_with("text_encoder") ? "model.safetensors" : "diffusion_pytorch_model.safetensors";
    HIPQ_RETURN_IF_ERROR(write_weights(*it->second, dir / file, options.dtype).WithContext("export " + key));
  }
  // SD 2.x's OpenCLIP tokenizer pads with "!" (id 0), like SDXL's second one.
  if (!refiner) HIPQ_RETURN_IF_ERROR(write_tokenizer(m, out / "tokenizer", family == "sd2" ? "!" : "<|endoftext|>"));
  if (family == "sdxl") HIPQ_RETURN_IF_ERROR(write_tokenizer(m, out / "tokenizer_2", "!"));
  auto sched = m.configs.find("scheduler");
  HIPQ_RETURN_IF_ERROR(write_json(out / "scheduler" / "scheduler_config.json",
                                  sched != m.configs.end() ? sched->second : default_scheduler_config(family)));
  auto index = m.configs.find("model_index");
  return write_json(out / "model_index.json",
                    index != m.configs.end() ? index->second : diffusers_model_index(family, refiner));
}

}  // namespace hipq::engine
