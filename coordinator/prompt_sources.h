// Prompt sources: prompt lists read from TSV, JSONL or plain-text files.
//
// Formats (chosen by `format`, else by extension: .tsv, .jsonl, .txt):
//   tsv   — a header row; the prompt column (default "Prompt", matched
//           case-insensitively; a header with a single column needs no
//           name); optional "negative" and "seed"/"seeds" columns; every other
//           non-empty column is kept as a tag "Column:value" (PartiPrompts:
//           "Category:Abstract", "Challenge:Basic", "Note:…"). Fields are
//           split on tabs only; no quoting (PartiPrompts loads as is).
//   jsonl — one JSON object per line: {"prompt": "…", "negative": "…",
//           "tags": ["a", "b"] | {"k": "v"}, "seeds": [1, 2] | 3}; blank lines
//           and lines starting with '#' skipped.
//   txt   — one prompt per line; blank lines and '#' comments skipped.
// A UTF-8 BOM and CRLF line ends are accepted. `offset` skips the first N
// prompts, `limit` then keeps the next N (reading stops there).
// The file must be a regular file of at most kMaxPromptFileBytes and valid
// UTF-8 (the first bad byte is reported with its line and column).
//
// sample_prompts() then draws a reproducible sample: N prompts chosen by a
// seeded mt19937_64 (partial Fisher-Yates, indices drawn as r % remaining),
// returned in file order; with `stratify: NAME` the N are spread over the
// values of the tag NAME:VALUE in proportion to their sizes (largest
// remainder; every value gets at least one when N allows), so a sample of
// PartiPrompts covers every Category rather than the first rows.
//
// Every problem is collected (file, line, column), not just the first.
// Thread safety: pure functions that read files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/status.h"

namespace hipq::coordinator {

// Bounds on reading a prompt file (docs/manifest.md, "Limits"): its size,
// the JSON nesting of a JSONL line ({"tags": {...}} needs 2) and how many
// problems are collected before the rest of the file is skipped.
inline constexpr int64_t kMaxPromptFileBytes = 64 * 1024 * 1024;
inline constexpr int kMaxJsonDepth = 32;
inline constexpr size_t kMaxPromptFileProblems = 100;

enum class PromptFormat { kAuto, kTsv, kJsonl, kText };

struct PromptFileOptions {
  PromptFormat format = PromptFormat::kAuto;
  std::string column;      // TSV prompt column; "" = "Prompt"
  int64_t offset = 0;      // prompts skipped at the start
  int64_t limit = 0;       // 0 = all (after the offset)
};

struct PromptSample {
  int64_t count = 0;       // 0 = no sampling
  uint64_t seed = 0;
  std::string stratify;    // tag name ("Category"); "" = one pool
};

struct PromptRecord {
  std::string text;
  std::optional<std::string> negative;
  std::vector<std::string> tags;
  std::optional<std::vector<uint64_t>> seeds;
  int line = 0;            // 1-based line in the file
};

// One problem found while reading a prompt file.
struct PromptProblem {
  int line = 0;            // 0 = the whole file
  int column = 0;
  std::string message;
};

struct PromptFile {
  std::vector<PromptRecord> prompts;
  std::vector<PromptProblem> problems;  // empty when the file is valid
};

// Reads a prompt file. Problems inside the file come back in `problems`; an
// unreadable file is one problem with line 0. The returned value is always
// usable (problems decide validity).
PromptFile load_prompt_file(const std::filesystem::path& path, const PromptFileOptions& options);
// The same for text already in memory; options.format must not be kAuto
// (a problem says so). The fuzzers' entry point.
PromptFile parse_prompt_text(std::string_view text, const PromptFileOptions& options);

// Keeps `sample.count` of `prompts` as described above. InvalidArgument when
// the count exceeds the prompts there are, or no prompt has a tag `stratify`
// (the message lists the tag names there are). Deterministic for a given
// input, count, seed and stratify.
Status sample_prompts(std::vector<PromptRecord>& prompts, const PromptSample& sample);
// The tag names ("Category" of "Category:Animals") of `prompts`, sorted, unique.
std::vector<std::string> tag_names(const std::vector<PromptRecord>& prompts);

// "tsv" | "jsonl" | "txt" | "auto" → format; nullopt for anything else.
std::optional<PromptFormat> parse_prompt_format(std::string_view name);
std::string_view prompt_format_name(PromptFormat format);

}  // namespace hipq::coordinator
