// Replays every committed fuzz corpus file (tests/fuzz/corpus/<entry>/) through
// the entry the fuzzer drives, in the normal build: inputs that once crashed
// or reached new code stay covered without clang or libFuzzer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "tests/fuzz/fuzz_entries.h"

namespace hipq::fuzz {
namespace {

namespace fs = std::filesystem;

fs::path corpus(const std::string& entry) { return fs::path(HIPQ_FUZZ_CORPUS) / entry; }

size_t replay(const std::string& entry, const std::function<void(std::string_view)>& fn) {
  size_t n = 0;
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(corpus(entry))) {
    if (f.is_regular_file()) files.push_back(f.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    SCOPED_TRACE(path.string());
    fn(ss.str());
    ++n;
  }
  return n;
}

TEST(FuzzCorpusReplay, Manifest) { EXPECT_GT(replay("manifest", manifest), 10u); }
TEST(FuzzCorpusReplay, Prompts) { EXPECT_GT(replay("prompts", prompts), 10u); }
TEST(FuzzCorpusReplay, Envelope) { EXPECT_GT(replay("envelope", envelope), 10u); }
TEST(FuzzCorpusReplay, Safetensors) { EXPECT_GT(replay("safetensors", safetensors), 5u); }
TEST(FuzzCorpusReplay, Lora) { EXPECT_GT(replay("lora", lora), 5u); }
TEST(FuzzCorpusReplay, InitImage) { EXPECT_GT(replay("init_image", init_image), 5u); }

}  // namespace
}  // namespace hipq::fuzz
