// Test helper: loads tests/data/statistics/expected.json, the values computed
// independently by tools/stats/make_expected.py (Python statistics + numpy).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hipq::coordinator::statistics::testing {

inline nlohmann::json load_expected() {
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  if (src == nullptr) {
    ADD_FAILURE() << "HIPQ_SOURCE_DIR is not set; run through ctest";
    return nlohmann::json::object();
  }
  const auto path = std::filesystem::path(src) / "tests" / "data" / "statistics" / "expected.json";
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot open " << path;
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(in);
}

inline std::vector<double> values_of(const nlohmann::json& j) { return j.get<std::vector<double>>(); }

// Relative closeness for values computed by two implementations.
inline void expect_close(double expected, double actual, const std::string& what, double rel = 1e-9) {
  const double tol = rel * std::max(1.0, std::fabs(expected));
  EXPECT_NEAR(expected, actual, tol) << what;
}

}  // namespace hipq::coordinator::statistics::testing
