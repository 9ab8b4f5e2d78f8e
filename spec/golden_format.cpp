#include "spec/golden_format.h"

#include "base/fs.h"

namespace hipq::spec {
namespace {

std::string dump_canonical(const nlohmann::json& j) {
  // Sorted keys (std::map), no spaces, UTF-8 as is: Python's
  // json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False).
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<nlohmann::json> parse_meta_json(const std::map<std::string, std::string>& meta, const std::string& key,
                                       const std::string& file, bool required) {
  auto it = meta.find(key);
  if (it == meta.end()) {
    if (required) return Status::Corruption(file + ": golden metadata has no \"" + key + "\"");
    return nlohmann::json();
  }
  try {
    return nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(file + ": golden metadata \"" + key + "\" is not valid JSON: " + e.what());
  }
}

std::string meta_string(const std::map<std::string, std::string>& meta, const std::string& key) {
  auto it = meta.find(key);
  return it == meta.end() ? std::string() : it->second;
}

}  // namespace

nlohmann::json GoldenProvenance::to_json() const {
  nlohmann::json j;
  j["reference"] = reference;
  j["reference_version"] = reference_version;
  j["reference_commit"] = reference_commit;
  j["torch_version"] = torch_version;
  j["device"] = device;
  j["precision"] = precision;
  j["pipeline_class"] = pipeline_class;
  j["scheduler_class"] = scheduler_class;
  j["created_at"] = created_at;
  j["source"] = source;
  j["extra"] = extra.is_null() ? nlohmann::json::object() : extra;
  return j;
}

Result<GoldenProvenance> GoldenProvenance::from_json(const nlohmann::json& j) {
  GoldenProvenance p;
  if (j.is_null()) return p;
  if (!j.is_object()) return Status::Corruption("provenance: expected an object, got " + std::string(j.type_name()));
  auto str = [&](const char* key, std::string& out) -> Status {
    if (!j.contains(key) || j.at(key).is_null()) return Status::Ok();
    if (!j.at(key).is_string())
      return Status::Corruption(std::string("provenance.") + key + ": expected a string, got " + j.at(key).dump());
    out = j.at(key).get<std::string>();
    return Status::Ok();
  };
  HIPQ_RETURN_IF_ERROR(str("reference", p.reference));
  HIPQ_RETURN_IF_ERROR(str("reference_version", p.reference_version));
  HIPQ_RETURN_IF_ERROR(str("reference_commit", p.reference_commit));
  HIPQ_RETURN_IF_ERROR(str("torch_version", p.torch_version));
  HIPQ_RETURN_IF_ERROR(str("device", p.device));
  HIPQ_RETURN_IF_ERROR(str("precision", p.precision));
  HIPQ_RETURN_IF_ERROR(str("pipeline_class", p.pipeline_class));
  HIPQ_RETURN_IF_ERROR(str("scheduler_class", p.scheduler_class));
  HIPQ_RETURN_IF_ERROR(str("created_at", p.created_at));
  HIPQ_RETURN_IF_ERROR(str("source", p.source));
  if (j.contains("extra") && j.at("extra").is_object()) p.extra = j.at("extra");
  return p;
}

std::vector<std::string> GoldenProvenance::missing_fields() const {
  std::vector<std::string> missing;
  if (reference.empty()) missing.push_back("reference");
  if (reference_version.empty()) missing.push_back("reference_version");
  if (reference == "diffusers" && torch_version.empty()) missing.push_back("torch_version");
  if (reference == "hipq" && reference_commit.empty()) missing.push_back("reference_commit");
  if (device.empty()) missing.push_back("device");
  if (precision.empty()) missing.push_back("precision");
  if (created_at.empty()) missing.push_back("created_at");
  return missing;
}

std::string golden_key_material(std::string_view weights_sha256, const GenerationSettings& s,
                                const InputDigests& inputs) {
  nlohmann::json j;
  j["key_version"] = kGoldenKeyVersion;
  j["weights_sha256"] = std::string(weights_sha256);
  j["prompt"] = s.prompt;
  j["negative_prompt"] = s.negative_prompt;
  j["seed"] = s.seed;
  j["width"] = s.width;
  j["height"] = s.height;
  j["steps"] = s.steps;
  j["guidance"] = format_guidance(s.guidance);
  j["sampler"] = s.sampler;
  j["rng"] = s.rng;
  // The reference draws the initial noise in the pipeline's dtype, so the same
  // seed is another image at fp16/bf16: those precisions are in the key. fp32
  // keys stay as they were (no "precision" member).
  if (s.precision != "fp32") j["precision"] = s.precision;
  // The schedule options change the image too; keys of jobs without them stay
  // as they were.
  if (!s.timestep_spacing.empty()) j["timestep_spacing"] = s.timestep_spacing;
  if (s.guidance_rescale != 0.0f) j["guidance_rescale"] = format_guidance(s.guidance_rescale);
  // The decode's dtype changes the image (not the latent): only when set, so
  // the key of every job that leaves it to the precision stays as it was.
  if (!s.vae_precision.empty()) j["vae_precision"] = s.vae_precision;
  // Files by content, never by path: the same LoRA moved elsewhere is the
  // same golden, an edited one another.
  if (!s.loras.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < s.loras.size(); ++i)
      list.push_back({{"sha256", i < inputs.loras.size() ? inputs.loras[i] : std::string()},
                      {"scale", format_guidance(s.loras[i].scale)}});
    j["loras"] = std::move(list);
  }
  if (!s.init_image.empty()) {
    j["init_image_sha256"] = inputs.init_image;
    j["strength"] = format_guidance(s.strength);
  }
  if (!s.refiner.empty()) {
    j["refiner"] = {{"weights_sha256", inputs.refiner_weights},
                    {"switch_at", format_guidance(s.refiner_switch_at)},
                    {"aesthetic_score", format_guidance(s.aesthetic_score)},
                    {"negative_aesthetic_score", format_guidance(s.negative_aesthetic_score)}};
  } else if (s.aesthetic_score != GenerationSettings{}.aesthetic_score ||
             s.negative_aesthetic_score != GenerationSettings{}.negative_aesthetic_score) {
    // A refiner run as the img2img model conditions on the scores itself: they
    // change its image, so they are in the key when not the defaults (keys of
    // every job with the defaults stay as they were).
    j["aesthetic_score"] = format_guidance(s.aesthetic_score);
    j["negative_aesthetic_score"] = format_guidance(s.negative_aesthetic_score);
  }
  return dump_canonical(j);
}

std::string golden_key(std::string_view weights_sha256, const GenerationSettings& settings,
                       const InputDigests& inputs) {
  return sha256_hex(golden_key_material(weights_sha256, settings, inputs));
}

std::string golden_file_name(std::string_view key) { return std::string(key) + ".safetensors"; }

Result<std::filesystem::path> find_golden_file(const std::filesystem::path& dir, std::string_view key) {
  std::filesystem::path p = dir / golden_file_name(key);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec))
    return Status::NotFound("no golden " + std::string(key) + " in " + dir.string() + " (looked for " + p.string() +
                            ")");
  return p;
}

