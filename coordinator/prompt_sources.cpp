#include "coordinator/prompt_sources.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "base/utf8.h"

namespace hipq::coordinator {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Lines without their '\n' / "\r\n", BOM removed from the first.
std::vector<std::string_view> split_lines(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return lines;
}

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t tab = line.find('\t', start);
    if (tab == std::string_view::npos) {
      out.push_back(line.substr(start));
      break;
    }
    out.push_back(line.substr(start, tab - start));
    start = tab + 1;
  }
  return out;
}

bool parse_u64(std::string_view s, uint64_t& out) {
  s = trim(s);
  if (s.empty() || s[0] == '-' || s[0] == '+') return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// "1, 2 3" → {1, 2, 3}; false on anything else.
bool parse_seed_list(std::string_view s, std::vector<uint64_t>& out) {
  std::string text(s);
  std::replace(text.begin(), text.end(), ',', ' ');
  size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    if (pos >= text.size()) break;
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    uint64_t v = 0;
    if (!parse_u64(std::string_view(text).substr(pos, end - pos), v)) return false;
    out.push_back(v);
    pos = end;
  }
  return !out.empty();
}

// Reading stops once offset + limit prompts are in; the offset is dropped at the end.
bool limit_reached(const PromptFile& f, const PromptFileOptions& o) {
  return (o.limit > 0 && static_cast<int64_t>(f.prompts.size()) >= o.offset + o.limit) ||
         f.problems.size() >= kMaxPromptFileProblems;
}

