// Helpers shared by the db tests: a fresh temporary directory per test and
// a small valid batch.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "db/records.h"

namespace hipq::db::testing {

// A directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("hipq-db-") + (info ? info->name() : "x") + "-" + std::to_string(getpid()) + "-" +
                       std::to_string(counter++);
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline NewJob make_job(int64_t ordinal, std::string model = "synthetic:tiny-sdxl") {
  NewJob j;
  j.ordinal = ordinal;
  j.model = std::move(model);
  j.prompt = "prompt " + std::to_string(ordinal);
  j.negative_prompt = "blurry";
  j.tags = {"Category:Test", "n:" + std::to_string(ordinal)};
  j.seed = static_cast<uint64_t>(ordinal);
  j.width = 64;
  j.height = 64;
  j.steps = 4;
  j.guidance = 5.0;
  j.sampler = "euler";
  j.precision = "fp32";
  j.output_dir = "b/" + std::to_string(ordinal);
  return j;
}

inline NewBatch make_batch(int jobs, int priority = 0, int max_attempts = 3, std::string name = "batch",
                           std::string model = "synthetic:tiny-sdxl") {
  NewBatch b;
  b.name = std::move(name);
  b.priority = priority;
  b.max_attempts = max_attempts;
  b.output_root = "/srv/hipq/out";
  b.save = {"latent", "png"};
  b.golden_source = "store";
  b.parity_gate.max_abs_max = 0.5;
  b.manifest_path = "/srv/hipq/m.yaml";
  b.manifest_text = "batch: " + b.name + "\n";
  for (int i = 0; i < jobs; ++i) b.jobs.push_back(make_job(i, model));
  return b;
}

}  // namespace hipq::db::testing