std::map<std::string, std::string> golden_metadata(const GoldenHeader& h) {
  std::map<std::string, std::string> meta;
  meta["format"] = std::string(kGoldenFormat);
  meta["key"] = h.key;
  meta["model"] = h.model;
  meta["weights_sha256"] = h.weights_sha256;
  meta["settings"] = dump_canonical(h.settings.to_json());
  meta["scheduler_config"] = dump_canonical(h.scheduler_config.is_null() ? nlohmann::json::object()
                                                                          : h.scheduler_config);
  meta["provenance"] = dump_canonical(h.provenance.to_json());
  meta["content_sha256"] = h.content_sha256;
  meta["created_at"] = h.provenance.created_at;
  meta["key_material"] = golden_key_material(h.weights_sha256, h.settings, h.inputs);
  if (!h.inputs.empty()) meta["inputs"] = dump_canonical(h.inputs.to_json());
  return meta;
}

Result<GoldenHeader> read_golden_metadata(const std::map<std::string, std::string>& meta, const std::string& file) {
  std::string format = meta_string(meta, "format");
  if (format != kGoldenFormat)
    return Status::Corruption(file + ": not a hipq golden (metadata \"format\" is \"" + format + "\", expected \"" +
                              std::string(kGoldenFormat) + "\")");
  GoldenHeader g;
  g.key = meta_string(meta, "key");
  g.model = meta_string(meta, "model");
  g.weights_sha256 = meta_string(meta, "weights_sha256");
  g.content_sha256 = meta_string(meta, "content_sha256");

  HIPQ_ASSIGN_OR_RETURN(nlohmann::json settings_json, parse_meta_json(meta, "settings", file, true));
  auto settings = GenerationSettings::from_json(settings_json);
  if (!settings.ok()) return Status::Corruption(file + ": " + settings.status().message());
  g.settings = *settings;
  if (meta.count("inputs")) {
    HIPQ_ASSIGN_OR_RETURN(nlohmann::json inputs_json, parse_meta_json(meta, "inputs", file, true));
    auto inputs = InputDigests::from_json(inputs_json);
    if (!inputs.ok()) return Status::Corruption(file + ": " + inputs.status().message());
    g.inputs = *inputs;
  }
  if (Status st = g.inputs.check_against(g.settings); !st.ok()) return Status::Corruption(file + ": " + st.message());
  // Informational, and written by Python, whose json module emits the
  // non-JSON tokens -Infinity / Infinity / NaN for non-finite floats (e.g.
  // DPMSolver's lambda_min_clipped): read those as strings.
  {
    std::string text = meta_string(meta, "scheduler_config");
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"-Infinity", "\"-inf\""},
                                   {"Infinity", "\"inf\""}, {"NaN", "\"nan\""}}) {
      if (nlohmann::json::accept(text)) break;
      for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
        text.replace(pos, from.size(), to);
    }
    std::map<std::string, std::string> fixed = {{"scheduler_config", text}};
    HIPQ_ASSIGN_OR_RETURN(g.scheduler_config, parse_meta_json(fixed, "scheduler_config", file, false));
  }
  if (g.scheduler_config.is_null()) g.scheduler_config = nlohmann::json::object();
  HIPQ_ASSIGN_OR_RETURN(nlohmann::json prov_json, parse_meta_json(meta, "provenance", file, false));
  auto prov = GoldenProvenance::from_json(prov_json);
  if (!prov.ok()) return Status::Corruption(file + ": " + prov.status().message());
  g.provenance = *prov;
  return g;
}

Result<bool> check_golden_header(const GoldenHeader& g, const std::string& file, bool allow_unpinned) {
  if (g.weights_sha256.empty())
    return Status::FailedPrecondition(file + ": golden has no weights_sha256: nothing ties it to a model");
  std::string expected_key = golden_key(g.weights_sha256, g.settings, g.inputs);
  if (g.key != expected_key)
    return Status::Corruption(file + ": key \"" + g.key + "\" does not match its settings and weights (expected " +
                              expected_key + ")");
  auto missing = g.provenance.missing_fields();
  if (missing.empty()) return true;
  if (!allow_unpinned)
    return Status::FailedPrecondition(file + ": golden provenance is incomplete (missing: " + join_names(missing) +
                                      "); refusing it. Re-make it with tools/golden/make_goldens.py, or accept "
                                      "it as unpinned with --allow-unpinned");
  return false;
}

}  // namespace hipq::spec
