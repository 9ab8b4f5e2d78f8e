#include "db/golden_store.h"

#include <ctime>

#include "base/fs.h"
#include "db/job_rows.h"
#include "db/statement.h"
#include "db/transaction.h"

namespace hipq::db {
namespace {

constexpr char kSelectColumns[] =
    "SELECT key, path, sha256, provenance, pinned, reference, created_at, imported_at FROM goldens";

Result<GoldenRecord> read_row(Statement& s) {
  GoldenRecord r;
  r.key = s.column_text(0);
  r.path = s.column_text(1);
  r.sha256 = s.column_text(2);
  try {
    r.provenance = nlohmann::json::parse(s.column_text(3));
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption("goldens row " + r.key + ": provenance is not JSON: " + e.what());
  }
  r.pinned = s.column_bool(4);
  r.reference = s.column_text(5);
  r.created_at = s.column_optional_double(6);
  r.imported_at = s.column_double(7);
  return r;
}

// "2026-01-01T00:00:00Z" (the provenance's created_at) as epoch seconds.
std::optional<double> parse_iso_utc(const std::string& s) {
  std::tm tm{};
  if (sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
             &tm.tm_sec) != 6)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm));
}

}  // namespace

nlohmann::json golden_row_json(const GoldenFileFacts& g) {
  nlohmann::json j;
  j["provenance"] = g.header.provenance.to_json();
  j["model"] = g.header.model;
  j["weights_sha256"] = g.header.weights_sha256;
  j["settings"] = g.header.settings.to_json();
  j["latent_shape"] = g.latent_shape;
  j["has_image"] = g.has_image;
  return j;
}

Result<GoldenRecord> GoldenStore::find_by_prefix(const std::string& prefix) {
  HIPQ_ASSIGN_OR_RETURN(auto keys, keys_with_prefix(prefix));
  if (keys.empty()) return Status::NotFound("no golden with key " + prefix);
  if (keys.size() > 1)
    return Status::InvalidArgument("key prefix " + prefix + " matches " + std::to_string(keys.size()) +
                                   " goldens; give more characters");
  HIPQ_ASSIGN_OR_RETURN(auto r, find(keys.front()));
  if (!r) return Status::NotFound("no golden with key " + keys.front());
  return *r;
}

Result<bool> GoldenStore::import_file(const std::filesystem::path& dir, const std::filesystem::path& src,
                                      const GoldenFileFacts& g, bool replace, double now) {
  const std::string& key = g.header.key;
  HIPQ_ASSIGN_OR_RETURN(std::string sha, sha256_file(src));
  HIPQ_ASSIGN_OR_RETURN(auto existing, find(key));
  if (existing && existing->sha256 == sha) return true;
  if (existing && !replace)
    return Status::AlreadyExists("golden " + key + " is already stored (" + existing->path + ", sha256 " +
                                 existing->sha256 + "); " + src.string() + " differs. Use --replace to overwrite");
  const std::filesystem::path dest = dir / spec::golden_file_name(key);
  std::error_code ec;
  if (!std::filesystem::equivalent(src, dest, ec)) {
    HIPQ_ASSIGN_OR_RETURN(std::string bytes, read_file(src));
    HIPQ_RETURN_IF_ERROR(write_file_atomic(dest, bytes));
  }
  GoldenRecord r;
  r.key = key;
  r.path = dest.string();
  r.sha256 = sha;
  r.provenance = golden_row_json(g);
  r.pinned = g.pinned;
  r.reference = g.header.provenance.reference;
  r.created_at = parse_iso_utc(g.header.provenance.created_at);
  r.imported_at = now;
  HIPQ_RETURN_IF_ERROR(put(r, replace));
  return false;
}

Status GoldenStore::put(const GoldenRecord& r, bool replace) {
  if (r.reference != "diffusers" && r.reference != "hipq")
    return Status::InvalidArgument("golden " + r.key + ": reference must be \"diffusers\" or \"hipq\", is \"" +
                                   r.reference + "\"");
  HIPQ_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin_immediate(db_));
  static constexpr char kFind[] = "SELECT sha256, path FROM goldens WHERE key = ?";
  Statement find = db_.prepare(kFind);
  find.bind_text(0, r.key);
  HIPQ_ASSIGN_OR_RETURN(bool exists, find.step());
  if (exists) {
    std::string sha = find.column_text(0);
    std::string path = find.column_text(1);
    if (sha == r.sha256 && !replace) return tx.commit();
    if (!replace)
      return Status::AlreadyExists("golden " + r.key + " is already stored from " + path +
                                   " with another file hash (" + sha + "); " + r.path + " hashes to " + r.sha256 +
                                   ". Remove the old one first, or import with --replace");
  }
  static constexpr char kUpsert[] =
      "INSERT INTO goldens (key, path, sha256, provenance, pinned, reference, created_at, imported_at) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
      "ON CONFLICT(key) DO UPDATE SET path = excluded.path, sha256 = excluded.sha256, "
      "provenance = excluded.provenance, pinned = excluded.pinned, reference = excluded.reference, "
      "created_at = excluded.created_at, imported_at = excluded.imported_at";
  Statement s = db_.prepare(kUpsert);
  s.bind_text(0, r.key);
  s.bind_text(1, r.path);
  s.bind_text(2, r.sha256);
  s.bind_text(3, r.provenance.dump());
  s.bind_bool(4, r.pinned);
  s.bind_text(5, r.reference);
  s.bind_optional_double(6, r.created_at);
  s.bind_double(7, r.imported_at);
  HIPQ_RETURN_IF_ERROR(s.run());
  return tx.commit();
}

