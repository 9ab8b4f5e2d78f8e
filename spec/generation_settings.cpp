#include "spec/generation_settings.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "base/did_you_mean.h"

namespace hipq::spec {
namespace {

std::string type_of(const nlohmann::json& v) { return v.type_name(); }

Status wrong_type(std::string_view field, std::string_view expected, const nlohmann::json& v) {
  return Status::InvalidArgument("settings." + std::string(field) + ": expected " + std::string(expected) +
                                 ", got " + type_of(v) + " " + v.dump());
}

bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

std::string join(const std::vector<std::string>& list) { return join_names(list); }

}  // namespace

const std::vector<SamplerName>& sampler_names() {
  static const std::vector<SamplerName> k = {
      {"euler", "Euler", false, SamplerKind::kEuler},
      {"euler_karras", "Euler", true, SamplerKind::kEulerKarras},
      {"euler_ancestral", "Euler a", false, SamplerKind::kEulerAncestral},
      {"ddim", "DDIM", false, SamplerKind::kDdim},
      {"dpmpp_2m", "DPM++ 2M", false, SamplerKind::kDpmpp2m},
      {"dpmpp_2m_karras", "DPM++ 2M", true, SamplerKind::kDpmpp2mKarras},
      {"dpmpp_2m_sde", "DPM++ 2M SDE", false, SamplerKind::kDpmpp2mSde},
      {"dpmpp_2m_sde_karras", "DPM++ 2M SDE", true, SamplerKind::kDpmpp2mSdeKarras},
      {"heun", "Heun", false, SamplerKind::kHeun},
      {"heun_karras", "Heun", true, SamplerKind::kHeunKarras},
      {"dpm2", "DPM2", false, SamplerKind::kDpm2},
      {"dpm2_karras", "DPM2", true, SamplerKind::kDpm2Karras},
      {"dpm2_ancestral", "DPM2 a", false, SamplerKind::kDpm2Ancestral},
      {"dpm2_ancestral_karras", "DPM2 a", true, SamplerKind::kDpm2AncestralKarras},
      {"lms", "LMS", false, SamplerKind::kLms},
      {"lms_karras", "LMS", true, SamplerKind::kLmsKarras},
      {"unipc", "UniPC", false, SamplerKind::kUnipc},
      {"deis", "DEIS", false, SamplerKind::kDeis},
      {"ddpm", "DDPM", false, SamplerKind::kDdpm},
      {"lcm", "LCM", false, SamplerKind::kLcm},
      {"dpmpp_3m_sde", "DPM++ 3M SDE", false, SamplerKind::kDpmpp3mSde},
      {"dpmpp_3m_sde_karras", "DPM++ 3M SDE", true, SamplerKind::kDpmpp3mSdeKarras},
  };
  return k;
}

const SamplerName* find_sampler(std::string_view name) {
  for (const SamplerName& s : sampler_names())
    if (s.name == name) return &s;
  return nullptr;
}

std::string suggest_sampler(std::string_view name) {
  // The web UI's name ("Euler a", "DPM++ 2M SDE"; '_' read as ' ') names the
  // sampler without a Karras schedule.
  auto fold = [](std::string_view s) {
    std::string out;
    for (char c : s) out += c == '_' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  for (const SamplerName& s : sampler_names())
    if (!s.karras && !s.a1111.empty() && fold(s.a1111) == fold(name)) return "; did you mean '" + s.name + "'?";
  return did_you_mean(name, known_samplers());
}

const std::vector<std::string>& known_samplers() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> names;
    for (const SamplerName& s : sampler_names()) names.push_back(s.name);
    return names;
  }();
  return k;
}
const std::vector<std::string>& known_precisions() {
  static const std::vector<std::string> k = {"fp32", "fp16", "bf16", "fp8"};
  return k;
}
const std::vector<std::string>& known_rngs() {
  static const std::vector<std::string> k = {"torch-cpu", "torch-cuda"};
  return k;
}
const std::vector<std::string>& img2img_samplers() {
  static const std::vector<std::string> k = {"euler",    "euler_karras",    "euler_ancestral", "ddim",
                                             "dpmpp_2m", "dpmpp_2m_karras", "dpmpp_2m_sde",    "dpmpp_2m_sde_karras"};
  return k;
}

const std::vector<std::string>& known_timestep_spacings() {
  static const std::vector<std::string> k = {"leading", "trailing", "linspace"};
  return k;
}

const std::vector<std::string>& known_vae_precisions() {
  static const std::vector<std::string> k = {"fp32", "bf16"};
  return k;
}

std::string format_guidance(float guidance) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(guidance));
  return buf;
}

std::string join_names(const std::vector<std::string>& names, std::string_view separator) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out.append(separator);
    out.append(n);
  }
  return out;
}

