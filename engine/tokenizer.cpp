#include "engine/tokenizer.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unistd.h>
#include <zlib.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/fs.h"

namespace hipq::engine {
namespace fs = std::filesystem;

namespace {

// CLIP keeps the first 49152 - 256 - 2 merges of its BPE file.
constexpr size_t kClipMerges = 49152 - 256 - 2;

std::string utf8_of(UChar32 c) {
  std::string s;
  icu::UnicodeString(c).toUTF8String(s);
  return s;
}

// GPT-2/CLIP's reversible byte -> printable character table.
std::vector<std::string> bytes_to_unicode() {
  std::vector<int> bs;
  for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
  std::vector<std::string> table(256);
  std::vector<bool> direct(256, false);
  for (int b : bs) direct[static_cast<size_t>(b)] = true;
  for (int b : bs) table[static_cast<size_t>(b)] = utf8_of(b);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    if (!direct[static_cast<size_t>(b)]) table[static_cast<size_t>(b)] = utf8_of(256 + n++);
  }
  return table;
}

// The ordered list of byte-level characters in CLIP's vocabulary order.
std::vector<std::string> byte_vocab_order() {
  const auto table = bytes_to_unicode();
  std::vector<std::string> out;
  for (int b = '!'; b <= '~'; ++b) out.push_back(table[static_cast<size_t>(b)]);
  for (int b = 0xA1; b <= 0xAC; ++b) out.push_back(table[static_cast<size_t>(b)]);
  for (int b = 0xAE; b <= 0xFF; ++b) out.push_back(table[static_cast<size_t>(b)]);
  for (int b = 0; b < 256; ++b) {
    const bool direct = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    if (!direct) out.push_back(table[static_cast<size_t>(b)]);
  }
  return out;
}

// Oniguruma's Unicode \s (what the reference's regexes use).
bool is_space(UChar32 c) {
  if ((c >= 0x09 && c <= 0x0D) || c == 0x85) return true;
  const auto t = u_charType(c);
  return t == U_SPACE_SEPARATOR || t == U_LINE_SEPARATOR || t == U_PARAGRAPH_SEPARATOR;
}
bool is_letter(UChar32 c) {
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER: return true;
    default: return false;
  }
}
bool is_number(UChar32 c) {
  switch (u_charType(c)) {
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER: return true;
    default: return false;
  }
}

std::u32string to_u32(std::string_view utf8) {
  const auto us = icu::UnicodeString::fromUTF8(icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size())));
  std::u32string out;
  for (int32_t i = 0; i < us.length(); i = us.moveIndex32(i, 1)) out.push_back(static_cast<char32_t>(us.char32At(i)));
  return out;
}

std::string to_utf8(const std::u32string& s, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) icu::UnicodeString(static_cast<UChar32>(s[i])).toUTF8String(out);
  return out;
}

Result<std::string> read_gzip(const fs::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return Status::NotFound("cannot open CLIP vocabulary '" + path.string() + "'");
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int err = 0;
      std::string msg = path.string();
      msg.append(": not a readable gzip file: ").append(gzerror(f, &err));
      gzclose(f);
      return Status::Corruption(std::move(msg));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  gzclose(f);
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

}  // namespace

struct ClipTokenizer::Impl {
  std::unordered_map<std::string, int> vocab;
  std::vector<std::string> id_to_token;
  std::vector<std::pair<std::string, std::string>> merges;
  std::unordered_map<std::string, int> merge_rank;  // "a\x01b" -> rank
  std::vector<std::string> byte_table;
  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int>> cache;

  std::vector<int> bpe(const std::string& word_bytes) const;
};

std::vector<int> ClipTokenizer::Impl::bpe(const std::string& word_bytes) const {
  {
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = cache.find(word_bytes);
    if (it != cache.end()) return it->second;
  }
  // Symbols: the byte-level characters of the word, the last one marked "</w>".
  std::vector<std::string> word;
  for (unsigned char b : word_bytes) word.push_back(byte_table[b]);
  if (word.empty()) return {};
  word.back() += "</w>";
  while (word.size() > 1) {
    int best = INT_MAX;
    size_t best_i = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = merge_rank.find(word[i] + '\x01' + word[i + 1]);
      if (it != merge_rank.end() && it->second < best) {
        best = it->second;
        best_i = i;
      }
    }
    if (best == INT_MAX) break;
    const std::string first = word[best_i], second = word[best_i + 1];
    std::vector<std::string> merged;
    merged.reserve(word.size());
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(word[i]);
        ++i;
      }
    }
    word = std::move(merged);
  }
  std::vector<int> ids;
  ids.reserve(word.size());
  for (const auto& sym : word) {
    auto it = vocab.find(sym);
    // Every byte-level symbol and every merge result is in the vocabulary.
    ids.push_back(it == vocab.end() ? -1 : it->second);
  }
  std::lock_guard<std::mutex> lock(cache_mu);
  if (cache.size() > 100000) cache.clear();
  cache.emplace(word_bytes, ids);
  return ids;
}

