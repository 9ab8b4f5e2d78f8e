// WeightsHashCache: sha256 of weight files remembered across processes, so a
// new `hipq generate` or worker does not re-read 13 GB of SDXL weights before
// its first step.
//
// An entry is keyed by the file's absolute path, size, mtime, ctime, inode and
// device: rewriting a file (even one that restores its mtime) changes its
// ctime, so a changed file is always re-hashed. The cache is one JSON file
// (format in docs/model-sources.md), read with a size cap and validated
// entry by entry; a missing, unreadable or malformed cache file is treated as
// empty (never an error) and replaced, atomically, on the next store. Several
// processes may share it: the last writer wins, and an entry lost that way is
// simply computed again.
// Thread safety: the object is not shared between threads; the file is safe
// to share between processes.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "base/result.h"

namespace hipq::engine {

// Where the cache lives: $HIPQ_CACHE_DIR/weights-sha256.json when that is
// set (set and empty: no cache), else $XDG_CACHE_HOME/hipq/..., else
// $HOME/.cache/hipq/...; nullopt when none applies.
std::optional<std::filesystem::path> default_weights_hash_cache();

class WeightsHashCache {
 public:
  explicit WeightsHashCache(std::filesystem::path cache_file) : file_(std::move(cache_file)) {}

  // The sha256 of `path`: from the cache when an entry matches the file as it
  // is now, else computed (reading the whole file) and stored. A failure to
  // store is ignored (the hash is still right); a failure to read `path` is
  // returned.
  Result<std::string> sha256(const std::filesystem::path& path);

  // Whether the last sha256() call was answered from the cache.
  bool last_was_hit() const { return last_hit_; }

 private:
  std::filesystem::path file_;
  bool last_hit_ = false;
};

}  // namespace hipq::engine
