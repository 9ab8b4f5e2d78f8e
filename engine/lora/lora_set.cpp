#include "engine/lora/lora_set.h"

#include <sys/stat.h>

#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "base/fs.h"
#include "engine/lora/lora_keys.h"
#include "engine/lora/lora_merge.h"

namespace hipq::engine::lora {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

std::string family_words(const std::string& f) {
  if (f == "sdxl") return "SDXL";
  if (f == "sd1") return "SD 1.x";
  if (f == "sd2") return "SD 2.x";
  return "SD 1.x/2.x";
}

// Whether a pair's delta fits the weight: same out, same in * kernel, and
// equal kernels where both are convs (a 1x1 conv and a linear layer are
// interchangeable, as SD 1.x's conv proj_in and SDXL's linear one).
bool delta_fits(const LoraPair& p, const std::vector<int64_t>& w) {
  if (w.size() != 2 && w.size() != 4) return false;
  if (p.out_features() != w[0]) return false;
  int64_t w_in = 1;
  for (size_t i = 1; i < w.size(); ++i) w_in *= w[i];
  if (p.in_features() != w_in) return false;
  const bool w_conv = w.size() == 4 && (w[2] != 1 || w[3] != 1);
  const bool d_conv = p.down.shape.size() == 4 && (p.down.shape[2] != 1 || p.down.shape[3] != 1);
  if (w_conv || d_conv) {
    return w.size() == 4 && p.down.shape.size() == 4 && p.down.shape[2] == w[2] && p.down.shape[3] == w[3];
  }
  return true;
}

std::string delta_shape(const LoraPair& p) {
  std::vector<int64_t> s = {p.out_features()};
  for (size_t i = 1; i < p.down.shape.size(); ++i) s.push_back(p.down.shape[i]);
  return shape_str(s);
}

}  // namespace

namespace {

// A file as it is now: rewriting it (even restoring its mtime) changes its ctime.
struct FileIdentity {
  std::string path;
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  auto operator<=>(const FileIdentity&) const = default;
};

std::optional<FileIdentity> identity_of(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  FileIdentity id;
  id.path = ec ? path.string() : abs.string();
  id.dev = static_cast<uint64_t>(st.st_dev);
  id.ino = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return id;
}

Result<LoraFileHashes> compute_hashes(const std::filesystem::path& path) {
  HIPQ_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  LoraFileHashes h;
  h.sha256 = sha256_hex(bytes);
  uint64_t header = 0;
  if (bytes.size() >= 8) std::memcpy(&header, bytes.data(), 8);  // little-endian hosts only (as the reader)
  const uint64_t start = bytes.size() >= 8 && header <= bytes.size() - 8 ? 8 + header : bytes.size();
  h.a1111_hash = sha256_hex(std::string_view(bytes).substr(start)).substr(0, 12);
  return h;
}

}  // namespace

Result<LoraFileHashes> hash_lora_file(const std::filesystem::path& path) {
  // Remembered for the process, per file identity: a worker switching back
  // to a set it has held hashes nothing again (a changed file is hashed anew).
  static std::mutex mu;
  static std::map<FileIdentity, LoraFileHashes> memo;
  const std::optional<FileIdentity> id = identity_of(path);
  if (id) {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo.find(*id); it != memo.end()) return it->second;
  }
  HIPQ_ASSIGN_OR_RETURN(LoraFileHashes h, compute_hashes(path));
  // Kept only when the file did not change while it was read.
  if (id && identity_of(path) == id) {
    std::lock_guard<std::mutex> lock(mu);
    if (memo.size() >= 4096) memo.clear();
    memo[*id] = h;
  }
  return h;
}

