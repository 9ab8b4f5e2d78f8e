#include "coordinator/manifest.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "base/did_you_mean.h"
#include "base/fs.h"
#include "base/utf8.h"
#include "coordinator/manifest_files.h"
#include "coordinator/prompt_sources.h"
#include "coordinator/yaml_guard.h"
#include "spec/synthetic_models.h"

namespace hipq::coordinator {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxPromptOffset = 100'000'000;
constexpr size_t kMaxProblems = 200;
constexpr int kMaxSameKindProblems = 5;

const std::vector<std::string> kTopKeys = {"batch",  "description", "priority", "max_attempts", "model",
                                           "defaults", "parity",    "outputs",  "prompts",      "prompts_file"};
const std::vector<std::string> kDefaultsKeys = {"width",     "height",  "steps",           "guidance",
                                                "sampler",   "precision", "rng",           "seeds",
                                                "repeats",   "negative_prompt", "timestep_spacing", "guidance_rescale",
                                                "loras",     "init_image", "strength",     "refiner",
                                                "aesthetic_score", "negative_aesthetic_score", "vae_precision"};
const std::vector<std::string> kLoraKeys = {"path", "scale"};
const std::vector<std::string> kRefinerKeys = {"model", "switch_at", "aesthetic_score", "negative_aesthetic_score"};
const std::vector<std::string> kParityKeys = {"golden", "gate", "allow_unpinned"};
const std::vector<std::string> kOutputsKeys = {"directory", "save", "layout"};
const std::vector<std::string> kPromptKeys = {"text", "negative", "tags", "seeds", "vae_precision"};
const std::vector<std::string> kPromptFileKeys = {"path", "format", "column", "offset", "limit", "sample", "seed",
                                                   "stratify"};
const std::vector<std::string> kSeedRangeKeys = {"from", "count"};
const std::vector<std::string> kSaveKinds = {"latent", "png", "timings"};
const std::vector<std::string> kLayoutFields = {"batch", "batch_id", "prompt", "seed", "repeat", "job"};

std::string join(const std::vector<std::string>& list) { return spec::join_names(list); }

// Every problem found, formatted "<file>:<line>:<column>: <field>: <message>".
class Problems {
 public:
  explicit Problems(std::string file) : file_(std::move(file)) {}

  void at(const std::string& file, int line, int column, std::string_view field, std::string_view message) {
    ++count_;
    if (list_.size() >= kMaxProblems) return;
    list_.push_back(file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + std::string(field) +
                    ": " + std::string(message));
  }
  void at(const YAML::Node& node, std::string_view field, std::string_view message) {
    YAML::Mark m = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
    at(file_, m.line + 1, m.column + 1, field, message);
  }
  void at(const YAML::Mark& m, std::string_view field, std::string_view message) {
    at(file_, m.line + 1, m.column + 1, field, message);
  }
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }

  Status status() const {
    std::string msg;
    for (const auto& l : list_) msg += (msg.empty() ? "" : "\n") + l;
    if (count_ > list_.size()) {
      msg += "\n" + file_ + ":0:0: manifest: " + std::to_string(count_ - list_.size()) + " more problems not shown";
    }
    return Status::InvalidArgument(msg);
  }

 private:
  std::string file_;
  std::vector<std::string> list_;
  size_t count_ = 0;
};

struct Entry {
  YAML::Node key;
  YAML::Node value;
};
using EntryMap = std::map<std::string, Entry>;

std::string describe(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "an unknown node";
}

std::string sub(std::string_view prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : std::string(prefix) + "." + std::string(key);
}

// Collects a mapping's entries; flags unknown (with a suggestion) and duplicate keys.
EntryMap read_map(const YAML::Node& node, std::string_view field, const std::vector<std::string>& known,
                  Problems& p) {
  EntryMap out;
  if (!node.IsMap()) {
    p.at(node, field.empty() ? "manifest" : field, "expected a mapping (key: value lines), got " + describe(node));
    return out;
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    // A copy: it-> yields a temporary pair, a reference to its member would
    // dangle (AddressSanitizer stack-use-after-scope, found by fuzz_manifest).
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      p.at(key, field.empty() ? "manifest" : field, "keys must be plain names, got " + describe(key));
      continue;
    }
    std::string name = key.Scalar();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      p.at(key, sub(field, name), "unknown key '" + name + "'" + did_you_mean(name, known) + " (known: " +
                                      join(known) + ")");
      continue;
    }
    auto [pos, inserted] = out.emplace(name, Entry{key, it->second});
    if (!inserted) {
      p.at(key, sub(field, name),
           "duplicate key (first given at line " + std::to_string(pos->second.key.Mark().line + 1) + ")");
    }
  }
  return out;
}

std::optional<std::string> get_string(const YAML::Node& n, std::string_view field, Problems& p,
                                      bool allow_empty = false) {
  if (!n.IsScalar() || n.IsNull()) {
    p.at(n, field, "expected a string, got " + describe(n));
    return std::nullopt;
  }
  if (!allow_empty && n.Scalar().empty()) {
    p.at(n, field, "must not be empty");
    return std::nullopt;
  }
  return n.Scalar();
}

std::optional<int64_t> get_int(const YAML::Node& n, std::string_view field, int64_t lo, int64_t hi, Problems& p) {
  if (!n.IsScalar() || n.IsNull()) {
    p.at(n, field, "expected an integer, got " + describe(n));
    return std::nullopt;
  }
  const std::string& s = n.Scalar();
  int64_t v = 0;
  const char* begin = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
  auto [end, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
    p.at(n, field, "expected an integer, got '" + s + "'");
    return std::nullopt;
  }
  if (v < lo || v > hi) {
    p.at(n, field, std::to_string(v) + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    return std::nullopt;
  }
  return v;
}

std::optional<uint64_t> get_u64(const YAML::Node& n, std::string_view field, Problems& p) {
  if (!n.IsScalar() || n.IsNull()) {
    p.at(n, field, "expected a non-negative integer, got " + describe(n));
    return std::nullopt;
  }
  const std::string& s = n.Scalar();
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || s[0] == '-' || ec != std::errc() || end != s.data() + s.size()) {
    p.at(n, field, "expected a non-negative integer below 2^64, got '" + s + "'");
    return std::nullopt;
  }
  return v;
}

std::optional<double> get_number(const YAML::Node& n, std::string_view field, double lo, double hi, Problems& p) {
  if (!n.IsScalar() || n.IsNull()) {
    p.at(n, field, "expected a number, got " + describe(n));
    return std::nullopt;
  }
  const std::string& s = n.Scalar();
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) {
    p.at(n, field, "expected a finite number, got '" + s + "'");
    return std::nullopt;
  }
  if (v < lo || v > hi) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%g is out of range %g..%g", v, lo, hi);
    p.at(n, field, buf);
    return std::nullopt;
  }
  return v;
}

