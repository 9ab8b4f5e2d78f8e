// Reading diffusers / transformers config.json values with errors that name
// the config and the field. nlohmann exceptions never escape: a wrong type is
// InvalidArgument("<where>: field 'x' must be an integer, got \"abc\"").
// Thread safety: a value type over a const json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace hipq::engine {

class ConfigReader {
 public:
  // `where` names the config in errors ("unet/config.json").
  ConfigReader(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {}

  bool has(const char* key) const { return j_.is_object() && j_.contains(key) && !j_.at(key).is_null(); }
  Result<int64_t> integer(const char* key, int64_t fallback) const;
  Result<double> number(const char* key, double fallback) const;
  Result<bool> boolean(const char* key, bool fallback) const;
  Result<std::string> string(const char* key, const std::string& fallback) const;
  // An int or a list of ints; an int is repeated `n` times. A list of another
  // length than n (n > 0) is an error.
  Result<std::vector<int64_t>> int_list(const char* key, const std::vector<int64_t>& fallback, size_t n) const;
  Result<std::vector<std::string>> string_list(const char* key, const std::vector<std::string>& fallback) const;
  const std::string& where() const { return where_; }
  Status error(const char* key, const std::string& what) const;

 private:
  const nlohmann::json& j_;
  std::string where_;
};

}  // namespace hipq::engine
