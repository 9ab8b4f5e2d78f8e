#include "engine/weights_hash_cache.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "base/fs.h"

namespace hipq::engine {
namespace fs = std::filesystem;

namespace {

constexpr std::uintmax_t kMaxCacheBytes = 4 << 20;  // thousands of entries; a bigger file is not ours
constexpr size_t kMaxEntries = 4096;                 // beyond this, entries are dropped (first by path)

struct FileKey {
  std::string path;
  int64_t size = 0, mtime_ns = 0, ctime_ns = 0;
  uint64_t inode = 0, device = 0;
  nlohmann::json to_json() const {
    return {{"size", size}, {"mtime_ns", mtime_ns}, {"ctime_ns", ctime_ns}, {"inode", inode}, {"device", device}};
  }
  bool matches(const nlohmann::json& e) const {
    auto num = [&](const char* k, auto want) {
      auto it = e.find(k);
      return it != e.end() && it->is_number_integer() && it->get<decltype(want)>() == want;
    };
    return num("size", size) && num("mtime_ns", mtime_ns) && num("ctime_ns", ctime_ns) && num("inode", inode) &&
           num("device", device);
  }
};

Result<FileKey> key_of(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return Status::NotFound("cannot stat weight file '" + p.string() + "'");
  FileKey k;
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec);
  k.path = (ec ? p : abs).lexically_normal().string();
  k.size = static_cast<int64_t>(st.st_size);
  k.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  k.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  k.inode = static_cast<uint64_t>(st.st_ino);
  k.device = static_cast<uint64_t>(st.st_dev);
  return k;
}

bool is_hex_sha256(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The cache's entries object, or an empty one for anything unusable.
nlohmann::json load(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec) || fs::file_size(file, ec) > kMaxCacheBytes || ec) return nlohmann::json::object();
  auto bytes = read_file(file);
  if (!bytes.ok()) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("version", 0) != 1 || !j.contains("entries") || !j["entries"].is_object())
    return nlohmann::json::object();
  return j["entries"];
}

}  // namespace

std::optional<fs::path> default_weights_hash_cache() {
  constexpr const char* kName = "weights-sha256.json";
  if (const char* d = std::getenv("HIPQ_CACHE_DIR")) {
    if (*d == '\0') return std::nullopt;
    return fs::path(d) / kName;
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "hipq" / kName;
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "hipq" / kName;
  return std::nullopt;
}

Result<std::string> WeightsHashCache::sha256(const fs::path& path) {
  last_hit_ = false;
  HIPQ_ASSIGN_OR_RETURN(FileKey key, key_of(path));
  nlohmann::json entries = load(file_);
  if (auto it = entries.find(key.path); it != entries.end() && it->is_object() && key.matches(*it)) {
    const auto sha = it->find("sha256");
    if (sha != it->end() && sha->is_string() && is_hex_sha256(sha->get<std::string>())) {
      last_hit_ = true;
      return sha->get<std::string>();
    }
  }
  HIPQ_ASSIGN_OR_RETURN(std::string sha, sha256_file(path));
  // Stored only when the file did not change while it was read.
  auto after = key_of(path);
  if (!after.ok() || !after->matches(key.to_json())) return sha;
  nlohmann::json e = key.to_json();
  e["sha256"] = sha;
  entries[key.path] = e;
  while (entries.size() > kMaxEntries) entries.erase(entries.begin());
  nlohmann::json doc = {{"version", 1}, {"entries", entries}};
  (void)write_file_atomic(file_, doc.dump(1) + "\n");
  return sha;
}

}  // namespace hipq::engine