std::optional<bool> get_bool(const YAML::Node& n, std::string_view field, Problems& p) {
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) {
    p.at(n, field, "expected true or false, got " + describe(n));
    return std::nullopt;
  }
  return v;
}

// `suggest`: the did-you-mean of an unknown value (default: the closest name).
std::optional<std::string> get_choice(const YAML::Node& n, std::string_view field,
                                      const std::vector<std::string>& allowed, Problems& p,
                                      std::string (*suggest)(std::string_view) = nullptr) {
  auto s = get_string(n, field, p);
  if (!s) return std::nullopt;
  if (std::find(allowed.begin(), allowed.end(), *s) == allowed.end()) {
    const std::string hint = suggest ? suggest(*s) : did_you_mean(*s, allowed);
    p.at(n, field, "unknown value '" + *s + "'" + hint + " (known: " + join(allowed) + ")");
    return std::nullopt;
  }
  return s;
}

// "100000 jobs, the batch cap (--max-batch-jobs)": what a refusal says of the cap.
std::string batch_cap_text(int64_t max_jobs) {
  return std::to_string(max_jobs) + " jobs, the batch cap (--max-batch-jobs" +
         (max_jobs < kMaxBatchJobsLimit ? ", at most " + std::to_string(kMaxBatchJobsLimit) : std::string()) + ")";
}

// seeds: 7 | [1, 2, 3] | {from: 0, count: 8}
// `budget`: seeds a range may still create in this manifest; a range is
// refused before it allocates when it would pass it (2,000 prompts with
// {from: 0, count: 100000} each must not cost gigabytes to refuse).
std::optional<std::vector<uint64_t>> get_seeds(const YAML::Node& n, std::string_view field, Problems& p,
                                               int64_t& budget, int64_t max_jobs) {
  std::vector<uint64_t> seeds;
  if (n.IsScalar()) {
    auto v = get_u64(n, field, p);
    if (!v) return std::nullopt;
    seeds.push_back(*v);
  } else if (n.IsSequence()) {
    if (n.size() == 0) {
      p.at(n, field, "the list of seeds is empty");
      return std::nullopt;
    }
    bool ok = true;
    std::set<uint64_t> seen;
    for (size_t i = 0; i < n.size(); ++i) {
      std::string f = std::string(field) + "[" + std::to_string(i) + "]";
      auto v = get_u64(n[i], f, p);
      if (!v) {
        ok = false;
        continue;
      }
      if (!seen.insert(*v).second) {
        p.at(n[i], f, "seed " + std::to_string(*v) + " appears twice");
        ok = false;
      }
      seeds.push_back(*v);
    }
    if (!ok) return std::nullopt;
  } else if (n.IsMap()) {
    size_t before = p.size();
    EntryMap m = read_map(n, field, kSeedRangeKeys, p);
    std::optional<uint64_t> from = 0;
    std::optional<int64_t> count;
    if (m.count("from")) from = get_u64(m["from"].value, sub(field, "from"), p);
    if (m.count("count")) count = get_int(m["count"].value, sub(field, "count"), 1, 100000, p);
    else p.at(n, field, "a seed range needs count (e.g. {from: 0, count: 8})");
    if (p.size() != before || !from || !count) return std::nullopt;
    if (budget < 0) return std::nullopt;  // refused once already; once is enough
    if (*count > budget) {
      p.at(n, field, "the seed ranges of this manifest add up to more than " + std::to_string(max_jobs) +
                         " seeds, more than a batch may hold (" + batch_cap_text(max_jobs) +
                         "); split it into several batches");
      budget = -1;
      return std::nullopt;
    }
    budget -= *count;
    if (*from > std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(*count - 1)) {
      p.at(n, field, "the range from " + std::to_string(*from) + " with count " + std::to_string(*count) +
                         " passes 2^64 - 1");
      return std::nullopt;
    }
    for (int64_t i = 0; i < *count; ++i) seeds.push_back(*from + static_cast<uint64_t>(i));
  } else {
    p.at(n, field, "expected a seed, a list of seeds or {from: N, count: N}, got " + describe(n));
    return std::nullopt;
  }
  return seeds;
}

std::optional<std::vector<std::string>> get_tags(const YAML::Node& n, std::string_view field, Problems& p) {
  std::vector<std::string> tags;
  if (n.IsScalar() && !n.IsNull()) {
    tags.push_back(n.Scalar());
  } else if (n.IsSequence()) {
    bool ok = true;
    for (size_t i = 0; i < n.size(); ++i) {
      auto s = get_string(n[i], std::string(field) + "[" + std::to_string(i) + "]", p);
      if (!s) ok = false;
      else tags.push_back(*s);
    }
    if (!ok) return std::nullopt;
  } else if (n.IsMap()) {
    bool ok = true;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar() || !it->second.IsScalar()) {
        p.at(it->first, field, "tag mappings hold name: value strings");
        ok = false;
        continue;
      }
      tags.push_back(it->first.Scalar() + ":" + it->second.Scalar());
    }
    if (!ok) return std::nullopt;
  } else {
    p.at(n, field, "expected a tag, a list of tags or a mapping name: value, got " + describe(n));
    return std::nullopt;
  }
  return tags;
}

// ---- output layout ------------------------------------------------------------

struct LayoutPart {
  std::string literal;  // when field is empty
  std::string field;
  int pad = 0;
};

// Parses "{batch}/{prompt:05}-s{seed}"; "" error when valid.
std::string parse_layout(const std::string& layout, std::vector<LayoutPart>& parts) {
  parts.clear();
  size_t i = 0;
  std::string literal;
  while (i < layout.size()) {
    char c = layout[i];
    if (c == '}') return "unmatched '}' at position " + std::to_string(i + 1);
    if (c != '{') {
      literal += c;
      ++i;
      continue;
    }
    size_t close = layout.find('}', i);
    if (close == std::string::npos) return "unclosed '{' at position " + std::to_string(i + 1);
    std::string inner = layout.substr(i + 1, close - i - 1);
    LayoutPart part;
    size_t colon = inner.find(':');
    part.field = inner.substr(0, colon);
    if (std::find(kLayoutFields.begin(), kLayoutFields.end(), part.field) == kLayoutFields.end()) {
      return "unknown placeholder {" + part.field + "}" + did_you_mean(part.field, kLayoutFields) +
             " (known: {batch}, {batch_id}, {prompt}, {seed}, {repeat}, {job})";
    }
    if (colon != std::string::npos) {
      std::string spec = inner.substr(colon + 1);
      int pad = 0;
      auto [end, ec] = std::from_chars(spec.data(), spec.data() + spec.size(), pad);
      if (spec.size() < 2 || spec[0] != '0' || ec != std::errc() || end != spec.data() + spec.size() || pad < 1 ||
          pad > 20) {
        return "bad format '" + spec + "' in {" + inner + "}: use a zero-padded width like {prompt:05}";
      }
      if (part.field == "batch" || part.field == "batch_id") return "{" + part.field + "} takes no width";
      part.pad = pad;
    }
    if (!literal.empty()) parts.push_back({literal, "", 0});
    literal.clear();
    parts.push_back(part);
    i = close + 1;
  }
  if (!literal.empty()) parts.push_back({literal, "", 0});
  return "";
}

