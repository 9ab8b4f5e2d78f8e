#include "engine/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/fs.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;

fs::path source_dir() {
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  return src ? fs::path(src) : fs::path(".");
}

const ClipTokenizer& gz_tokenizer() {
  static ClipTokenizer* tok = [] {
    auto vocab = find_default_clip_vocab();
    EXPECT_TRUE(vocab.ok()) << vocab.status().ToString();
    auto t = ClipTokenizer::load(*vocab);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return new ClipTokenizer(std::move(t).value());
  }();
  return *tok;
}

const nlohmann::json& reference() {
  static const nlohmann::json j = [] {
    auto text = read_file(source_dir() / "tests/data/tokenizer/clip_reference_ids.json");
    return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
  }();
  return j;
}

std::string ids_str(const std::vector<int>& v) { return nlohmann::json(v).dump(); }

TEST(ClipTokenizer, LoadsTheOriginalBpeFile) {
  const auto& tok = gz_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 49408u);
  EXPECT_EQ(tok.bos(), 49406);
  EXPECT_EQ(tok.eos(), 49407);
  EXPECT_EQ(tok.token_id("!"), 0);
  EXPECT_EQ(tok.token_id("<|endoftext|>"), 49407);
}

TEST(ClipTokenizer, PartiPromptsEqualTransformers) {
  ASSERT_FALSE(reference().is_null()) << "tests/data/tokenizer/clip_reference_ids.json missing";
  const auto& tok = gz_tokenizer();
  int n = 0, non_ascii = 0, long_ones = 0, wrong = 0;
  for (const auto& p : reference()["prompts"]) {
    const std::string text = p["text"];
    const auto want = p["ids"].get<std::vector<int>>();
    const auto got = tok.encode(text, 0);
    if (got != want) {
      ++wrong;
      ADD_FAILURE() << "prompt: " << text << "\n got:  " << ids_str(got) << "\n want: " << ids_str(want);
    }
    ++n;
    non_ascii += std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
    long_ones += want.size() > 77;
  }
  EXPECT_GE(n, 200);
  EXPECT_GE(non_ascii, 10);
  EXPECT_GE(long_ones, 1);
  std::printf("%d prompts (%d non-ASCII, %d over 77 tokens), %d differ\n", n, non_ascii, long_ones, wrong);
}

TEST(ClipTokenizer, ProbeStringsEqualTransformers) {
  ASSERT_FALSE(reference().is_null());
  const auto& tok = gz_tokenizer();
  for (const auto& p : reference()["probes"]) {
    const std::string text = p["text"];
    EXPECT_EQ(ids_str(tok.encode(text, 0)), ids_str(p["ids"].get<std::vector<int>>())) << "probe: " << text;
  }
}

TEST(ClipTokenizer, TruncationAndBothPaddingRules) {
  ASSERT_FALSE(reference().is_null());
  const auto& tok = gz_tokenizer();
  const int bang = tok.token_id("!");
  EXPECT_EQ(bang, reference()["pad_2"].get<int>());
  for (const auto& p : reference()["padded"]) {
    const std::string text = p["text"];
    const auto ids = tok.encode(text);
    ASSERT_LE(ids.size(), 77u);
    EXPECT_EQ(ids.back(), tok.eos());
    EXPECT_EQ(ids_str(tok.pad(ids, tok.eos())), ids_str(p["pad_eos"].get<std::vector<int>>())) << text;
    EXPECT_EQ(ids_str(tok.pad(ids, bang)), ids_str(p["pad_bang"].get<std::vector<int>>())) << text;
  }
}

TEST(ClipTokenizer, VocabJsonAndMergesGiveTheSameIds) {
  const auto dir = fs::temp_directory_path() / ("hipq_tokenizer_test_" + std::to_string(::getpid()));
  ASSERT_TRUE(gz_tokenizer().write_vocab_and_merges(dir).ok());
  auto tok = ClipTokenizer::load(dir / "vocab.json", dir / "merges.txt");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  for (const char* text : {"a photo of an astronaut riding a horse on mars", "Salvador Dalí", "東京タワーの夜景"})
    EXPECT_EQ(tok->encode(text), gz_tokenizer().encode(text)) << text;
  fs::remove_all(dir);
}

TEST(ClipTokenizer, CleaningAndSplitting) {
  EXPECT_EQ(ClipTokenizer::clean_text("  A \t\n PHOTO  "), " a photo ");
  EXPECT_EQ(ClipTokenizer::clean_text("e\xCC\x81"), "\xC3\xA9");  // NFC composes e + acute
  EXPECT_EQ(ClipTokenizer::split_words("it's a dog's 3d-model!!"),
            (std::vector<std::string>{"it", "'s", "a", "dog", "'s", "3", "d", "-", "model", "!!"}));
  EXPECT_EQ(ClipTokenizer::split_words("caf\xC3\xA9 12"), (std::vector<std::string>{"caf\xC3\xA9", "1", "2"}));
}

TEST(ClipTokenizer, MalformedFilesAreReported) {
  const auto dir = fs::temp_directory_path() / ("hipq_tokenizer_bad_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_file_atomic(dir / "vocab.json", "{not json").ok());
  ASSERT_TRUE(write_file_atomic(dir / "merges.txt", "#version: 0.2\na b\n").ok());
  auto bad = ClipTokenizer::load(dir / "vocab.json", dir / "merges.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  EXPECT_NE(bad.status().message().find("vocab.json"), std::string::npos);
  ASSERT_TRUE(write_file_atomic(dir / "short.txt", "#version\na b\n").ok());
  auto short_file = ClipTokenizer::load(dir / "short.txt");
  ASSERT_FALSE(short_file.ok());
  EXPECT_NE(short_file.status().message().find("short.txt"), std::string::npos);
  EXPECT_EQ(ClipTokenizer::load(dir / "missing.txt.gz").status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

TEST(ClipTokenizer, DefaultVocabHonoursTheEnvironment) {
  ::setenv("HIPQ_CLIP_VOCAB", "/nonexistent/vocab.txt.gz", 1);
  auto r = find_default_clip_vocab();
  ::unsetenv("HIPQ_CLIP_VOCAB");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("HIPQ_CLIP_VOCAB"), std::string::npos);
}

}  // namespace
}  // namespace hipq::engine