// 0-based offset of the bracket that opens level max_depth + 1 in one JSON
// text, or npos. Exact for JSON: brackets inside strings do not count.
size_t find_deep_json(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

// JSON for a message: short, and never throwing on odd bytes.
std::string shown(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// The value of tag `name` ("Category" → "Animals"), name compared case-insensitively.
std::optional<std::string> tag_value(const PromptRecord& r, const std::string& lower_name) {
  for (const auto& t : r.tags) {
    size_t colon = t.find(':');
    if (colon != std::string::npos && lower(std::string_view(t).substr(0, colon)) == lower_name)
      return t.substr(colon + 1);
  }
  return std::nullopt;
}

void load_tsv(const std::vector<std::string_view>& lines, const PromptFileOptions& options, PromptFile& out) {
  if (lines.empty() || trim(lines[0]).empty()) {
    out.problems.push_back({1, 1, "TSV file has no header row (expected column names separated by tabs)"});
    return;
  }
  std::vector<std::string_view> header = split_tabs(lines[0]);
  std::string wanted = options.column.empty() ? "prompt" : lower(options.column);
  int prompt_col = -1, negative_col = -1, seeds_col = -1;
  for (size_t i = 0; i < header.size(); ++i) {
    std::string name = lower(trim(header[i]));
    if (name == wanted) prompt_col = static_cast<int>(i);
    else if (name == "negative" || name == "negative_prompt") negative_col = static_cast<int>(i);
    else if (name == "seed" || name == "seeds") seeds_col = static_cast<int>(i);
  }
  if (prompt_col < 0 && header.size() == 1 && options.column.empty()) prompt_col = 0;
  if (prompt_col < 0) {
    std::string names;
    for (auto h : header) names += (names.empty() ? "" : ", ") + std::string(trim(h));
    out.problems.push_back({1, 1,
                            "no column '" + (options.column.empty() ? std::string("Prompt") : options.column) +
                                "' in the header (columns: " + names + "); name it with prompts_file.column"});
    return;
  }
  for (size_t n = 1; n < lines.size() && !limit_reached(out, options); ++n) {
    int line_no = static_cast<int>(n) + 1;
    if (trim(lines[n]).empty()) continue;
    std::vector<std::string_view> fields = split_tabs(lines[n]);
    if (fields.size() > header.size()) {
      out.problems.push_back({line_no, 1,
                              "row has " + std::to_string(fields.size()) + " tab-separated fields, the header has " +
                                  std::to_string(header.size())});
      continue;
    }
    PromptRecord r;
    r.line = line_no;
    r.text = std::string(fields[prompt_col < static_cast<int>(fields.size()) ? prompt_col : 0]);
    if (prompt_col >= static_cast<int>(fields.size()) || trim(r.text).empty()) {
      out.problems.push_back({line_no, 1, "empty prompt in column '" + std::string(trim(header[prompt_col])) + "'"});
      continue;
    }
    bool ok = true;
    int column = 1;
    for (size_t i = 0; i < fields.size(); ++i) {
      std::string_view value = trim(fields[i]);
      int this_column = column;
      column += static_cast<int>(fields[i].size()) + 1;
      if (static_cast<int>(i) == prompt_col || value.empty()) continue;
      if (static_cast<int>(i) == negative_col) {
        r.negative = std::string(value);
      } else if (static_cast<int>(i) == seeds_col) {
        std::vector<uint64_t> seeds;
        if (!parse_seed_list(value, seeds)) {
          out.problems.push_back({line_no, this_column,
                                  "seeds '" + std::string(value) + "' are not non-negative integers"});
          ok = false;
        } else {
          r.seeds = std::move(seeds);
        }
      } else {
        r.tags.push_back(std::string(trim(header[i])) + ":" + std::string(value));
      }
    }
    if (ok) out.prompts.push_back(std::move(r));
  }
}

void add_json_tags(const nlohmann::json& tags, PromptRecord& r, int line, PromptFile& out) {
  if (tags.is_array()) {
    for (const auto& t : tags) {
      if (!t.is_string()) {
        out.problems.push_back({line, 1, "\"tags\" must hold strings, got " + shown(t)});
        return;
      }
      r.tags.push_back(t.get<std::string>());
    }
  } else if (tags.is_object()) {
    for (const auto& [k, v] : tags.items()) r.tags.push_back(k + ":" + (v.is_string() ? v.get<std::string>() : shown(v)));
  } else if (tags.is_string()) {
    r.tags.push_back(tags.get<std::string>());
  } else {
    out.problems.push_back({line, 1, "\"tags\" must be a list of strings or an object, got " + shown(tags)});
  }
}

void load_jsonl(const std::vector<std::string_view>& lines, const PromptFileOptions& options, PromptFile& out) {
  static const std::vector<std::string> kKeys = {"prompt", "text", "negative", "negative_prompt", "tags", "seed",
                                                 "seeds"};
  for (size_t n = 0; n < lines.size() && !limit_reached(out, options); ++n) {
    int line_no = static_cast<int>(n) + 1;
    std::string_view t = trim(lines[n]);
    if (t.empty() || t[0] == '#') continue;
    if (size_t deep = find_deep_json(lines[n], kMaxJsonDepth); deep != std::string_view::npos) {
      out.problems.push_back({line_no, static_cast<int>(deep) + 1,
                              "JSON nested more than " + std::to_string(kMaxJsonDepth) +
                                  " levels deep; a prompt line needs at most 2"});
      continue;
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(lines[n]);
    } catch (const nlohmann::json::parse_error& e) {
      out.problems.push_back({line_no, static_cast<int>(e.byte), std::string("invalid JSON: ") + e.what()});
      continue;
    } catch (const nlohmann::json::exception& e) {
      // out_of_range.406: a number too large for a double (1e999), found by fuzzing.
      out.problems.push_back({line_no, 1, std::string("invalid JSON: ") + e.what()});
      continue;
    }
    if (!j.is_object()) {
      out.problems.push_back({line_no, 1, "expected a JSON object like {\"prompt\": \"...\"}, got " + shown(j)});
      continue;
    }
    size_t before = out.problems.size();
    PromptRecord r;
    r.line = line_no;
    for (const auto& [k, v] : j.items()) {
      if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end()) {
        out.problems.push_back({line_no, 1, "unknown key \"" + k + "\" (known: prompt, negative, tags, seeds)"});
      }
    }
    const nlohmann::json* text = j.contains("prompt") ? &j["prompt"] : j.contains("text") ? &j["text"] : nullptr;
    if (text == nullptr || !text->is_string() || trim(text->get<std::string>()).empty()) {
      out.problems.push_back({line_no, 1, "missing or empty \"prompt\" (a non-empty string)"});
    } else {
      r.text = text->get<std::string>();
    }
    for (const char* key : {"negative", "negative_prompt"}) {
      if (!j.contains(key)) continue;
      if (!j[key].is_string()) out.problems.push_back({line_no, 1, std::string("\"") + key + "\" must be a string"});
      else r.negative = j[key].get<std::string>();
    }
    if (j.contains("tags")) add_json_tags(j["tags"], r, line_no, out);
    for (const char* key : {"seed", "seeds"}) {
      if (!j.contains(key)) continue;
      const auto& s = j[key];
      std::vector<uint64_t> seeds;
      bool ok = true;
      if (s.is_number_unsigned()) seeds.push_back(s.get<uint64_t>());
      else if (s.is_array() && !s.empty()) {
        for (const auto& e : s) {
          if (!e.is_number_unsigned()) ok = false;
          else seeds.push_back(e.get<uint64_t>());
        }
      } else ok = false;
      if (!ok) {
        out.problems.push_back({line_no, 1, std::string("\"") + key +
                                                "\" must be a non-negative integer or a non-empty list of them"});
      } else {
        r.seeds = std::move(seeds);
      }
    }
    if (out.problems.size() == before) out.prompts.push_back(std::move(r));
  }
}

void load_text(const std::vector<std::string_view>& lines, const PromptFileOptions& options, PromptFile& out) {
  for (size_t n = 0; n < lines.size() && !limit_reached(out, options); ++n) {
    std::string_view t = trim(lines[n]);
    if (t.empty() || t[0] == '#') continue;
    PromptRecord r;
    r.line = static_cast<int>(n) + 1;
    r.text = std::string(t);
    out.prompts.push_back(std::move(r));
  }
}

}  // namespace