std::string padded(uint64_t v, int pad) {
  std::string s = std::to_string(v);
  if (static_cast<int>(s.size()) < pad) s.insert(0, static_cast<size_t>(pad) - s.size(), '0');
  return s;
}

std::string render_layout(const std::vector<LayoutPart>& parts, const std::string& batch,
                          const ManifestJob& job) {
  std::string out;
  for (const auto& part : parts) {
    if (part.field.empty()) out += part.literal;
    else if (part.field == "batch") out += batch;
    else if (part.field == "batch_id") out += "{batch_id}";  // known once queued (db::JobStore::insert_batch)
    else if (part.field == "prompt") out += padded(job.prompt_index, part.pad);
    else if (part.field == "seed") out += padded(job.seed, part.pad);
    else if (part.field == "repeat") out += padded(static_cast<uint64_t>(job.repeat), part.pad);
    else if (part.field == "job") out += padded(static_cast<uint64_t>(job.ordinal), part.pad);
  }
  return out;
}

bool valid_batch_name(const std::string& s) {
  if (s.empty() || s.size() > 100 || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

std::string batch_name_from_stem(const fs::path& path) {
  std::string s = path.stem().string();
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '-';
  }
  while (!s.empty() && !std::isalnum(static_cast<unsigned char>(s[0]))) s.erase(0, 1);
  if (s.size() > 100) s.resize(100);
  return s.empty() ? "batch" : s;
}

// Through the same 6-significant-digit text the engine uses for guidance
// (engine::format_guidance of a float), so golden keys agree.
double canonical_guidance(double g) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(static_cast<float>(g)));
  return std::strtod(buf, nullptr);
}

// ---- sections ---------------------------------------------------------------------

class Parser {
 public:
  Parser(Manifest& m, Problems& p, int64_t max_jobs)
      : m_(m), p_(p), base_(m.path.parent_path()), max_jobs_(max_jobs), seed_budget_(max_jobs) {}

  void parse(const YAML::Node& root) {
    EntryMap top = read_map(root, "", kTopKeys, p_);
    if (!root.IsMap()) return;

    m_.batch_name = batch_name_from_stem(m_.path);
    if (top.count("batch")) {
      if (auto s = get_string(top["batch"].value, "batch", p_)) {
        if (!valid_batch_name(*s)) {
          p_.at(top["batch"].value, "batch",
                "'" + *s + "' is not a valid batch name: use letters, digits, '-', '_' or '.', starting with a "
                           "letter or digit, at most 100 characters");
        } else {
          m_.batch_name = *s;
        }
      }
    }
    if (top.count("description")) (void)get_string(top["description"].value, "description", p_, true);
    if (top.count("priority")) {
      if (auto v = get_int(top["priority"].value, "priority", -1000000, 1000000, p_)) m_.priority = static_cast<int>(*v);
    }
    if (top.count("max_attempts")) {
      if (auto v = get_int(top["max_attempts"].value, "max_attempts", 1, 100, p_)) m_.max_attempts = static_cast<int>(*v);
    }
    if (top.count("model")) parse_model(top["model"].value);
    else p_.at(root, "model", "missing: name the model (synthetic:tiny-sdxl, a diffusers folder or a .safetensors file)");
    if (top.count("defaults")) parse_defaults(top["defaults"].value);
    if (top.count("parity")) parse_parity(top["parity"].value);
    m_.outputs.root = (base_ / "out").lexically_normal();
    if (top.count("outputs")) parse_outputs(top["outputs"].value);
    if (top.count("prompts")) parse_inline_prompts(top["prompts"].value);
    if (top.count("prompts_file")) parse_prompt_files(top["prompts_file"].value);
    if (!top.count("prompts") && !top.count("prompts_file")) {
      p_.at(root, "prompts", "missing: give prompts: (a list) or prompts_file: (a .tsv, .jsonl or .txt file)");
    }
    if (p_.empty()) check_jobs(top);
  }

 private:
  fs::path resolve(const std::string& s) const {
    fs::path path(s);
    return (path.is_absolute() ? path : base_ / path).lexically_normal();
  }

  void parse_model(const YAML::Node& n) {
    if (auto spec = model_spec(n, "model")) m_.model = *spec;
  }

