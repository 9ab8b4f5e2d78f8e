// Helpers for the manifest tests: a temporary folder to write manifests and
// prompt files into, and the shared data folder.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace hipq::coordinator::testing {

class ManifestDir {
 public:
  ManifestDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("hipq-manifest-" + std::string(info ? info->name() : "x") + "-" + std::to_string(getpid()) + "-" +
             std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ManifestDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

  std::filesystem::path write(const std::string& name, const std::string& text) const {
    auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

// $HIPQ_SOURCE_DIR (set by ctest); empty when unset.
inline std::filesystem::path source_dir() {
  const char* s = std::getenv("HIPQ_SOURCE_DIR");
  return s ? std::filesystem::path(s) : std::filesystem::path();
}

inline std::filesystem::path parti_prompts_tsv() {
  return source_dir() / "data" / "prompts" / "PartiPrompts.tsv";
}

}  // namespace hipq::coordinator::testing