Result<std::optional<GoldenRecord>> GoldenStore::find(const std::string& key) {
  Statement s = db_.prepare(std::string(kSelectColumns) + " WHERE key = ?");
  s.bind_text(0, key);
  HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return std::optional<GoldenRecord>();
  HIPQ_ASSIGN_OR_RETURN(GoldenRecord r, read_row(s));
  return std::optional<GoldenRecord>(std::move(r));
}

Result<std::vector<GoldenRecord>> GoldenStore::list() {
  Statement s = db_.prepare(std::string(kSelectColumns) + " ORDER BY key");
  std::vector<GoldenRecord> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    HIPQ_ASSIGN_OR_RETURN(GoldenRecord r, read_row(s));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<std::string>> GoldenStore::keys_with_prefix(const std::string& prefix) {
  // substr rather than LIKE: keys are hex, but a user's prefix may hold '%' or '_'.
  static constexpr char kPrefix[] = "SELECT key FROM goldens WHERE substr(key, 1, ?) = ? ORDER BY key";
  Statement s = db_.prepare(kPrefix);
  s.bind_int64(0, static_cast<int64_t>(prefix.size()));
  s.bind_text(1, prefix);
  std::vector<std::string> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back(s.column_text(0));
  }
  return out;
}

Result<bool> GoldenStore::remove(const std::string& key) {
  static constexpr char kDelete[] = "DELETE FROM goldens WHERE key = ?";
  Statement s = db_.prepare(kDelete);
  s.bind_text(0, key);
  HIPQ_RETURN_IF_ERROR(s.run());
  return db_.changes() > 0;
}

Status GoldenStore::update_provenance(const std::string& key, const nlohmann::json& provenance) {
  static constexpr char kUpdate[] = "UPDATE goldens SET provenance = ? WHERE key = ?";
  HIPQ_ASSIGN_OR_RETURN(Transaction tx, Transaction::begin_immediate(db_));
  Statement s = db_.prepare(kUpdate);
  s.bind_text(0, provenance.dump());
  s.bind_text(1, key);
  HIPQ_RETURN_IF_ERROR(s.run());
  if (db_.changes() == 0) return Status::NotFound("no golden " + key + " in " + db_.describe());
  return tx.commit();
}

Result<std::vector<PromotableJob>> GoldenStore::promotable_jobs(std::optional<int64_t> job_id,
                                                                std::optional<int64_t> batch_id) {
  if (!job_id && !batch_id) return Status::InvalidArgument("promotable_jobs: name a job or a batch");
  static constexpr char kSelect[] =
      "SELECT j.id, j.batch_id, j.model, b.output_root, j.output_dir, r.outputs, r.verdict, r.worker_id, "
      "j.prompt, j.negative_prompt, j.seed, j.width, j.height, j.steps, j.guidance, j.sampler, j.precision, j.rng, "
      "j.timestep_spacing, j.guidance_rescale, j.loras, j.init_image, j.init_image_sha256, j.strength, j.refiner, "
      "j.refiner_switch_at, j.aesthetic_score, j.negative_aesthetic_score, j.vae_precision FROM jobs j JOIN batches b ON b.id = j.batch_id JOIN results r ON r.job_id = j.id "
      "WHERE j.state = 'done' AND (? IS NULL OR j.id = ?) AND (? IS NULL OR j.batch_id = ?) ORDER BY j.id";
  Statement s = db_.prepare(kSelect);
  s.bind_optional_int64(0, job_id);
  s.bind_optional_int64(1, job_id);
  s.bind_optional_int64(2, batch_id);
  s.bind_optional_int64(3, batch_id);
  std::vector<PromotableJob> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    PromotableJob p;
    p.job_id = s.column_int64(0);
    p.batch_id = s.column_int64(1);
    p.model = s.column_text(2);
    p.output_root = s.column_text(3);
    p.output_dir = s.column_text(4);
    p.outputs = s.column_text(5);
    p.verdict = s.column_text(6);
    p.worker_id = s.column_text(7);
    p.settings.prompt = s.column_text(8);
    p.settings.negative_prompt = s.column_text(9);
    p.settings.seed = static_cast<uint64_t>(s.column_int64(10));
    p.settings.width = s.column_int(11);
    p.settings.height = s.column_int(12);
    p.settings.steps = s.column_int(13);
    p.settings.guidance = static_cast<float>(s.column_double(14));
    p.settings.sampler = s.column_text(15);
    p.settings.precision = s.column_text(16);
    p.settings.rng = s.column_text(17);
    p.settings.timestep_spacing = s.column_text(18);
    p.settings.guidance_rescale = static_cast<float>(s.column_double(19));
    HIPQ_ASSIGN_OR_RETURN(auto loras, loras_from_json(s.column_text(20), "jobs.loras of job " + std::to_string(p.job_id)));
    p.settings.loras = std::move(loras.first);
    p.inputs.loras = std::move(loras.second);
    p.settings.init_image = s.column_text(21);
    p.inputs.init_image = s.column_text(22);
    p.settings.strength = static_cast<float>(s.column_double(23));
    p.settings.refiner = s.column_text(24);
    p.settings.refiner_switch_at = static_cast<float>(s.column_double(25));
    p.settings.aesthetic_score = static_cast<float>(s.column_double(26));
    p.settings.negative_aesthetic_score = static_cast<float>(s.column_double(27));
    p.settings.vae_precision = s.column_text(28);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace hipq::db