  // A model spec: synthetic:NAME[@SEED] (a known name), or a path that exists
  // (relative to the manifest), returned absolute.
  std::optional<std::string> model_spec(const YAML::Node& n, const std::string& field) {
    auto s = get_string(n, field, p_);
    if (!s) return std::nullopt;
    if (s->starts_with(spec::kSyntheticModelPrefix)) {
      std::string name = s->substr(spec::kSyntheticModelPrefix.size());
      std::string seed;
      if (size_t at = name.find('@'); at != std::string::npos) {
        seed = name.substr(at + 1);
        name = name.substr(0, at);
      }
      const auto& known = spec::synthetic_model_names();
      if (name.empty()) {
        p_.at(n, field, "synthetic: needs a name, e.g. synthetic:tiny-sdxl (known: " + join(known) + ")");
      } else if (std::find(known.begin(), known.end(), name) == known.end()) {
        p_.at(n, field, "unknown synthetic model '" + name + "'" + did_you_mean(name, known) + " (known: " +
                              join(known) + "; NAME@SEED picks the seed)");
      } else if (s->find('@') != std::string::npos &&
                 (seed.empty() || seed.size() > 20 || seed.find_first_not_of("0123456789") != std::string::npos)) {
        p_.at(n, field, "synthetic model '" + *s + "': the seed after '@' must be a non-negative integer");
      }
      return s;
    }
    fs::path path = resolve(*s);
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      p_.at(n, field, "'" + path.string() +
                           "' does not exist (paths are relative to the manifest's folder; use synthetic:NAME for "
                           "generated weights)");
      return std::nullopt;
    }
    return path.string();
  }

  // loras: [{path: a.safetensors, scale: 0.8}, b.safetensors, ...]
  void parse_loras(const YAML::Node& n, ManifestDefaults& out) {
    const std::string field = "defaults.loras";
    if (!n.IsSequence()) {
      p_.at(n, field, "expected a list of {path: FILE, scale: N} (or file names), got " + describe(n));
      return;
    }
    for (size_t i = 0; i < n.size(); ++i) {
      const std::string f = field + "[" + std::to_string(i) + "]";
      const YAML::Node& e = n[i];
      YAML::Node path_node = e;
      spec::LoraSpec lora;
      if (e.IsMap()) {
        const size_t before = p_.size();
        EntryMap m = read_map(e, f, kLoraKeys, p_);
        if (!m.count("path")) {
          p_.at(e, f, "missing path: (the LoRA's .safetensors file)");
        } else if (auto s = get_string(m["path"].value, f + ".path", p_)) {
          lora.path = *s;
          path_node = m["path"].value;
        }
        if (m.count("scale")) {
          if (auto x = get_number(m["scale"].value, f + ".scale", -spec::kMaxLoraScale, spec::kMaxLoraScale, p_))
            lora.scale = static_cast<float>(canonical_guidance(*x));
        }
        if (p_.size() != before) continue;
      } else if (auto s = get_string(e, f, p_)) {
        lora.path = *s;
      } else {
        continue;
      }
      const fs::path file = resolve(lora.path);
      lora.path = file.string();
      auto digest = check_lora_file(file);
      if (!digest.ok()) {
        p_.at(path_node, f, digest.status().message());
        continue;
      }
      out.loras.push_back(std::move(lora));
      out.inputs.loras.push_back(*digest);
    }
  }

  // refiner: {model: synthetic:sdxl-refiner | PATH, switch_at: 0.8, aesthetic_score: 6,
  //           negative_aesthetic_score: 2.5}, or the model alone.
  void parse_refiner(const YAML::Node& n, ManifestDefaults& out) {
    const std::string field = "defaults.refiner";
    if (n.IsScalar()) {
      if (auto spec = model_spec(n, field)) out.refiner = *spec;
      return;
    }
    EntryMap m = read_map(n, field, kRefinerKeys, p_);
    if (!n.IsMap()) return;
    if (!m.count("model")) p_.at(n, field, "missing model: (the refiner's model, e.g. synthetic:sdxl-refiner)");
    else if (auto spec = model_spec(m["model"].value, field + ".model")) out.refiner = *spec;
    if (m.count("switch_at")) {
      const YAML::Node& v = m["switch_at"].value;
      if (auto x = get_number(v, field + ".switch_at", 0.0, 1.0, p_)) {
        if (*x <= 0.0 || *x >= 1.0)
          p_.at(v, field + ".switch_at", "must be in (0, 1): the fraction of the schedule the base model runs");
        else out.refiner_switch_at = canonical_guidance(*x);
      }
    }
    if (m.count("aesthetic_score")) {
      if (auto x = get_number(m["aesthetic_score"].value, field + ".aesthetic_score", 0.0, 10.0, p_))
        out.aesthetic_score = canonical_guidance(*x);
    }
    if (m.count("negative_aesthetic_score")) {
      if (auto x = get_number(m["negative_aesthetic_score"].value, field + ".negative_aesthetic_score", 0.0, 10.0, p_))
        out.negative_aesthetic_score = canonical_guidance(*x);
    }
  }

  // init_image and strength, checked together (after the size and sampler).
  void parse_img2img(EntryMap& d, ManifestDefaults& out) {
    if (d.count("strength")) {
      const YAML::Node& v = d["strength"].value;
      if (auto x = get_number(v, "defaults.strength", 0.0, 1.0, p_)) {
        if (*x <= 0.0) p_.at(v, "defaults.strength", "must be in (0, 1]: the part of the schedule img2img runs");
        else out.strength = canonical_guidance(*x);
      }
      if (!d.count("init_image"))
        p_.at(d["strength"].key, "defaults.strength", "strength needs init_image: (without one the job is text-to-image)");
    }
    if (!d.count("init_image")) return;
    const YAML::Node& v = d["init_image"].value;
    auto s = get_string(v, "defaults.init_image", p_);
    if (!s) return;
    const fs::path file = resolve(*s);
    const auto& allowed = spec::img2img_samplers();
    if (std::find(allowed.begin(), allowed.end(), out.sampler) == allowed.end()) {
      p_.at(v, "defaults.init_image", "sampler '" + out.sampler + "' cannot run img2img (known for img2img: " +
                                          join(allowed) + ")");
    }
    if (d.count("strength") && spec::denoising_steps(out.steps, static_cast<float>(out.strength)) < 1) {
      p_.at(d["strength"].value, "defaults.strength",
            "strength " + spec::format_guidance(static_cast<float>(out.strength)) + " of " +
                std::to_string(out.steps) + " steps runs no step (int(steps * strength) = 0); raise one of them");
    }
    auto digest = check_init_image_file(file, out.width, out.height);
    if (!digest.ok()) {
      p_.at(v, "defaults.init_image", digest.status().message());
      return;
    }
    out.init_image = file.string();
    out.inputs.init_image = *digest;
  }

  void parse_defaults(const YAML::Node& n) {
    EntryMap d = read_map(n, "defaults", kDefaultsKeys, p_);
    ManifestDefaults& out = m_.defaults;
    auto size = [&](const char* key, int& target) {
      if (!d.count(key)) return;
      const YAML::Node& v = d[key].value;
      if (auto x = get_int(v, sub("defaults", key), 8, 16384, p_)) {
        if (*x % 8 != 0) p_.at(v, sub("defaults", key), std::to_string(*x) + " is not a multiple of 8");
        else target = static_cast<int>(*x);
      }
    };
    size("width", out.width);
    size("height", out.height);
    if (d.count("steps")) {
      if (auto x = get_int(d["steps"].value, "defaults.steps", 1, 10000, p_)) out.steps = static_cast<int>(*x);
    }
    if (d.count("guidance")) {
      if (auto x = get_number(d["guidance"].value, "defaults.guidance", 0.0, 100.0, p_)) out.guidance = *x;
    }
    if (d.count("sampler")) {
      if (auto x = get_choice(d["sampler"].value, "defaults.sampler", spec::known_samplers(), p_,
                              spec::suggest_sampler)) out.sampler = *x;
    }
    if (d.count("precision")) {
      if (auto x = get_choice(d["precision"].value, "defaults.precision", spec::known_precisions(), p_)) out.precision = *x;
    }
    if (d.count("rng")) {
      if (auto x = get_choice(d["rng"].value, "defaults.rng", spec::known_rngs(), p_)) out.rng = *x;
    }
    if (d.count("timestep_spacing")) {
      if (auto x = get_choice(d["timestep_spacing"].value, "defaults.timestep_spacing",
                              spec::known_timestep_spacings(), p_))
        out.timestep_spacing = *x;
    }
    if (d.count("guidance_rescale")) {
      if (auto x = get_number(d["guidance_rescale"].value, "defaults.guidance_rescale", 0.0, 1.0, p_))
        out.guidance_rescale = *x;
    }
    if (d.count("vae_precision")) {
      if (auto x = get_choice(d["vae_precision"].value, "defaults.vae_precision", spec::known_vae_precisions(), p_))
        out.vae_precision = *x;
    }
    if (d.count("seeds")) {
      if (auto x = get_seeds(d["seeds"].value, "defaults.seeds", p_, seed_budget_, max_jobs_)) out.seeds = *x;
    }
    if (d.count("repeats")) {
      if (auto x = get_int(d["repeats"].value, "defaults.repeats", 1, 10000, p_)) out.repeats = static_cast<int>(*x);
    }
    if (d.count("negative_prompt")) {
      if (auto x = get_string(d["negative_prompt"].value, "defaults.negative_prompt", p_, true)) out.negative_prompt = *x;
    }
    if (d.count("loras")) parse_loras(d["loras"].value, out);
    parse_img2img(d, out);
    if (d.count("refiner")) {
      parse_refiner(d["refiner"].value, out);
      // What the base + refiner split implements (spec::GenerationSettings::validate).
      const YAML::Node& r = d["refiner"].key;
      const auto& split = spec::img2img_samplers();
      if (!out.refiner.empty() && std::find(split.begin(), split.end(), out.sampler) == split.end())
        p_.at(r, "defaults.refiner", "sampler '" + out.sampler + "' with a refiner is not implemented (its schedule "
                                     "is not split between two models); base + refiner runs with " + join(split));
      if (!out.refiner.empty() && d.count("init_image"))
        p_.at(r, "defaults.refiner", "a refiner with init_image is not implemented: run the refiner itself as the "
                                     "img2img model (model: the refiner, with init_image and strength)");
    }
    // The refiner run as the img2img model (model: the refiner) conditions on
    // the scores itself; with a refiner: mapping they belong there.
    for (const char* key : {"aesthetic_score", "negative_aesthetic_score"}) {
      if (!d.count(key)) continue;
      const std::string field = std::string("defaults.") + key;
      if (d.count("refiner") && d["refiner"].value.IsMap()) {
        p_.at(d[key].key, field, std::string("set it inside refiner: (refiner.") + key + "), where the refiner's "
                                     "other settings are, not beside it");
        continue;
      }
      if (auto x = get_number(d[key].value, field, 0.0, 10.0, p_))
        (std::string(key) == "aesthetic_score" ? out.aesthetic_score : out.negative_aesthetic_score) =
            canonical_guidance(*x);
    }
  }

  void parse_parity(const YAML::Node& n) {
    EntryMap d = read_map(n, "parity", kParityKeys, p_);
    if (d.count("golden")) {
      const YAML::Node& v = d["golden"].value;
      if (auto s = get_string(v, "parity.golden", p_)) {
        if (*s == "store") {
          m_.parity.golden = "store";
        } else if (*s == "none") {
          m_.parity.golden = "";
        } else {
          fs::path dir = resolve(*s);
          std::error_code ec;
          if (!fs::is_directory(dir, ec)) {
            p_.at(v, "parity.golden", "'" + dir.string() +
                                          "' is not a directory; use store (the golden store), none, or a folder "
                                          "of golden files");
          } else {
            m_.parity.golden = dir.string();
          }
        }
      }
    }
    if (d.count("gate")) {
      const YAML::Node& g = d["gate"].value;
      EntryMap gate = read_map(g, "parity.gate", spec::parity_gate_keys(), p_);
      for (auto& [key, entry] : gate) {
        auto range = spec::parity_gate_range(key);
        HIPQ_CHECK(range.ok());  // read_map kept the known keys only
        auto x = get_number(entry.value, sub("parity.gate", key), range->min, range->max, p_);
        if (!x) continue;
        if (Status set = m_.parity.gate.set(key, *x); !set.ok())
          p_.at(entry.value, sub("parity.gate", key), set.message());
      }
    }
    if (d.count("allow_unpinned")) {
      if (auto b = get_bool(d["allow_unpinned"].value, "parity.allow_unpinned", p_)) m_.parity.allow_unpinned = *b;
    }
  }

  void parse_outputs(const YAML::Node& n) {
    EntryMap d = read_map(n, "outputs", kOutputsKeys, p_);
    if (d.count("directory")) {
      if (auto s = get_string(d["directory"].value, "outputs.directory", p_)) {
        m_.outputs.root = resolve(*s);
        outputs_node_ = d["directory"].value;
        std::error_code ec;
        if (Status c = check_path_components(m_.outputs.root); !c.ok()) {
          p_.at(d["directory"].value, "outputs.directory", c.message());
        } else if (fs::exists(m_.outputs.root, ec) && !fs::is_directory(m_.outputs.root, ec)) {
          p_.at(d["directory"].value, "outputs.directory",
                "'" + m_.outputs.root.string() + "' exists and is not a directory");
        }
      }
    }
    if (d.count("save")) {
      const YAML::Node& v = d["save"].value;
      if (!v.IsSequence() || v.size() == 0) {
        p_.at(v, "outputs.save", "expected a non-empty list of: latent, png, timings; got " + describe(v));
      } else {
        std::vector<std::string> save;
        for (size_t i = 0; i < v.size(); ++i) {
          std::string f = "outputs.save[" + std::to_string(i) + "]";
          if (auto s = get_choice(v[i], f, kSaveKinds, p_)) {
            if (std::find(save.begin(), save.end(), *s) != save.end()) p_.at(v[i], f, "'" + *s + "' appears twice");
            else save.push_back(*s);
          }
        }
        m_.outputs.save = save;
      }
    }
    if (d.count("layout")) {
      const YAML::Node& v = d["layout"].value;
      if (auto s = get_string(v, "outputs.layout", p_)) {
        std::vector<LayoutPart> parts;
        std::string err = parse_layout(*s, parts);
        if (!err.empty()) p_.at(v, "outputs.layout", err);
        else m_.outputs.layout = *s;
      }
      layout_node_ = v;
    }
  }

  void parse_inline_prompts(const YAML::Node& n) {
    if (!n.IsSequence()) {
      p_.at(n, "prompts", "expected a list of prompts, got " + describe(n));
      return;
    }
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node& e = n[i];
      std::string field = "prompts[" + std::to_string(i) + "]";
      PromptSpec spec;
      YAML::Mark mark = e.Mark();
      spec.where = {m_.path.string(), mark.line + 1, mark.column + 1};
      if (e.IsScalar() && !e.IsNull()) {
        spec.text = e.Scalar();
        if (spec.text.find_first_not_of(" \t\r\n") == std::string::npos) {
          p_.at(e, field, "empty prompt");
          continue;
        }
      } else if (e.IsMap()) {
        EntryMap d = read_map(e, field, kPromptKeys, p_);
        if (!d.count("text")) {
          p_.at(e, field, "missing text: (the prompt itself)");
        } else if (auto s = get_string(d["text"].value, field + ".text", p_, /*allow_empty=*/true)) {
          if (s->find_first_not_of(" \t\r\n") == std::string::npos) p_.at(d["text"].value, field + ".text", "empty prompt");
          spec.text = *s;
        }
        if (d.count("negative")) spec.negative = get_string(d["negative"].value, field + ".negative", p_, true);
        if (d.count("tags")) {
          if (auto t = get_tags(d["tags"].value, field + ".tags", p_)) spec.tags = *t;
        }
        if (d.count("seeds")) spec.seeds = get_seeds(d["seeds"].value, field + ".seeds", p_, seed_budget_, max_jobs_);
        if (d.count("vae_precision"))
          spec.vae_precision =
              get_choice(d["vae_precision"].value, field + ".vae_precision", ::hipq::spec::known_vae_precisions(), p_);
      } else {
        p_.at(e, field, "expected a prompt string or a mapping with text:, got " + describe(e));
        continue;
      }
      m_.prompts.push_back(std::move(spec));
    }
  }

  void parse_prompt_files(const YAML::Node& n) {
    if (n.IsSequence()) {
      if (n.size() == 0) p_.at(n, "prompts_file", "the list of prompt files is empty");
      for (size_t i = 0; i < n.size(); ++i) parse_prompt_file(n[i], "prompts_file[" + std::to_string(i) + "]");
    } else {
      parse_prompt_file(n, "prompts_file");
    }
  }

  void parse_prompt_file(const YAML::Node& n, const std::string& field) {
    PromptFileOptions options;
    PromptSample sample;
    YAML::Node sample_node, stratify_node;
    std::optional<std::string> path;
    if (n.IsScalar() && !n.IsNull()) {
      path = n.Scalar();
    } else if (n.IsMap()) {
      size_t before = p_.size();
      EntryMap d = read_map(n, field, kPromptFileKeys, p_);
      if (!d.count("path")) p_.at(n, field, "missing path: (the prompt file)");
      else path = get_string(d["path"].value, field + ".path", p_);
      if (d.count("format")) {
        if (auto s = get_string(d["format"].value, field + ".format", p_)) {
          auto f = parse_prompt_format(*s);
          if (!f) {
            p_.at(d["format"].value, field + ".format",
                  "unknown format '" + *s + "'" + did_you_mean(*s, {"tsv", "jsonl", "txt", "auto"}) +
                      " (known: tsv, jsonl, txt, auto)");
          } else {
            options.format = *f;
          }
        }
      }
      if (d.count("column")) {
        if (auto s = get_string(d["column"].value, field + ".column", p_)) options.column = *s;
      }
      if (d.count("offset")) {
        if (auto x = get_int(d["offset"].value, field + ".offset", 0, kMaxPromptOffset, p_)) options.offset = *x;
      }
      if (d.count("limit")) {
        if (auto x = get_int(d["limit"].value, field + ".limit", 1, max_jobs_, p_)) options.limit = *x;
      }
      if (d.count("sample")) {
        sample_node = d["sample"].value;
        if (auto x = get_int(sample_node, field + ".sample", 1, max_jobs_, p_)) sample.count = *x;
        if (d.count("limit")) {
          p_.at(d["limit"].value, field + ".limit",
                "limit and sample exclude each other: limit keeps the first N prompts, sample draws N at random");
        }
      }
      if (d.count("seed")) {
        if (!d.count("sample")) p_.at(d["seed"].key, field + ".seed", "seed needs sample: N (it seeds the sample)");
        else if (auto x = get_u64(d["seed"].value, field + ".seed", p_)) sample.seed = *x;
      }
      if (d.count("stratify")) {
        if (!d.count("sample")) {
          p_.at(d["stratify"].key, field + ".stratify", "stratify needs sample: N (it spreads the sample over a tag)");
        } else if (auto x = get_string(d["stratify"].value, field + ".stratify", p_)) {
          stratify_node = d["stratify"].value;
          if (x->empty() || x->find(':') != std::string::npos)
            p_.at(d["stratify"].value, field + ".stratify",
                  "expected a tag name such as Category (tags are NAME:VALUE), got '" + *x + "'");
          else sample.stratify = *x;
        }
      }
      if (p_.size() != before) return;
    } else {
      p_.at(n, field,
            "expected a file path or {path: FILE, format:, column:, offset:, limit:, sample:, seed:, stratify:}, got " +
                describe(n));
      return;
    }
    if (!path) return;
    fs::path file = resolve(*path);
    // More prompts than jobs a batch may hold is refused anyway: stop
    // reading one past the limit instead of holding millions in memory.
    if (options.limit == 0) options.limit = max_jobs_ + 1;
    PromptFile loaded = load_prompt_file(file, options);
    for (const auto& problem : loaded.problems) {
      if (problem.line == 0) {
        p_.at(n, field, "'" + file.string() + "': " + problem.message);
      } else {
        p_.at(file.string(), problem.line, std::max(1, problem.column), field, problem.message);
      }
    }
    if (loaded.problems.empty() && sample.count > 0) {
      if (Status st = sample_prompts(loaded.prompts, sample); !st.ok()) {
        const std::string msg = st.message();
        if (msg.rfind("stratify: ", 0) == 0) {
          p_.at(stratify_node, field + ".stratify",
                "'" + file.string() + "': " + msg.substr(10) + did_you_mean(sample.stratify, tag_names(loaded.prompts)));
        } else {
          p_.at(sample_node, field + ".sample", "'" + file.string() + "': " + msg);
        }
      }
    }
    for (auto& r : loaded.prompts) {
      PromptSpec spec;
      spec.text = std::move(r.text);
      spec.negative = std::move(r.negative);
      spec.tags = std::move(r.tags);
      spec.seeds = std::move(r.seeds);
      spec.where = {file.string(), r.line, 1};
      m_.prompts.push_back(std::move(spec));
    }
  }

  // Runs only on an otherwise valid manifest: the job count, and every output
  // directory unique and confined to the output root on the real filesystem.
  void check_jobs(EntryMap& top) {
    YAML::Node where = layout_node_.IsDefined() ? layout_node_
                       : outputs_node_.IsDefined() ? outputs_node_
                       : top.count("outputs")      ? top["outputs"].value
                                                   : top.begin()->second.key;
    std::string field = layout_node_.IsDefined() ? "outputs.layout" : "outputs";
    int64_t n = m_.job_count();
    if (n > max_jobs_) {
      p_.at(where, "prompts", "the manifest expands to " + std::to_string(n) + " jobs, more than " +
                                  batch_cap_text(max_jobs_) + "; split it into several batches");
      return;
    }
    if (n == 0) {
      p_.at(top.begin()->second.key, "prompts", "the manifest has no prompts");
      return;
    }
    // In bounded memory for a batch of millions: a 64-bit hash and the
    // ordinal of each job's folder (16 bytes a job, not its text); only jobs
    // whose hashes collide are expanded again and compared by text.
    std::vector<std::pair<uint64_t, int64_t>> hashes;
    hashes.reserve(static_cast<size_t>(n));
    int duplicates = 0, escapes = 0;
    (void)m_.for_each_job([&](ManifestJob& job) {
      hashes.emplace_back(std::hash<std::string>{}(job.output_dir), job.ordinal);
      Status s = check_path_components(m_.outputs.root / job.output_dir);
      if (s.ok()) s = confined(job.output_dir);
      if (!s.ok() && escapes++ < kMaxSameKindProblems) p_.at(where, field, s.message());
      return Status::Ok();
    });
    std::sort(hashes.begin(), hashes.end());
    std::set<int64_t> suspects;
    for (size_t i = 1; i < hashes.size(); ++i) {
      if (hashes[i].first != hashes[i - 1].first) continue;
      suspects.insert(hashes[i - 1].second);
      suspects.insert(hashes[i].second);
    }
    hashes = {};
    if (!suspects.empty()) {
      std::map<std::string, int64_t> seen;
      (void)m_.for_each_job([&](ManifestJob& job) {
        if (suspects.count(job.ordinal) == 0) return Status::Ok();
        auto [it, inserted] = seen.emplace(job.output_dir, job.ordinal);
        if (!inserted && duplicates++ < kMaxSameKindProblems) {
          p_.at(where, field, "jobs " + std::to_string(it->second) + " and " + std::to_string(job.ordinal) +
                                  " would both write to '" + job.output_dir +
                                  "'; the layout must tell jobs apart (use {prompt}, {seed} and {repeat})");
        }
        return Status::Ok();
      });
    }
    if (duplicates > kMaxSameKindProblems) {
      p_.at(where, field, std::to_string(duplicates - kMaxSameKindProblems) + " more duplicate output directories");
    }
    if (escapes > kMaxSameKindProblems) {
      p_.at(where, field, std::to_string(escapes - kMaxSameKindProblems) + " more output directories are not valid");
    }
  }

  // check_confined for every job's folder, its filesystem part (a few stat()
  // and readlink() calls) once per parent folder: a folder that does not
  // exist yet resolves through the same existing ancestor as its siblings,
  // so under a parent already found confined it is confined too.
  Status confined(const std::string& relative) {
    const fs::path full = m_.outputs.root / relative;
    fs::path parent = full.parent_path();
    std::error_code ec;
    const bool exists = fs::exists(fs::symlink_status(full, ec));
    if (!exists && parent == confined_parent_) {
      bool plain = true;
      for (const auto& part : fs::path(relative)) plain = plain && part != ".." && part != ".";
      if (plain && !fs::path(relative).is_absolute()) return Status::Ok();
    }
    Status s = check_confined(m_.outputs.root, relative);
    if (s.ok() && !exists) confined_parent_ = std::move(parent);
    return s;
  }

  Manifest& m_;
  Problems& p_;
  fs::path base_;
  YAML::Node layout_node_{YAML::NodeType::Undefined};
  YAML::Node outputs_node_{YAML::NodeType::Undefined};
  int64_t max_jobs_;
  int64_t seed_budget_;
  fs::path confined_parent_;  // the parent folder confined() last found confined
};

}  // namespace