Result<LoraSet> open_lora_set(const ModelComponents& base, const std::string& family,
                              const std::vector<spec::LoraSpec>& specs) {
  LoraSet set;
  set.components = base;
  if (specs.empty()) return set;
  HIPQ_RETURN_IF_ERROR(spec::validate_loras(specs));
  const LoraKeyMap keys = LoraKeyMap::for_model(base, family);
  // component -> weight -> deltas, in the order of the specs.
  std::map<std::string, std::map<std::string, std::vector<LoraDelta>>> deltas;
  for (const spec::LoraSpec& s : specs) {
    HIPQ_ASSIGN_OR_RETURN(LoraFile file, read_lora_file(s.path));
    const std::string path = file.path.string();
    std::string evidence;
    const std::string made_for = lora_family_hint(file, &evidence);
    const bool mismatch = !made_for.empty() && (made_for == "sdxl") != (family == "sdxl");
    if (mismatch) {
      return Status::InvalidArgument(path + " is a LoRA for " + family_words(made_for) + " (key '" + evidence +
                                     "' says so) but the model is " + family_words(family) +
                                     ": use a LoRA trained for " + family_words(family));
    }
    std::vector<std::string> unmatched;
    std::map<std::string, std::string> seen;  // component/weight -> pair key
    std::vector<std::tuple<std::string, std::string, std::string>> landed;  // component, weight, what
    AppliedLora applied;
    applied.spec = s;
    applied.name = file.name;
    applied.format = file.format;
    for (const LoraPair& p : file.pairs) {
      const auto b = keys.resolve(p);
      if (!b) {
        unmatched.push_back(p.key);
        continue;
      }
      auto [pos, fresh] = seen.emplace(b->component + "/" + b->weight, p.key);
      if (!fresh) {
        return Status::InvalidArgument(path + ": LoRA layers '" + pos->second + "' and '" + p.key +
                                       "' both modify " + b->component + " '" + b->weight +
                                       "'; the file is inconsistent");
      }
      HIPQ_ASSIGN_OR_RETURN(TensorMeta meta, keys.source(b->component)->meta(b->weight));
      if (!delta_fits(p, meta.shape)) {
        return Status::InvalidArgument(path + ": LoRA layer '" + p.key + "' makes a delta of shape " + delta_shape(p) +
                                       " (rank " + std::to_string(p.rank) + ") but " + b->component + " '" +
                                       b->weight + "' is " + shape_str(meta.shape) +
                                       ": the LoRA was made for another model");
      }
      ++applied.pairs;
      const float coefficient = s.scale * (p.alpha / static_cast<float>(p.rank));
      if (coefficient == 0.0f) continue;  // scale 0 or alpha 0: the base weight, bit for bit
      deltas[b->component][b->weight].push_back({p.down, p.up, coefficient, path + ": " + p.key});
      uint32_t bits = 0;
      std::memcpy(&bits, &coefficient, sizeof bits);
      landed.emplace_back(b->component, b->weight, p.key + " x" + std::to_string(bits));
    }
    if (!unmatched.empty()) {
      std::string list;
      for (size_t i = 0; i < unmatched.size() && i < 5; ++i) list += (i ? ", '" : "'") + unmatched[i] + "'";
      const std::string hint = made_for.empty() ? std::string("is it a LoRA for another model?")
                                                : std::string("is it a LoRA for another ") + family_words(family) +
                                                      " architecture?";
      return Status::InvalidArgument(path + ": " + std::to_string(unmatched.size()) + " of " +
                                     std::to_string(file.pairs.size()) + " LoRA layers match no layer of " +
                                     base.spec + " (" + list + (unmatched.size() > 5 ? ", ..." : "") + "); " + hint);
    }
    HIPQ_ASSIGN_OR_RETURN(LoraFileHashes h, hash_lora_file(file.path));
    applied.sha256 = h.sha256;
    for (const auto& [component, weight, what] : landed)
      set.signatures[component][weight] += h.sha256 + " " + what + "\n";
    applied.a1111_hash = h.a1111_hash;
    set.loras.push_back(std::move(applied));
  }
  std::string label;
  for (const AppliedLora& a : set.loras) {
    std::ostringstream sc;
    sc << a.spec.scale;
    label += (label.empty() ? "LoRA " : ", ") + a.name + ":" + sc.str();
  }
  for (auto& [component, weights] : deltas) {
    set.merged_weights += static_cast<int>(weights.size());
    for (const auto& [name, d] : weights) set.targets[component].push_back(name);
    set.components.weights[component] =
        std::make_shared<LoraMergedSource>(keys.source(component), std::move(weights), label);
  }
  return set;
}

}  // namespace hipq::engine::lora
