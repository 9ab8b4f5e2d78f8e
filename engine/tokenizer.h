// ClipTokenizer: CLIP's byte-level BPE, as the reference (transformers 5
// CLIPTokenizer, what diffusers uses) computes it.
//
// Text is cleaned as that tokenizer's normalizer does: Unicode NFC, runs of
// whitespace collapsed to one space, lower-cased code point by code point
// with Unicode's full case mappings (no final-sigma context rule). There is no
// HTML unescaping or ftfy fixing: the reference does neither (OpenAI's
// original tokenizer does; docs/model-sources.md notes the difference).
// Words are split with CLIP's pattern
//   's|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
// (Unicode letter/number classes through ICU, not ASCII; \s as Oniguruma's
// Unicode whitespace), mapped byte -> unicode, and
// merged by rank; each word's last symbol carries "</w>".
// encode() returns BOS (49406), the ids, EOS (49407), truncated to
// `max_length` (BOS + max_length-2 ids + EOS). Padding differs per encoder:
// SDXL's tokenizer (CLIP-L) pads with EOS, tokenizer_2 (OpenCLIP bigG) with 0
// ("!"); pad() does either.
//
// Loads from vocab.json + merges.txt (a diffusers tokenizer/ folder) or from
// the original bpe_simple_vocab_16e6.txt.gz (merges only; the vocabulary is
// derived as CLIP does). Errors: NotFound / IOError for files, Corruption for
// malformed content (naming file and line). Thread safety: immutable after
// load; encode() is const and may be called concurrently (its BPE cache is
// internally locked).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hipq::engine {

class ClipTokenizer {
 public:
  static constexpr int kMaxLength = 77;

  // `merges` empty: `vocab` is bpe_simple_vocab_16e6.txt.gz (or its unzipped .txt).
  static Result<ClipTokenizer> load(const std::filesystem::path& vocab, const std::filesystem::path& merges = {});

  // BOS + tokens + EOS, truncated to max_length (max_length <= 0: no truncation).
  std::vector<int> encode(std::string_view text, int max_length = kMaxLength) const;
  // The BPE ids alone (no BOS/EOS, no truncation).
  std::vector<int> tokenize(std::string_view text) const;
  // Appends pad_id up to `length` (ids longer than `length` are returned as is).
  std::vector<int> pad(std::vector<int> ids, int pad_id, int length = kMaxLength) const;

  int bos() const { return bos_; }
  int eos() const { return eos_; }
  // The id of a vocabulary entry ("!" -> 0, "<|endoftext|>" -> 49407); -1 if absent.
  int token_id(std::string_view token) const;
  size_t vocab_size() const;
  // Writes vocab.json + merges.txt (the diffusers tokenizer/ layout) into dir.
  Status write_vocab_and_merges(const std::filesystem::path& dir) const;

  // The cleaning step alone (for tests): NFC, collapse whitespace, lower-case.
  static std::string clean_text(std::string_view text);
  // The split step alone: CLIP's pattern over cleaned text.
  static std::vector<std::string> split_words(std::string_view cleaned);

  ClipTokenizer(ClipTokenizer&&) noexcept;
  ClipTokenizer& operator=(ClipTokenizer&&) noexcept;
  ~ClipTokenizer();

 private:
  struct Impl;
  explicit ClipTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int bos_ = 49406;
  int eos_ = 49407;
};

// The CLIP vocabulary for models that ship no tokenizer files, in this order:
// env HIPQ_CLIP_VOCAB; <exe dir>/../share/hipq/clip/bpe_simple_vocab_16e6.txt.gz;
// <exe dir>/share/hipq/clip/... (a build tree); $HIPQ_BINARY_DIR/share/hipq/clip/...;
// $HIPQ_SOURCE_DIR/data/clip/... (the repository's own copy).
// NotFound listing every place looked at.
Result<std::filesystem::path> find_default_clip_vocab();

}  // namespace hipq::engine
