// Reference outputs of transformers / diffusers on hipq's exported synthetic
// weights (tests/data/models/, made by tools/reference/make_model_references.py;
// provenance in tests/data/models/README.md and in each file's metadata).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "engine/safetensors.h"
#include "engine/synthetic.h"
#include "naive_ops.h"

namespace hipq::engine::testing {

inline std::filesystem::path model_data_dir() {
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  return std::filesystem::path(src ? src : ".") / "tests" / "data" / "models";
}

// The reference file of a synthetic model, checked to be about the weights
// make_synthetic_model produces now (same weights_sha256).
struct Reference {
  std::shared_ptr<SafetensorsFile> file;
  ModelComponents model;

  static Reference open(const std::string& name) {
    Reference r;
    auto f = SafetensorsFile::open(model_data_dir() / (name + ".safetensors"));
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    if (!f.ok()) return r;
    r.file = *f;
    auto m = make_synthetic_model(name);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return r;
    r.model = *m;
    EXPECT_EQ(r.file->metadata().at("weights_sha256"), r.model.weights_sha256)
        << "synthetic weights changed: regenerate tests/data/models with tools/reference/make_model_references.py";
    return r;
  }
  Vec values(const std::string& key) const { return file->get(key).value().to_f32(); }
  std::vector<int64_t> shape(const std::string& key) const { return file->get(key).value().shape; }
};

inline double cosine(const Vec& a, const Vec& b) {
  double d = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return d / std::sqrt(na * nb);
}

}  // namespace hipq::engine::testing