std::optional<PromptFormat> parse_prompt_format(std::string_view name) {
  if (name == "auto") return PromptFormat::kAuto;
  if (name == "tsv") return PromptFormat::kTsv;
  if (name == "jsonl") return PromptFormat::kJsonl;
  if (name == "txt" || name == "text") return PromptFormat::kText;
  return std::nullopt;
}

std::string_view prompt_format_name(PromptFormat format) {
  switch (format) {
    case PromptFormat::kAuto: return "auto";
    case PromptFormat::kTsv: return "tsv";
    case PromptFormat::kJsonl: return "jsonl";
    case PromptFormat::kText: return "txt";
  }
  return "?";
}

PromptFile load_prompt_file(const std::filesystem::path& path, const PromptFileOptions& options) {
  PromptFile out;
  PromptFormat format = options.format;
  if (format == PromptFormat::kAuto) {
    std::string ext = lower(path.extension().string());
    if (ext == ".tsv") format = PromptFormat::kTsv;
    else if (ext == ".jsonl" || ext == ".ndjson") format = PromptFormat::kJsonl;
    else if (ext == ".txt") format = PromptFormat::kText;
    else {
      out.problems.push_back({0, 0, "cannot tell the format of '" + path.filename().string() +
                                        "' from its extension; use .tsv, .jsonl or .txt, or set format"});
      return out;
    }
  }
  auto text = read_regular_file(path, kMaxPromptFileBytes);
  if (!text.ok()) {
    out.problems.push_back({0, 0, "cannot read prompt file: " + text.status().message()});
    return out;
  }
  PromptFileOptions resolved = options;
  resolved.format = format;
  return parse_prompt_text(*text, resolved);
}

PromptFile parse_prompt_text(std::string_view text, const PromptFileOptions& options) {
  PromptFile out;
  if (size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    TextPosition at = position_of(text, bad);
    out.problems.push_back({at.line, at.column,
                            describe_invalid_utf8(text, bad) +
                                "; prompt files must be UTF-8 (convert it, e.g. `iconv -f latin1 -t utf-8`)"});
    return out;
  }
  std::vector<std::string_view> lines = split_lines(text);
  switch (options.format) {
    case PromptFormat::kTsv: load_tsv(lines, options, out); break;
    case PromptFormat::kJsonl: load_jsonl(lines, options, out); break;
    case PromptFormat::kText: load_text(lines, options, out); break;
    case PromptFormat::kAuto:
      out.problems.push_back({0, 0, "no format given for the prompt text (tsv, jsonl or txt)"});
      return out;
  }
  if (out.problems.empty() && out.prompts.empty()) out.problems.push_back({0, 0, "holds no prompts"});
  if (out.problems.empty() && options.offset > 0) {
    const auto total = static_cast<int64_t>(out.prompts.size());
    if (options.offset >= total) {
      out.problems.push_back({0, 0, "offset " + std::to_string(options.offset) + " skips every prompt (the file holds " +
                                        std::to_string(total) + ")"});
    } else {
      out.prompts.erase(out.prompts.begin(), out.prompts.begin() + options.offset);
    }
  }
  return out;
}

