// GoldenStore: the goldens table — which golden files exist, where, with
// what hash and provenance — and the queries `hipq golden` needs.
//
// The store knows rows and files, not tensors: callers (cli/golden_command.cpp)
// validate golden files with engine/golden.h and hand the facts over
// (GoldenFileFacts: the spec/golden_format.h header and the latent's shape);
// import_file copies the file into the store folder and records it. A row
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
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"
#include "db/database.h"
#include "spec/generation_settings.h"
#include "spec/input_digests.h"
#include "spec/golden_format.h"
#include "spec/input_digests.h"

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
  spec::InputDigests inputs;          // its LoRA and init image sha256 as submitted
  std::string output_root;     // the batch's absolute output root
  std::string output_dir;      // relative to output_root
  std::string outputs;         // results.outputs JSON text
  std::string verdict;
  std::string worker_id;
};

// What the store records of a validated golden file.
struct GoldenFileFacts {
  spec::GoldenHeader header;
  std::vector<int64_t> latent_shape;
  bool has_image = false;
  bool pinned = true;
};
// The row's provenance column: {"provenance", "model", "weights_sha256",
// "settings", "latent_shape", "has_image"} (docs/golden-format.md).
nlohmann::json golden_row_json(const GoldenFileFacts& golden);

class GoldenStore {
 public:
  explicit GoldenStore(Database& db) : db_(db) {}

  // Inserts the row. Same key and same sha256: OK, nothing changes (an import
  // run twice is idempotent). Same key, other sha256: AlreadyExists naming
  // both files, unless `replace`.
  Status put(const GoldenRecord& record, bool replace = false);
  Result<std::optional<GoldenRecord>> find(const std::string& key);
  // The golden whose key starts with `prefix`: NotFound when none does,
  // InvalidArgument when several do ("give more characters").
  Result<GoldenRecord> find_by_prefix(const std::string& prefix);
  // Keeps the validated golden file `src` in the store folder `dir` as
  // spec::golden_file_name(key) (copied atomically unless `src` is that file)
  // and records its row, imported_at = now. Returns true when the key was
  // already stored with the same file bytes (nothing written). AlreadyExists
  // naming both files when it is stored with other bytes, unless `replace`.
  Result<bool> import_file(const std::filesystem::path& dir, const std::filesystem::path& src,
                           const GoldenFileFacts& golden, bool replace, double now);
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