Status check_path_components(const fs::path& path) {
  // "{batch_id}" becomes at most 19 digits once the batch is queued.
  std::string p = path.string();
  for (size_t at = p.find("{batch_id}"); at != std::string::npos; at = p.find("{batch_id}", at + 19)) {
    p.replace(at, 10, "9223372036854775807");
  }
  if (p.find('\0') != std::string::npos) {
    return Status::InvalidArgument("path '" + std::string(p.c_str()) + "...' holds a NUL byte");
  }
  if (p.size() > kMaxPathBytes) {
    return Status::InvalidArgument("path '" + p.substr(0, 60) + "...' is " + std::to_string(p.size()) +
                                   " bytes long, more than the " + std::to_string(kMaxPathBytes) + " a path may have");
  }
  for (const auto& part : fs::path(p)) {
    if (part.native().size() > kMaxPathComponentBytes) {
      return Status::InvalidArgument("path component '" + part.native().substr(0, 40) + "...' of '" +
                                     path.string().substr(0, 60) + "' is " + std::to_string(part.native().size()) +
                                     " bytes long, more than the " + std::to_string(kMaxPathComponentBytes) +
                                     " a file name may have");
    }
  }
  return Status::Ok();
}

Status check_confined(const fs::path& root, std::string_view relative) {
  fs::path rel(relative);
  std::string shown = "output directory '" + std::string(relative) + "'";
  if (relative.empty()) return Status::InvalidArgument(shown + " is empty");
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory()) {
    return Status::InvalidArgument(shown + " is absolute; it must be relative to the output root " + root.string());
  }
  for (const auto& part : rel) {
    if (part == ".." || part == ".") {
      return Status::InvalidArgument(shown + " has a '" + part.string() + "' component; it must stay inside " +
                                     root.string());
    }
  }
  std::error_code ec;
  fs::path real_root = fs::weakly_canonical(root, ec);
  if (ec) return Status::InvalidArgument("output root " + root.string() + " cannot be resolved: " + ec.message());
  fs::path real = fs::weakly_canonical(root / rel, ec);
  if (ec) return Status::InvalidArgument(shown + " cannot be resolved: " + ec.message());
  auto [r, t] = std::mismatch(real_root.begin(), real_root.end(), real.begin(), real.end());
  if (r != real_root.end()) {
    return Status::InvalidArgument(shown + " leaves the output root " + real_root.string() +
                                   " through a symbolic link: it resolves to " + real.string());
  }
  return Status::Ok();
}