std::vector<std::string> tag_names(const std::vector<PromptRecord>& prompts) {
  std::set<std::string> names;
  for (const auto& r : prompts)
    for (const auto& t : r.tags)
      if (size_t colon = t.find(':'); colon != std::string::npos && colon > 0) names.insert(t.substr(0, colon));
  return {names.begin(), names.end()};
}

Status sample_prompts(std::vector<PromptRecord>& prompts, const PromptSample& sample) {
  if (sample.count <= 0) return Status::Ok();
  const auto total = static_cast<int64_t>(prompts.size());
  if (sample.count > total)
    return Status::InvalidArgument("sample " + std::to_string(sample.count) + " is more than the " +
                                   std::to_string(total) + " prompts there are");
  // Pools in order of first appearance: one, or one per tag value.
  std::vector<std::vector<size_t>> pools;
  if (sample.stratify.empty()) {
    pools.emplace_back(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) pools[0][i] = i;
  } else {
    const std::string name = lower(sample.stratify);
    std::map<std::string, size_t> pool_of;
    bool any = false;
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto v = tag_value(prompts[i], name);
      any = any || v.has_value();
      // Prompts without the tag form a pool of their own ("\0" sorts apart from every value).
      auto [it, inserted] = pool_of.emplace(v.value_or(std::string(1, '\0')), pools.size());
      if (inserted) pools.emplace_back();
      pools[it->second].push_back(i);
    }
    if (!any) {
      std::string names;
      for (const auto& n : tag_names(prompts)) names += (names.empty() ? "" : ", ") + n;
      return Status::InvalidArgument("stratify: no prompt has a tag '" + sample.stratify + ":…' (tag names: " +
                                     (names.empty() ? "none" : names) + ")");
    }
  }
  // Largest-remainder allocation, then at least one per pool while some pool
  // has more than one (taken from the largest quotas).
  const size_t n = static_cast<size_t>(sample.count);
  std::vector<size_t> quota(pools.size());
  std::vector<std::pair<uint64_t, size_t>> remainders;  // (n * size mod total, pool): exact integers
  size_t given = 0;
  for (size_t g = 0; g < pools.size(); ++g) {
    const uint64_t scaled = static_cast<uint64_t>(n) * pools[g].size();
    quota[g] = static_cast<size_t>(scaled / static_cast<uint64_t>(total));
    given += quota[g];
    remainders.push_back({scaled % static_cast<uint64_t>(total), g});
  }
  std::stable_sort(remainders.begin(), remainders.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  // Fewer than pools.size() remain, each to a pool with a non-zero remainder (so not full).
  for (size_t k = 0; given < n && k < remainders.size(); ++k, ++given) ++quota[remainders[k].second];
  for (size_t g = 0; g < pools.size(); ++g) {
    if (quota[g] > 0) continue;
    auto donor = std::max_element(quota.begin(), quota.end());
    if (*donor <= 1) break;
    --*donor;
    quota[g] = 1;
  }
  std::mt19937_64 rng(sample.seed);
  std::vector<size_t> chosen;
  chosen.reserve(n);
  for (size_t g = 0; g < pools.size(); ++g) {
    std::vector<size_t>& pool = pools[g];
    for (size_t k = 0; k < quota[g]; ++k) {
      const size_t j = k + static_cast<size_t>(rng() % (pool.size() - k));
      std::swap(pool[k], pool[j]);
      chosen.push_back(pool[k]);
    }
  }
  std::sort(chosen.begin(), chosen.end());
  std::vector<PromptRecord> kept;
  kept.reserve(chosen.size());
  for (size_t i : chosen) kept.push_back(std::move(prompts[i]));
  prompts = std::move(kept);
  return Status::Ok();
}

}  // namespace hipq::coordinator
