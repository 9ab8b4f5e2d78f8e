#include "engine/image_parameters.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>

#include "base/build_info.h"

namespace hipq::engine {
namespace {

// The web UI separates fields with ", " and parses "Key: value" pairs; a value
// holding ',' ':' or a newline is written as a JSON string (its quote()).
std::string field_value(const std::string& v) {
  if (v.find_first_of(",:\n") == std::string::npos) return v;
  return nlohmann::json(v).dump();
}

std::string one_line(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  return out;
}

std::string model_name(const std::string& spec) {
  if (spec.rfind("synthetic:", 0) == 0) return spec;
  std::filesystem::path p(spec);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "folder/" -> "folder"
  std::string name = p.stem().string();
  return name.empty() ? spec : name;
}

std::string build_string() {
  std::string sha = build_info::kGitSha;
  if (sha.size() > 7) sha = sha.substr(0, 7);
  std::string out = std::string("hipq ") + build_info::kVersion;
  return sha.empty() ? out : out + " (" + sha + ")";
}

}  // namespace

std::string a1111_sampler_name(const std::string& sampler) {
  const spec::SamplerName* known = spec::find_sampler(sampler);
  return known ? known->a1111 : std::string();
}

std::string a1111_parameters(const spec::GenerationSettings& s, const ImageProvenance& p) {
  // Prompt lines first; a prompt that itself spans lines keeps them (the web
  // UI does the same), the negative prompt is the line starting "Negative prompt: ".
  std::string out = s.prompt;
  for (const LoraProvenance& l : p.loras) {
    char sc[32];
    std::snprintf(sc, sizeof sc, "%g", static_cast<double>(l.scale));
    out += std::string(" <lora:") + l.name + ":" + sc + ">";
  }
  out += "\n";
  if (!s.negative_prompt.empty()) out += "Negative prompt: " + one_line(s.negative_prompt) + "\n";
  std::vector<std::string> f;
  f.push_back("Steps: " + std::to_string(s.steps));
  std::string sampler = a1111_sampler_name(s.sampler);
  f.push_back("Sampler: " + field_value(sampler.empty() ? s.sampler : sampler));
  if (const spec::SamplerName* known = spec::find_sampler(s.sampler); known && known->karras)
    f.push_back("Schedule type: Karras");
  char cfg[32];
  std::snprintf(cfg, sizeof cfg, "%g", static_cast<double>(s.guidance));
  f.push_back(std::string("CFG scale: ") + cfg);
  // The CFG-rescale extension's field; the spacing has no web-UI field of its own.
  if (s.guidance_rescale != 0.0f) f.push_back("CFG Rescale phi: " + spec::format_guidance(s.guidance_rescale));
  if (!s.timestep_spacing.empty()) f.push_back("Timestep spacing: " + s.timestep_spacing);
  f.push_back("Seed: " + std::to_string(s.seed));
  f.push_back("Size: " + std::to_string(s.width) + "x" + std::to_string(s.height));
  if (!p.weights_sha256.empty()) f.push_back("Model hash: " + p.weights_sha256.substr(0, 10));
  if (!p.model_spec.empty()) f.push_back("Model: " + field_value(model_name(p.model_spec)));
  if (!p.loras.empty()) {
    std::string hashes;
    for (const LoraProvenance& l : p.loras) hashes += (hashes.empty() ? "" : ", ") + l.name + ": " + l.a1111_hash;
    f.push_back("Lora hashes: " + nlohmann::json(hashes).dump());
  }
  // img2img: the web UI's field (the init image itself is in the "hipq" chunk's settings).
  if (!s.init_image.empty()) f.push_back("Denoising strength: " + spec::format_guidance(s.strength));
  // SDXL base + refiner, as the web UI writes them ("Refiner: NAME", the
  // fraction of the steps the base runs).
  if (!s.refiner.empty()) {
    f.push_back("Refiner: " + field_value(model_name(s.refiner)));
    f.push_back("Refiner switch at: " + spec::format_guidance(s.refiner_switch_at));
  }
  f.push_back(std::string("RNG: ") + (s.rng == "torch-cuda" ? "GPU" : "CPU"));
  if (p.batch_id > 0) {
    const std::string id = std::to_string(p.batch_id);
    f.push_back("Batch: " + (p.batch_name.empty() ? id : field_value(p.batch_name + " (" + id + ")")));
  }
  if (p.job_id > 0) f.push_back("Job: " + std::to_string(p.job_id));
  f.push_back("Precision: " + s.precision);
  // The decode's dtype, only when the job chose it (no web-UI field of its own).
  if (!s.vae_precision.empty()) f.push_back("VAE precision: " + s.vae_precision);
  f.push_back("Build: " + field_value(build_string()));
  f.push_back("Version: hipq");
  std::string line;
  for (const auto& x : f) line += (line.empty() ? "" : ", ") + x;
  return out + line;
}

std::vector<spec::PngText> png_metadata(const spec::GenerationSettings& s, const ImageProvenance& p) {
  nlohmann::json j;
  j["format"] = "hipq-image/1";
  j["settings"] = s.to_json();
  j["model"] = p.model_spec;
  j["weights_sha256"] = p.weights_sha256;
  if (p.batch_id > 0) j["batch"] = {{"id", p.batch_id}, {"name", p.batch_name}};
  if (!p.loras.empty()) {
    j["loras"] = nlohmann::json::array();
    for (const LoraProvenance& l : p.loras)
      j["loras"].push_back({{"name", l.name}, {"scale", l.scale}, {"sha256", l.sha256}, {"a1111_hash", l.a1111_hash}});
  }
  if (p.job_id > 0) j["job"] = {{"id", p.job_id}, {"attempt", p.attempt}};
  j["hipq_version"] = build_info::kVersion;
  j["build_sha"] = build_info::kGitSha;
  return {{"parameters", a1111_parameters(s, p)}, {"hipq", j.dump()}, {"Software", build_string()}};
}

}  // namespace hipq::engine