int64_t Manifest::job_count() const {
  int64_t n = 0;
  for (const auto& p : prompts) {
    int64_t seeds = static_cast<int64_t>(p.seeds ? p.seeds->size() : defaults.seeds.size());
    n += seeds * defaults.repeats;
  }
  return n;
}

Status Manifest::for_each_job(const std::function<Status(ManifestJob&)>& visit) const {
  std::vector<LayoutPart> parts;
  std::string err = parse_layout(outputs.layout, parts);
  HIPQ_CHECK(err.empty() && "for_each_job on a manifest with an invalid layout");
  double guidance = canonical_guidance(defaults.guidance);
  const double guidance_rescale = canonical_guidance(defaults.guidance_rescale);
  int64_t ordinal = 0;
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    const PromptSpec& p = prompts[pi];
    const std::vector<uint64_t>& seeds = p.seeds ? *p.seeds : defaults.seeds;
    for (uint64_t seed : seeds) {
      for (int r = 0; r < defaults.repeats; ++r) {
        ManifestJob j;
        j.ordinal = ordinal++;
        j.prompt_index = pi;
        j.prompt = p.text;
        j.negative_prompt = p.negative.value_or(defaults.negative_prompt);
        j.tags = p.tags;
        j.seed = seed;
        j.repeat = r;
        j.settings.prompt = j.prompt;
        j.settings.negative_prompt = j.negative_prompt;
        j.settings.seed = seed;
        j.settings.width = defaults.width;
        j.settings.height = defaults.height;
        j.settings.steps = defaults.steps;
        j.settings.guidance = static_cast<float>(guidance);
        j.settings.sampler = defaults.sampler;
        j.settings.precision = defaults.precision;
        j.settings.rng = defaults.rng;
        j.settings.timestep_spacing = defaults.timestep_spacing;
        j.settings.guidance_rescale = static_cast<float>(guidance_rescale);
        j.settings.loras = defaults.loras;
        j.settings.init_image = defaults.init_image;
        j.settings.strength = static_cast<float>(defaults.strength);
        j.settings.refiner = defaults.refiner;
        j.settings.refiner_switch_at = static_cast<float>(defaults.refiner_switch_at);
        j.settings.aesthetic_score = static_cast<float>(defaults.aesthetic_score);
        j.settings.negative_aesthetic_score = static_cast<float>(defaults.negative_aesthetic_score);
        j.settings.vae_precision = p.vae_precision.value_or(defaults.vae_precision);
        j.output_dir = render_layout(parts, batch_name, j);
        HIPQ_RETURN_IF_ERROR(visit(j));
      }
    }
  }
  return Status::Ok();
}

