// GoldenStore: the goldens table — which golden files exist, where, with
// what hash and provenance — and the queries `hipq golden` needs.
//
// The store knows rows, not file formats: callers (cli/golden_command.cpp)
// validate golden files with engine/golden.h and hand the facts over. A row
// is keyed by the golden key (docs/golden-format.md); `path` is where the file
// is kept (absolute), `sha256` the whole file's hash (for `hipq golden
// verify`), `provenance` the JSON from the file, `pinned` false for goldens
// imported with --allow-unpinned, `reference` "diffusers" | "hipq".
//
// Errors: AlreadyExists when importing a key that is present with a different
// file hash unless replace is set; InvalidArgument for a bad reference name;
// the Statement error mapping otherwise (db/statement.h).
// Thread safety: as the Database (one thread at a time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"
#include "db/database.h"
#include "spec/generation_settings.h"

namespace hipq::db {

struct GoldenRecord {
  std::string key;
  std::string path;
  std::string sha256;
  nlohmann::json provenance = nlohmann::json::object();
  bool pinned = true;
  std::string reference;            // "diffusers" | "hipq"
  std::optional<double> created_at;  // when the reference made it (epoch seconds)
  double imported_at = 0;
};

// A finished job whose outputs `hipq golden promote` may pin as goldens.
struct PromotableJob {
  int64_t job_id = 0;
  int64_t batch_id = 0;
  std::string model;
  spec::GenerationSettings settings;  // the job's settings columns
  std::string output_root;     // the batch's absolute output root
  std::string output_dir;      // relative to output_root
  std::string outputs;         // results.outputs JSON text
  std::string verdict;
  std::string worker_id;
};

class GoldenStore {
 public:
  explicit GoldenStore(Database& db) : db_(db) {}

  // Inserts the row. Same key and same sha256: OK, nothing changes (an import
  // run twice is idempotent). Same key, other sha256: AlreadyExists naming
  // both files, unless `replace`.
  Status put(const GoldenRecord& record, bool replace = false);
  Result<std::optional<GoldenRecord>> find(const std::string& key);
  // Every golden, ordered by key.
  Result<std::vector<GoldenRecord>> list();
  // Keys that start with `prefix` (for `hipq golden show` with a short key).
  Result<std::vector<std::string>> keys_with_prefix(const std::string& prefix);
  Result<bool> remove(const std::string& key);
  // Replaces the provenance JSON of a stored golden (`hipq golden floor` adds
  // its measured noise floor there). NotFound for an unknown key.
  Status update_provenance(const std::string& key, const nlohmann::json& provenance);

  // Jobs in state 'done' with a result: one job (batch_id = nullopt,
  // job_id given) or every job of a batch.
  Result<std::vector<PromotableJob>> promotable_jobs(std::optional<int64_t> job_id,
                                                     std::optional<int64_t> batch_id);

 private:
  Database& db_;
};

}  // namespace hipq::db
