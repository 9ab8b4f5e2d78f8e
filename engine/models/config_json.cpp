#include "engine/models/config_json.h"

namespace hipq::engine {

Status ConfigReader::error(const char* key, const std::string& what) const {
  return Status::InvalidArgument(where_ + ": field '" + key + "' " + what);
}

Result<int64_t> ConfigReader::integer(const char* key, int64_t fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j_.at(key);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())))
    return static_cast<int64_t>(v.get<double>());
  return error(key, "must be an integer, got " + v.dump());
}

Result<double> ConfigReader::number(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j_.at(key);
  if (v.is_number()) return v.get<double>();
  return error(key, "must be a number, got " + v.dump());
}

Result<bool> ConfigReader::boolean(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j_.at(key);
  if (v.is_boolean()) return v.get<bool>();
  return error(key, "must be true or false, got " + v.dump());
}

Result<std::string> ConfigReader::string(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j_.at(key);
  if (v.is_string()) return v.get<std::string>();
  return error(key, "must be a string, got " + v.dump());
}

Result<std::vector<int64_t>> ConfigReader::int_list(const char* key, const std::vector<int64_t>& fallback,
                                                    size_t n) const {
  if (!has(key)) {
    if (fallback.size() == 1 && n > 1) return std::vector<int64_t>(n, fallback[0]);
    return fallback;
  }
  const auto& v = j_.at(key);
  if (v.is_number_integer()) return std::vector<int64_t>(n == 0 ? 1 : n, v.get<int64_t>());
  if (!v.is_array()) return error(key, "must be an integer or a list of integers, got " + v.dump());
  std::vector<int64_t> out;
  for (const auto& e : v) {
    if (!e.is_number_integer()) return error(key, "must hold integers only, got " + v.dump());
    out.push_back(e.get<int64_t>());
  }
  if (n > 0 && out.size() != n)
    return error(key, "has " + std::to_string(out.size()) + " entries; expected " + std::to_string(n) +
                          " (one per block)");
  return out;
}

Result<std::vector<std::string>> ConfigReader::string_list(const char* key,
                                                           const std::vector<std::string>& fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j_.at(key);
  if (!v.is_array()) return error(key, "must be a list of strings, got " + v.dump());
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) return error(key, "must hold strings only, got " + v.dump());
    out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace hipq::engine