std::vector<ManifestJob> Manifest::expand_jobs() const {
  std::vector<ManifestJob> jobs;
  jobs.reserve(static_cast<size_t>(job_count()));
  (void)for_each_job([&](ManifestJob& j) {
    jobs.push_back(std::move(j));
    return Status::Ok();
  });
  return jobs;
}

db::NewBatch Manifest::new_batch_header() const {
  db::NewBatch b;
  b.name = batch_name;
  b.priority = priority;
  b.max_attempts = max_attempts;
  b.output_root = outputs.root.string();
  b.save = outputs.save;
  b.golden_source = parity.golden;
  b.parity_gate = parity.gate;
  b.allow_unpinned = parity.allow_unpinned;
  b.manifest_path = path.string();
  b.manifest_text = text;
  return b;
}

Status Manifest::for_each_new_job(const db::NewJobVisitor& visit) const {
  double guidance = canonical_guidance(defaults.guidance);
  const double guidance_rescale = canonical_guidance(defaults.guidance_rescale);
  db::NewJob n;
  return for_each_job([&](ManifestJob& j) {
    n.ordinal = j.ordinal;
    n.model = model;
    n.prompt = std::move(j.prompt);
    n.negative_prompt = std::move(j.negative_prompt);
    n.tags = std::move(j.tags);
    n.seed = j.seed;
    n.repeat_index = j.repeat;
    n.width = defaults.width;
    n.height = defaults.height;
    n.steps = defaults.steps;
    n.guidance = guidance;
    n.sampler = defaults.sampler;
    n.precision = defaults.precision;
    n.rng = defaults.rng;
    n.timestep_spacing = defaults.timestep_spacing;
    n.guidance_rescale = guidance_rescale;
    n.loras = defaults.loras;
    n.init_image = defaults.init_image;
    n.strength = defaults.strength;
    n.refiner = defaults.refiner;
    n.refiner_switch_at = defaults.refiner_switch_at;
    n.aesthetic_score = defaults.aesthetic_score;
    n.negative_aesthetic_score = defaults.negative_aesthetic_score;
    n.vae_precision = std::move(j.settings.vae_precision);
    n.inputs = defaults.inputs;
    n.output_dir = std::move(j.output_dir);
    return visit(n);
  });
}