nlohmann::json GenerationSettings::to_json() const {
  nlohmann::json j;
  j["prompt"] = prompt;
  j["negative_prompt"] = negative_prompt;
  j["seed"] = seed;
  j["width"] = width;
  j["height"] = height;
  j["steps"] = steps;
  // Through the 6-digit text so 7.1f reads back as 7.1, not 7.099999904632568.
  j["guidance"] = std::stod(format_guidance(guidance));
  j["sampler"] = sampler;
  j["precision"] = precision;
  j["rng"] = rng;
  if (!timestep_spacing.empty()) j["timestep_spacing"] = timestep_spacing;
  if (guidance_rescale != 0.0f) j["guidance_rescale"] = std::stod(format_guidance(guidance_rescale));
  if (!init_image.empty()) j["init_image"] = init_image;
  if (strength != 1.0f) j["strength"] = std::stod(format_guidance(strength));
  if (!loras.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& l : loras) list.push_back(l.to_json());
    j["loras"] = std::move(list);
  }
  if (!refiner.empty()) {
    j["refiner"] = refiner;
    j["refiner_switch_at"] = std::stod(format_guidance(refiner_switch_at));
  }
  // A refiner run as the img2img model conditions on the scores itself, so
  // they travel whenever a refiner is named or they are not the defaults.
  const GenerationSettings defaults;
  if (!refiner.empty() || aesthetic_score != defaults.aesthetic_score ||
      negative_aesthetic_score != defaults.negative_aesthetic_score) {
    j["aesthetic_score"] = std::stod(format_guidance(aesthetic_score));
    j["negative_aesthetic_score"] = std::stod(format_guidance(negative_aesthetic_score));
  }
  // Only when set: every default job's JSON (and what is derived from it) stays as it was.
  if (!vae_precision.empty()) j["vae_precision"] = vae_precision;
  return j;
}

Result<GenerationSettings> GenerationSettings::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Status::InvalidArgument("settings: expected an object, got " + type_of(j));
  GenerationSettings s;
  auto str = [&](const char* key, std::string& out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    const auto& v = j.at(key);
    if (!v.is_string()) return wrong_type(key, "a string", v);
    out = v.get<std::string>();
    return Status::Ok();
  };
  auto integer = [&](const char* key, int& out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    const auto& v = j.at(key);
    if (!v.is_number_integer()) return wrong_type(key, "an integer", v);
    int64_t x = v.get<int64_t>();
    if (x < INT32_MIN || x > INT32_MAX) return wrong_type(key, "a 32-bit integer", v);
    out = static_cast<int>(x);
    return Status::Ok();
  };
  HIPQ_RETURN_IF_ERROR(str("prompt", s.prompt));
  HIPQ_RETURN_IF_ERROR(str("negative_prompt", s.negative_prompt));
  if (j.contains("seed")) {
    const auto& v = j.at("seed");
    if (v.is_number_unsigned()) {
      s.seed = v.get<uint64_t>();
    } else if (v.is_number_integer() && v.get<int64_t>() >= 0) {
      s.seed = static_cast<uint64_t>(v.get<int64_t>());
    } else {
      return wrong_type("seed", "a non-negative integer", v);
    }
  }
  HIPQ_RETURN_IF_ERROR(integer("width", s.width));
  HIPQ_RETURN_IF_ERROR(integer("height", s.height));
  HIPQ_RETURN_IF_ERROR(integer("steps", s.steps));
  if (j.contains("guidance")) {
    const auto& v = j.at("guidance");
    if (!v.is_number()) return wrong_type("guidance", "a number", v);
    s.guidance = v.get<float>();
  }
  HIPQ_RETURN_IF_ERROR(str("sampler", s.sampler));
  HIPQ_RETURN_IF_ERROR(str("precision", s.precision));
  HIPQ_RETURN_IF_ERROR(str("rng", s.rng));
  HIPQ_RETURN_IF_ERROR(str("timestep_spacing", s.timestep_spacing));
  if (j.contains("guidance_rescale")) {
    const auto& v = j.at("guidance_rescale");
    if (!v.is_number()) return wrong_type("guidance_rescale", "a number", v);
    s.guidance_rescale = v.get<float>();
  }
  HIPQ_RETURN_IF_ERROR(str("init_image", s.init_image));
  if (j.contains("strength")) {
    const auto& v = j.at("strength");
    if (!v.is_number()) return wrong_type("strength", "a number", v);
    s.strength = v.get<float>();
  }
  if (j.contains("loras")) {
    const auto& v = j.at("loras");
    if (!v.is_array()) return wrong_type("loras", "an array", v);
    for (size_t i = 0; i < v.size(); ++i) {
      auto l = LoraSpec::from_json(v[i]);
      if (!l.ok()) return Status::InvalidArgument("settings.loras[" + std::to_string(i) + "]: " + l.status().message());
      s.loras.push_back(*std::move(l));
    }
  }
  HIPQ_RETURN_IF_ERROR(str("refiner", s.refiner));
  auto number = [&](const char* key, float& out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    const auto& v = j.at(key);
    if (!v.is_number()) return wrong_type(key, "a number", v);
    out = v.get<float>();
    return Status::Ok();
  };
  HIPQ_RETURN_IF_ERROR(number("refiner_switch_at", s.refiner_switch_at));
  HIPQ_RETURN_IF_ERROR(number("aesthetic_score", s.aesthetic_score));
  HIPQ_RETURN_IF_ERROR(number("negative_aesthetic_score", s.negative_aesthetic_score));
  HIPQ_RETURN_IF_ERROR(str("vae_precision", s.vae_precision));
  return s;
}

