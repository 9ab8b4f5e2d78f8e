#include "spec/input_digests.h"

#include <algorithm>

namespace hipq::spec {

bool is_sha256_hex(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

nlohmann::json InputDigests::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (!loras.empty()) j["loras"] = loras;
  if (!init_image.empty()) j["init_image"] = init_image;
  if (!refiner_weights.empty()) j["refiner_weights"] = refiner_weights;
  return j;
}

Result<InputDigests> InputDigests::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Status::InvalidArgument("input digests: expected a JSON object, got " + j.dump());
  InputDigests d;
  auto digest = [](const nlohmann::json& v, const std::string& field, std::string& out) -> Status {
    if (!v.is_string() || !is_sha256_hex(v.get<std::string>()))
      return Status::InvalidArgument("input digests." + field + ": expected 64 lower-case hex digits (a sha256), got " +
                                     v.dump());
    out = v.get<std::string>();
    return Status::Ok();
  };
  for (const auto& [key, v] : j.items()) {
    if (key == "loras") {
      if (!v.is_array()) return Status::InvalidArgument("input digests.loras: expected an array, got " + v.dump());
      for (size_t i = 0; i < v.size(); ++i) {
        std::string one;
        HIPQ_RETURN_IF_ERROR(digest(v[i], "loras[" + std::to_string(i) + "]", one));
        d.loras.push_back(std::move(one));
      }
    } else if (key == "init_image") {
      HIPQ_RETURN_IF_ERROR(digest(v, key, d.init_image));
    } else if (key == "refiner_weights") {
      HIPQ_RETURN_IF_ERROR(digest(v, key, d.refiner_weights));
    } else {
      return Status::InvalidArgument("input digests: unknown member '" + key +
                                     "' (known: loras, init_image, refiner_weights)");
    }
  }
  return d;
}

Status InputDigests::check_against(const GenerationSettings& s) const {
  if (loras.size() != s.loras.size())
    return Status::InvalidArgument(std::to_string(loras.size()) + " LoRA digests for " + std::to_string(s.loras.size()) +
                                   " LoRAs in the settings: every LoRA file needs its sha256");
  if (s.init_image.empty() != init_image.empty())
    return Status::InvalidArgument(s.init_image.empty() ? "an init image digest for settings without an init image"
                                                        : "init image " + s.init_image + " has no sha256");
  if (s.refiner.empty() && !refiner_weights.empty())
    return Status::InvalidArgument("a refiner weights digest for settings without a refiner");
  return Status::Ok();
}

}  // namespace hipq::spec

namespace hipq::spec {

std::string lora_set_key(const std::vector<LoraSpec>& loras, const std::vector<std::string>& sha256s) {
  std::string key;
  for (size_t i = 0; i < loras.size(); ++i) {
    if (!key.empty()) key += ',';
    key += i < sha256s.size() ? sha256s[i] : std::string();
    key += '*';
    key += format_guidance(loras[i].scale);
  }
  return key;
}

}  // namespace hipq::spec
