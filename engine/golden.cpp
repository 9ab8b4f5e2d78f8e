#include "engine/golden.h"

#include <cstring>
#include <map>

#include "base/fs.h"
#include "engine/safetensors.h"

namespace hipq::engine {
namespace {

constexpr const char* kLatent = "latent";
constexpr const char* kImage = "image";

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

std::string golden_key_material(std::string_view weights_sha256, const GenerationSettings& s) {
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
  return dump_canonical(j);
}

std::string golden_key(std::string_view weights_sha256, const GenerationSettings& settings) {
  return sha256_hex(golden_key_material(weights_sha256, settings));
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

std::string golden_content_sha256(const Golden& g) {
  std::string bytes;
  bytes.reserve(g.latent.size() * sizeof(float) + g.image.size());
  bytes.append(reinterpret_cast<const char*>(g.latent.data()), g.latent.size() * sizeof(float));
  bytes.append(reinterpret_cast<const char*>(g.image.data()), g.image.size());
  return sha256_hex(bytes);
}

Status write_golden(const std::filesystem::path& path, Golden g) {
  int64_t numel = 1;
  for (int64_t d : g.latent_shape) numel *= d;
  if (g.latent_shape.empty() || numel != static_cast<int64_t>(g.latent.size()))
    return Status::InvalidArgument(path.string() + ": golden latent holds " + std::to_string(g.latent.size()) +
                                   " values, its shape says " + std::to_string(numel));
  if (g.has_image() &&
      static_cast<size_t>(g.image_width) * static_cast<size_t>(g.image_height) * 3 != g.image.size())
    return Status::InvalidArgument(path.string() + ": golden image holds " + std::to_string(g.image.size()) +
                                   " bytes, not " + std::to_string(g.image_width) + "x" +
                                   std::to_string(g.image_height) + "x3");
  g.key = golden_key(g.weights_sha256, g.settings);
  g.content_sha256 = golden_content_sha256(g);

  std::vector<std::pair<std::string, HostTensor>> tensors;
  tensors.emplace_back(kLatent, HostTensor::from_f32(g.latent, g.latent_shape));
  if (g.has_image()) {
    HostTensor img = HostTensor::owned(kernels::DType::kU8, {g.image_height, g.image_width, 3});
    std::memcpy(img.mutable_data(), g.image.data(), g.image.size());
    tensors.emplace_back(kImage, std::move(img));
  }
  std::map<std::string, std::string> meta;
  meta["format"] = std::string(kGoldenFormat);
  meta["key"] = g.key;
  meta["model"] = g.model;
  meta["weights_sha256"] = g.weights_sha256;
  meta["settings"] = dump_canonical(g.settings.to_json());
  meta["scheduler_config"] = dump_canonical(g.scheduler_config.is_null() ? nlohmann::json::object()
                                                                          : g.scheduler_config);
  meta["provenance"] = dump_canonical(g.provenance.to_json());
  meta["content_sha256"] = g.content_sha256;
  meta["created_at"] = g.provenance.created_at;
  meta["key_material"] = golden_key_material(g.weights_sha256, g.settings);
  return write_safetensors(path, tensors, meta);
}

Result<Golden> read_golden(const std::filesystem::path& path, const GoldenReadOptions& options) {
  const std::string file = path.string();
  auto opened = SafetensorsFile::open(path);
  if (!opened.ok()) return opened.status().WithContext("golden");
  const auto& st = *opened;
  const auto& meta = st->metadata();

  std::string format = meta_string(meta, "format");
  if (format != kGoldenFormat)
    return Status::Corruption(file + ": not a hipq golden (metadata \"format\" is \"" + format + "\", expected \"" +
                              std::string(kGoldenFormat) + "\")");
  Golden g;
  g.key = meta_string(meta, "key");
  g.model = meta_string(meta, "model");
  g.weights_sha256 = meta_string(meta, "weights_sha256");
  g.content_sha256 = meta_string(meta, "content_sha256");

  HIPQ_ASSIGN_OR_RETURN(nlohmann::json settings_json, parse_meta_json(meta, "settings", file, true));
  auto settings = GenerationSettings::from_json(settings_json);
  if (!settings.ok()) return Status::Corruption(file + ": " + settings.status().message());
  g.settings = *settings;
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

  // Tensors and content hash first: a damaged file is refused whatever its provenance says.
  auto latent = st->get(kLatent);
  if (!latent.ok()) return Status::Corruption(file + ": golden has no \"latent\" tensor");
  if (latent->dtype != kernels::DType::kF32 || latent->shape.size() != 4)
    return Status::Corruption(file + ": golden \"latent\" must be f32 with 4 dims, is " + latent->describe());
  std::string bytes(static_cast<const char*>(latent->data), latent->nbytes);
  if (st->contains(kImage)) {
    auto image = st->get(kImage);
    if (!image.ok()) return image.status();
    if (image->dtype != kernels::DType::kU8 || image->shape.size() != 3 || image->shape[2] != 3)
      return Status::Corruption(file + ": golden \"image\" must be u8 [H, W, 3], is " + image->describe());
    bytes.append(static_cast<const char*>(image->data), image->nbytes);
    if (options.load_tensors) {
      g.image_height = static_cast<int>(image->shape[0]);
      g.image_width = static_cast<int>(image->shape[1]);
      const auto* p = static_cast<const uint8_t*>(image->data);
      g.image.assign(p, p + image->nbytes);
    }
  }
  std::string actual = sha256_hex(bytes);
  if (g.content_sha256.empty())
    return Status::Corruption(file + ": golden metadata has no \"content_sha256\"");
  if (actual != g.content_sha256)
    return Status::Corruption(file + ": content hash mismatch: metadata says " + g.content_sha256 +
                              ", tensors hash to " + actual + " (the file was modified or damaged)");
  if (options.load_tensors) {
    g.latent_shape = latent->shape;
    g.latent.resize(latent->nbytes / sizeof(float));
    std::memcpy(g.latent.data(), latent->data, latent->nbytes);
  }

  if (g.weights_sha256.empty())
    return Status::FailedPrecondition(file + ": golden has no weights_sha256: nothing ties it to a model");
  std::string expected_key = golden_key(g.weights_sha256, g.settings);
  if (g.key != expected_key)
    return Status::Corruption(file + ": key \"" + g.key + "\" does not match its settings and weights (expected " +
                              expected_key + ")");

  auto missing = g.provenance.missing_fields();
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    if (!options.allow_unpinned)
      return Status::FailedPrecondition(file + ": golden provenance is incomplete (missing: " + list +
                                        "); refusing it. Re-make it with tools/golden/make_goldens.py, or accept "
                                        "it as unpinned with --allow-unpinned");
    g.pinned = false;
  }
  return g;
}

}  // namespace hipq::engine