Status GenerationSettings::validate() const {
  if (width < 8 || width % 8 != 0)
    return Status::InvalidArgument("width " + std::to_string(width) + " is not a positive multiple of 8");
  if (height < 8 || height % 8 != 0)
    return Status::InvalidArgument("height " + std::to_string(height) + " is not a positive multiple of 8");
  if (steps < 1) return Status::InvalidArgument("steps " + std::to_string(steps) + " must be at least 1");
  if (steps > 10000) return Status::InvalidArgument("steps " + std::to_string(steps) + " is more than 10000");
  if (!(guidance >= 0.0f && guidance < 1e4f))
    return Status::InvalidArgument("guidance " + format_guidance(guidance) + " must be a finite number >= 0");
  if (!contains(known_samplers(), sampler))
    return Status::InvalidArgument("unknown sampler \"" + sampler + "\"" + suggest_sampler(sampler) +
                                   "; known: " + join(known_samplers()));
  if (!contains(known_precisions(), precision))
    return Status::InvalidArgument("unknown precision \"" + precision + "\"; known: " + join(known_precisions()));
  if (!contains(known_rngs(), rng))
    return Status::InvalidArgument("unknown rng \"" + rng + "\"; known: " + join(known_rngs()));
  if (!timestep_spacing.empty() && !contains(known_timestep_spacings(), timestep_spacing))
    return Status::InvalidArgument("unknown timestep_spacing \"" + timestep_spacing +
                                   "\"; known: " + join(known_timestep_spacings()) + " (or none: the model's own)");
  if (!(guidance_rescale >= 0.0f && guidance_rescale <= 1.0f))
    return Status::InvalidArgument("guidance_rescale " + format_guidance(guidance_rescale) + " must be in 0..1");
  if (!vae_precision.empty() && !contains(known_vae_precisions(), vae_precision))
    return Status::InvalidArgument("unknown vae_precision \"" + vae_precision + "\"" +
                                   did_you_mean(vae_precision, known_vae_precisions()) +
                                   "; known: " + join(known_vae_precisions()) +
                                   " (or none: the precision's own, fp32 for an fp16 SDXL job)");
  if (!(strength > 0.0f && strength <= 1.0f))
    return Status::InvalidArgument("strength " + format_guidance(strength) + " must be in (0, 1]");
  if (init_image.empty() && strength != 1.0f)
    return Status::InvalidArgument("strength " + format_guidance(strength) +
                                   " needs an init_image (without one the job is text-to-image: strength 1)");
  if (!init_image.empty() && !contains(img2img_samplers(), sampler))
    return Status::InvalidArgument("img2img with sampler \"" + sampler + "\" is not implemented yet; img2img runs with " +
                                   join(img2img_samplers()));
  if (!init_image.empty() && denoising_steps(steps, strength) < 1)
    return Status::InvalidArgument("strength " + format_guidance(strength) + " of " + std::to_string(steps) +
                                   " steps runs no step (int(steps * strength) = 0); raise the strength or the steps");
  HIPQ_RETURN_IF_ERROR(validate_loras(loras));
  if (!(refiner_switch_at > 0.0f && refiner_switch_at < 1.0f))
    return Status::InvalidArgument("refiner_switch_at " + format_guidance(refiner_switch_at) +
                                   " must be in (0, 1): the fraction of the schedule the base model runs");
  // The base + refiner split (engine/refiner.h) hands the refiner a schedule
  // cut as img2img cuts it: the img2img samplers are the ones it supports.
  if (!refiner.empty() && !contains(img2img_samplers(), sampler))
    return Status::InvalidArgument("a base + refiner job with sampler \"" + sampler +
                                   "\" is not implemented: its schedule is not split between two models yet; "
                                   "base + refiner runs with " + join(img2img_samplers()));
  if (!refiner.empty() && !init_image.empty())
    return Status::InvalidArgument("refiner with an init_image is not implemented: run the refiner itself as the "
                                   "img2img model (model = the refiner, with init_image and strength)");
  if (!(aesthetic_score >= 0.0f && aesthetic_score <= 10.0f))
    return Status::InvalidArgument("aesthetic_score " + format_guidance(aesthetic_score) + " must be in 0..10");
  if (!(negative_aesthetic_score >= 0.0f && negative_aesthetic_score <= 10.0f))
    return Status::InvalidArgument("negative_aesthetic_score " + format_guidance(negative_aesthetic_score) +
                                   " must be in 0..10");
  return Status::Ok();
}

int denoising_steps(int steps, float strength) {
  const double product = static_cast<double>(steps) * std::stod(format_guidance(strength));
  if (!(product >= 0.0)) return 0;
  if (product >= static_cast<double>(steps)) return steps;
  return static_cast<int>(product);
}

}  // namespace hipq::spec