ClipTokenizer::ClipTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClipTokenizer::ClipTokenizer(ClipTokenizer&&) noexcept = default;
ClipTokenizer& ClipTokenizer::operator=(ClipTokenizer&&) noexcept = default;
ClipTokenizer::~ClipTokenizer() = default;

Result<ClipTokenizer> ClipTokenizer::load(const fs::path& vocab, const fs::path& merges) {
  auto impl = std::make_unique<Impl>();
  impl->byte_table = bytes_to_unicode();
  if (merges.empty()) {
    std::string text;
    if (vocab.extension() == ".gz") {
      HIPQ_ASSIGN_OR_RETURN(text, read_gzip(vocab));
    } else {
      HIPQ_ASSIGN_OR_RETURN(text, read_file(vocab));
    }
    const auto lines = split_lines(text);
    if (lines.size() < kClipMerges + 1)
      return Status::Corruption(std::string("'") + vocab.string() + "': " + std::to_string(lines.size()) +
                                " lines, a CLIP BPE file has at least " + std::to_string(kClipMerges + 1));
    for (size_t i = 1; i <= kClipMerges; ++i) {
      const auto sp = lines[i].find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= lines[i].size())
        return Status::Corruption(std::string("'") + vocab.string() + "' line " + std::to_string(i + 1) + ": not a merge 'a b'");
      impl->merges.emplace_back(lines[i].substr(0, sp), lines[i].substr(sp + 1));
    }
    // CLIP's vocabulary: bytes, bytes + "</w>", one entry per merge, BOS, EOS.
    auto& order = impl->id_to_token;
    order = byte_vocab_order();
    const size_t nbytes = order.size();
    for (size_t i = 0; i < nbytes; ++i) order.push_back(order[i] + "</w>");
    for (const auto& [a, b] : impl->merges) order.push_back(a + b);
    order.push_back("<|startoftext|>");
    order.push_back("<|endoftext|>");
    for (size_t i = 0; i < order.size(); ++i) impl->vocab.emplace(order[i], static_cast<int>(i));
  } else {
    HIPQ_ASSIGN_OR_RETURN(std::string vtext, read_file(vocab));
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(vtext);
    } catch (const nlohmann::json::exception& e) {
      return Status::Corruption(std::string("'") + vocab.string() + "' is not valid JSON: " + e.what());
    }
    if (!j.is_object()) return Status::Corruption(std::string("'") + vocab.string() + "': expected an object {token: id}");
    int max_id = -1;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int>() < 0)
        return Status::Corruption(std::string("'") + vocab.string() + "': id of '" + it.key() + "' is not a non-negative integer");
      impl->vocab.emplace(it.key(), it.value().get<int>());
      max_id = std::max(max_id, it.value().get<int>());
    }
    impl->id_to_token.assign(static_cast<size_t>(max_id + 1), std::string());
    for (const auto& [tok, id] : impl->vocab) impl->id_to_token[static_cast<size_t>(id)] = tok;
    HIPQ_ASSIGN_OR_RETURN(std::string mtext, read_file(merges));
    const auto lines = split_lines(mtext);
    for (size_t i = 0; i < lines.size(); ++i) {
      const auto& line = lines[i];
      if (line.empty() || (i == 0 && line.rfind("#version", 0) == 0)) continue;
      const auto sp = line.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size())
        return Status::Corruption(std::string("'") + merges.string() + "' line " + std::to_string(i + 1) + ": not a merge 'a b'");
      impl->merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    }
  }
  for (size_t i = 0; i < impl->merges.size(); ++i)
    impl->merge_rank.emplace(impl->merges[i].first + '\x01' + impl->merges[i].second, static_cast<int>(i));
  ClipTokenizer tok(std::move(impl));
  tok.bos_ = tok.token_id("<|startoftext|>");
  tok.eos_ = tok.token_id("<|endoftext|>");
  if (tok.bos_ < 0 || tok.eos_ < 0)
    return Status::Corruption(std::string("'") + vocab.string() + "': vocabulary lacks <|startoftext|> or <|endoftext|>");
  for (const auto& b : tok.impl_->byte_table) {
    if (tok.token_id(b) < 0 || tok.token_id(b + "</w>") < 0)
      return Status::Corruption(std::string("'") + vocab.string() + "': vocabulary lacks a byte-level symbol");
  }
  return tok;
}

std::string ClipTokenizer::clean_text(std::string_view text) {
  UErrorCode err = U_ZERO_ERROR;
  auto us = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(err);
  if (U_SUCCESS(err)) {
    icu::UnicodeString normalized = nfc->normalize(us, err);
    if (U_SUCCESS(err)) us = normalized;
  }
  // Runs of whitespace become one space (kept at the ends: the split drops them).
  icu::UnicodeString collapsed;
  bool in_space = false;
  for (int32_t i = 0; i < us.length(); i = us.moveIndex32(i, 1)) {
    const UChar32 c = us.char32At(i);
    if (is_space(c)) {
      if (!in_space) collapsed.append(static_cast<UChar32>(' '));
      in_space = true;
    } else {
      collapsed.append(c);
      in_space = false;
    }
  }
  // Lower-case one code point at a time, as the reference's normalizer does:
  // full case mappings, but no context rules (a final capital sigma becomes σ, not ς).
  std::string out;
  for (int32_t i = 0; i < collapsed.length(); i = collapsed.moveIndex32(i, 1)) {
    icu::UnicodeString one(collapsed.char32At(i));
    one.toLower(icu::Locale::getRoot());
    one.toUTF8String(out);
  }
  return out;
}