db::NewBatch Manifest::to_new_batch() const {
  db::NewBatch b = new_batch_header();
  b.jobs.reserve(static_cast<size_t>(job_count()));
  (void)for_each_new_job([&](const db::NewJob& n) {
    b.jobs.push_back(n);
    return Status::Ok();
  });
  return b;
}

db::NewBatch Manifest::to_streamed_batch() const {
  db::NewBatch b = new_batch_header();
  b.job_stream = [this](const db::NewJobVisitor& visit) { return for_each_new_job(visit); };
  return b;
}

Result<Manifest> parse_manifest_text(std::string_view text, const fs::path& path, int64_t max_jobs) {
  Manifest m;
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  m.path = (ec ? path : abs).lexically_normal();
  m.text = std::string(text);
  m.sha256 = sha256_hex(text);
  Problems p(m.path.string());
  if (static_cast<int64_t>(text.size()) > kMaxManifestBytes) {
    p.at(m.path.string(), 1, 1, "manifest",
         "the manifest is " + std::to_string(text.size()) + " bytes, more than the limit of " +
             std::to_string(kMaxManifestBytes) + " bytes; move long prompt lists into prompts_file");
    return p.status();
  }
  if (size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    TextPosition at = position_of(text, bad);
    p.at(m.path.string(), at.line, at.column, "manifest",
         describe_invalid_utf8(text, bad) + "; a manifest must be UTF-8 (convert it, e.g. `iconv -f latin1 -t utf-8`)");
    return p.status();
  }
  if (size_t comma = find_block_flow_entry(text); comma != std::string_view::npos) {
    TextPosition at = position_of(text, comma);
    p.at(m.path.string(), at.line, at.column, "yaml",
         "',' outside a [...] or {...} list; quote the value (\"a, b\") if the comma belongs to it");
    return p.status();
  }
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(m.text);
    if (docs.empty() || docs[0].IsNull()) {
      p.at(m.path.string(), 1, 1, "manifest", "the file is empty; see docs/manifest.md for the format");
      return p.status();
    }
    if (docs.size() > 1) {
      p.at(docs[1], "manifest", "holds more than one YAML document ('---'); one manifest per file");
    }
    Parser parser(m, p, std::clamp<int64_t>(max_jobs, 1, kMaxBatchJobsLimit));
    parser.parse(docs[0]);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp refuses deep nesting (500 levels in 0.7) instead of overflowing the stack.
    p.at(e.mark, "yaml", "nested more than " + std::to_string(e.depth()) +
                             " levels deep; no manifest field needs more than a few");
  } catch (const YAML::ParserException& e) {
    p.at(e.mark, "yaml", e.msg);
  } catch (const YAML::Exception& e) {
    p.at(e.mark, "yaml", e.msg);
  } catch (const std::exception& e) {
    p.at(m.path.string(), 0, 0, "manifest", std::string("internal error while reading: ") + e.what());
  }
  if (!p.empty()) return p.status();
  return m;
}

Result<Manifest> parse_manifest(const fs::path& path, int64_t max_jobs) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound("manifest " + path.string() + " does not exist");
  if (fs::is_directory(path, ec)) return Status::InvalidArgument("manifest " + path.string() + " is a directory");
  HIPQ_ASSIGN_OR_RETURN(std::string text, read_regular_file(path, kMaxManifestBytes));
  return parse_manifest_text(text, path, max_jobs);
}

}  // namespace hipq::coordinator
