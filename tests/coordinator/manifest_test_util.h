// Helpers for the manifest tests: a temporary folder to write manifests and
// prompt files into, and the shared data folder.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

// The bytes of a safetensors file of F32 [1, 1] tensors named `keys` (one
// zero each): enough for the manifest's LoRA header check.
inline std::string safetensors_with(const std::vector<std::string>& keys) {
  std::string header = "{";
  for (size_t i = 0; i < keys.size(); ++i) {
    header.append(i ? "," : "").append("\"").append(keys[i]).append("\":{\"dtype\":\"F32\",\"shape\":[1,1],");
    header.append("\"data_offsets\":[").append(std::to_string(4 * i)).append(",").append(std::to_string(4 * (i + 1)));
    header.append("]}");
  }
  header += "}";
  std::string out(8, '\0');
  for (size_t b = 0; b < 8; ++b) out[b] = static_cast<char>((header.size() >> (8 * b)) & 0xff);
  return out + header + std::string(4 * keys.size(), '\0');
}

// $HIPQ_SOURCE_DIR (set by ctest); empty when unset.
inline std::filesystem::path source_dir() {
  const char* s = std::getenv("HIPQ_SOURCE_DIR");
  return s ? std::filesystem::path(s) : std::filesystem::path();
}

inline std::filesystem::path parti_prompts_tsv() {
  return source_dir() / "data" / "prompts" / "PartiPrompts.tsv";
}

}  // namespace hipq::coordinator::testing