std::vector<std::string> ClipTokenizer::split_words(std::string_view cleaned) {
  const std::u32string s = to_u32(cleaned);
  std::vector<std::string> words;
  size_t i = 0;
  const size_t n = s.size();
  static const char32_t* kContractions[] = {U"'s", U"'t", U"'re", U"'ve", U"'m", U"'ll", U"'d"};
  while (i < n) {
    // Alternatives in the pattern's order; the first that matches here wins.
    size_t len = 0;
    if (s[i] == U'\'') {
      for (const char32_t* c : kContractions) {
        const std::u32string_view cv(c);
        if (s.compare(i, cv.size(), cv) == 0) {
          len = cv.size();
          break;
        }
      }
    }
    if (len == 0 && is_letter(static_cast<UChar32>(s[i]))) {
      while (i + len < n && is_letter(static_cast<UChar32>(s[i + len]))) ++len;
    }
    if (len == 0 && is_number(static_cast<UChar32>(s[i]))) len = 1;
    if (len == 0 && !is_space(static_cast<UChar32>(s[i]))) {
      while (i + len < n) {
        const auto c = static_cast<UChar32>(s[i + len]);
        if (is_space(c) || is_letter(c) || is_number(c)) break;
        ++len;
      }
    }
    if (len == 0) {
      ++i;  // whitespace: not part of any word
      continue;
    }
    words.push_back(to_utf8(s, i, i + len));
    i += len;
  }
  return words;
}

std::vector<int> ClipTokenizer::tokenize(std::string_view text) const {
  std::vector<int> ids;
  for (const auto& word : split_words(clean_text(text))) {
    const auto w = impl_->bpe(word);
    ids.insert(ids.end(), w.begin(), w.end());
  }
  return ids;
}

std::vector<int> ClipTokenizer::encode(std::string_view text, int max_length) const {
  std::vector<int> ids{bos_};
  const auto body = tokenize(text);
  size_t keep = body.size();
  if (max_length > 0) keep = std::min(keep, static_cast<size_t>(std::max(max_length - 2, 0)));
  ids.insert(ids.end(), body.begin(), body.begin() + static_cast<std::ptrdiff_t>(keep));
  ids.push_back(eos_);
  return ids;
}

std::vector<int> ClipTokenizer::pad(std::vector<int> ids, int pad_id, int length) const {
  while (static_cast<int>(ids.size()) < length) ids.push_back(pad_id);
  return ids;
}

int ClipTokenizer::token_id(std::string_view token) const {
  auto it = impl_->vocab.find(std::string(token));
  return it == impl_->vocab.end() ? -1 : it->second;
}

size_t ClipTokenizer::vocab_size() const { return impl_->vocab.size(); }

Status ClipTokenizer::write_vocab_and_merges(const fs::path& dir) const {
  nlohmann::json v = nlohmann::json::object();
  for (const auto& [tok, id] : impl_->vocab) v[tok] = id;
  std::string merges = "#version: 0.2\n";
  for (const auto& [a, b] : impl_->merges) merges += a + " " + b + "\n";
  HIPQ_RETURN_IF_ERROR(write_file_atomic(dir / "vocab.json", v.dump()));
  return write_file_atomic(dir / "merges.txt", merges);
}

Result<fs::path> find_default_clip_vocab() {
  static constexpr const char* kName = "bpe_simple_vocab_16e6.txt.gz";
  std::vector<fs::path> tried;
  auto usable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
  };
  if (const char* env = std::getenv("HIPQ_CLIP_VOCAB"); env && *env) {
    if (usable(env)) return fs::path(env);
    return Status::NotFound(std::string("HIPQ_CLIP_VOCAB points at '") + env + "', which is not a file");
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    tried.push_back(exe.parent_path() / ".." / "share" / "hipq" / "clip" / kName);
    tried.push_back(exe.parent_path() / "share" / "hipq" / "clip" / kName);
  }
  if (const char* bin = std::getenv("HIPQ_BINARY_DIR"); bin && *bin)
    tried.push_back(fs::path(bin) / "share" / "hipq" / "clip" / kName);
  if (const char* src = std::getenv("HIPQ_SOURCE_DIR"); src && *src)
    tried.push_back(fs::path(src) / "data" / "clip" / kName);
  for (const auto& p : tried) {
    if (usable(p)) return p.lexically_normal();
  }
  std::string list;
  for (const auto& p : tried) list += "\n  " + p.lexically_normal().string();
  return Status::NotFound(std::string("CLIP vocabulary ") + kName +
                          " not found; set HIPQ_CLIP_VOCAB to its path. Looked in:" + list);
}

}  // namespace hipq::engine
