#include "spec/lora_spec.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace hipq::spec {

Status LoraSpec::validate() const {
  if (path.empty()) return Status::InvalidArgument("lora: path is empty");
  if (!std::isfinite(scale) || std::fabs(scale) > kMaxLoraScale) {
    return Status::InvalidArgument(std::string("lora ") + path + ": scale " + std::to_string(scale) +
                                   " must be a finite number in [-16, 16]");
  }
  return Status::Ok();
}

nlohmann::json LoraSpec::to_json() const { return {{"path", path}, {"scale", scale}}; }

Result<LoraSpec> LoraSpec::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Status::InvalidArgument("lora: expected an object {path, scale}");
  LoraSpec s;
  for (const auto& [key, value] : j.items()) {
    if (key == "path") {
      if (!value.is_string()) return Status::InvalidArgument("lora.path: expected a string");
      s.path = value.get<std::string>();
    } else if (key == "scale") {
      if (!value.is_number()) return Status::InvalidArgument("lora.scale: expected a number");
      s.scale = value.get<float>();
    } else {
      return Status::InvalidArgument("lora: unknown field '" + key + "' (fields: path, scale)");
    }
  }
  HIPQ_RETURN_IF_ERROR(s.validate());
  return s;
}

Result<LoraSpec> LoraSpec::parse(std::string_view text) {
  LoraSpec s;
  s.path = std::string(text);
  const size_t colon = text.rfind(':');
  if (colon != std::string_view::npos && colon + 1 < text.size()) {
    const std::string tail(text.substr(colon + 1));
    errno = 0;
    char* end = nullptr;
    const float v = std::strtof(tail.c_str(), &end);
    if (end != nullptr && *end == '\0' && errno == 0) {
      s.path = std::string(text.substr(0, colon));
      s.scale = v;
    }
  }
  HIPQ_RETURN_IF_ERROR(s.validate());
  return s;
}

Status validate_loras(const std::vector<LoraSpec>& loras) {
  for (size_t i = 0; i < loras.size(); ++i) {
    if (Status st = loras[i].validate(); !st.ok()) return st.WithContext("loras[" + std::to_string(i) + "]");
  }
  return Status::Ok();
}

}  // namespace hipq::spec
