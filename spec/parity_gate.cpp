#include "spec/parity_gate.h"

#include <cmath>

namespace hipq::spec {
namespace {

constexpr char kKeyCosineMin[] = "cosine_min";
constexpr char kKeyMaxAbsMax[] = "max_abs_max";
constexpr char kKeyRelL2Max[] = "rel_l2_max";
constexpr char kKeyPsnrMin[] = "psnr_min";

std::string known_keys() {
  std::string out;
  for (const std::string& k : parity_gate_keys()) out += (out.empty() ? "" : ", ") + k;
  return out;
}

Status unknown_key(std::string_view key) {
  return Status::InvalidArgument("parity gate: unknown key \"" + std::string(key) +
                                 "\"; known: " + known_keys());
}

}  // namespace

double default_cosine_min(std::string_view precision) {
  // fp8 (e4m3 products) against the fp32 reference of its noise, full-size
  // SDXL at MLPerf's setting: the measured floor is in docs/golden-format.md.
  return precision == "fp8" ? kDefaultCosineMinFp8 : kDefaultCosineMin;
}

double default_psnr_min(std::string_view precision) {
  // Floors measured on the tiny models, cpu backend (docs/golden-format.md):
  // hipq vs diffusers >= 87.7 dB at fp32, >= 58.0 dB at fp16; a bf16 decode
  // alone >= 52.4 dB; fp8 on full-size SDXL against the fp32 reference. SDXL
  // decoded with SD 1's scaling factor: 31.3 dB, so every default sits above it.
  if (precision == "fp16") return kDefaultPsnrMinFp16;
  if (precision == "bf16") return kDefaultPsnrMinBf16;
  if (precision == "fp8") return kDefaultPsnrMinFp8;
  return kDefaultPsnrMinFp32;
}

const std::vector<std::string>& parity_gate_keys() {
  static const std::vector<std::string> keys = {kKeyCosineMin, kKeyMaxAbsMax, kKeyRelL2Max, kKeyPsnrMin};
  return keys;
}

Result<ParityGateRange> parity_gate_range(std::string_view key) {
  if (key == kKeyCosineMin) return ParityGateRange{-1.0, 1.0};
  if (key == kKeyMaxAbsMax || key == kKeyRelL2Max || key == kKeyPsnrMin) return ParityGateRange{0.0, 1e9};
  return unknown_key(key);
}

std::optional<double> ParityGate::cosine_bound(std::string_view precision) const {
  if (cosine_min_set) return cosine_min;
  return default_cosine_min(precision);
}

std::optional<double> ParityGate::psnr_bound(std::string_view precision) const {
  if (psnr_min_set) return psnr_min;
  return default_psnr_min(precision);
}

Status ParityGate::set(std::string_view key, std::optional<double> value) {
  std::optional<double>* slot = nullptr;
  if (key == kKeyCosineMin) {
    slot = &cosine_min;
    cosine_min_set = true;  // a number, or nullopt for no latent bound
  } else if (key == kKeyMaxAbsMax) {
    slot = &max_abs_max;
  } else if (key == kKeyRelL2Max) {
    slot = &rel_l2_max;
  } else if (key == kKeyPsnrMin) {
    slot = &psnr_min;
    psnr_min_set = true;  // a number, or nullopt for no image bound
  } else {
    return unknown_key(key);
  }
  if (value && !std::isfinite(*value)) {
    return Status::InvalidArgument("parity gate: " + std::string(key) + " must be finite");
  }
  *slot = value;  // nullopt switches a bound off (the default cosine one too)
  return Status::Ok();
}

Status ParityGate::validate() const {
  const std::pair<const char*, const std::optional<double>*> bounds[] = {{kKeyCosineMin, &cosine_min},
                                                                         {kKeyMaxAbsMax, &max_abs_max},
                                                                         {kKeyRelL2Max, &rel_l2_max},
                                                                         {kKeyPsnrMin, &psnr_min}};
  for (const auto& [key, bound] : bounds) {
    if (*bound && !std::isfinite(**bound)) {
      return Status::InvalidArgument("parity gate: " + std::string(key) + " must be finite");
    }
  }
  return Status::Ok();
}

nlohmann::json ParityGate::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (cosine_min_set) j[kKeyCosineMin] = cosine_min ? nlohmann::json(*cosine_min) : nlohmann::json(nullptr);
  if (max_abs_max) j[kKeyMaxAbsMax] = *max_abs_max;
  if (rel_l2_max) j[kKeyRelL2Max] = *rel_l2_max;
  if (psnr_min_set) j[kKeyPsnrMin] = psnr_min ? nlohmann::json(*psnr_min) : nlohmann::json(nullptr);
  return j;
}

Result<ParityGate> ParityGate::from_json(const nlohmann::json& j) {
  ParityGate g;
  if (j.is_null()) return g;
  if (!j.is_object()) {
    return Status::InvalidArgument("parity gate: expected an object like {\"cosine_min\": 0.999}, got " +
                                   j.dump());
  }
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) {
      HIPQ_RETURN_IF_ERROR(g.set(key, std::nullopt));
    } else if (value.is_number()) {
      HIPQ_RETURN_IF_ERROR(g.set(key, value.get<double>()));
    } else if (!parity_gate_range(key).ok()) {
      return unknown_key(key);
    } else {
      return Status::InvalidArgument("parity gate: " + key + " must be a number or null, got " +
                                     value.dump());
    }
  }
  return g;
}

}  // namespace hipq::spec
