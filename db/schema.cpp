#include "db/schema.h"

#include <charconv>
#include <string>

#include "db/database.h"
#include "db/statement.h"
#include "db/transaction.h"

namespace hipq::db {
namespace {

// Version 1: the tables of docs/schema.md. Dispatch here walks jobs by state.
constexpr char kSchemaV1[] = R"sql(
CREATE TABLE schema_meta (
  key TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL
);
CREATE TABLE manifests (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  path TEXT NOT NULL,
  text TEXT NOT NULL,
  created_at REAL NOT NULL
);
CREATE TABLE batches (
  id INTEGER PRIMARY KEY,
  manifest_id INTEGER NOT NULL REFERENCES manifests(id),
  name TEXT NOT NULL,
  priority INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL CHECK (state IN ('active', 'done', 'cancelled')),
  max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
  output_root TEXT NOT NULL,
  save TEXT NOT NULL DEFAULT '[]',
  golden_source TEXT NOT NULL DEFAULT '',
  parity_gate TEXT NOT NULL DEFAULT '{}',
  allow_unpinned INTEGER NOT NULL DEFAULT 0,
  job_count INTEGER NOT NULL,
  created_at REAL NOT NULL,
  finished_at REAL
);
CREATE INDEX batches_by_state ON batches(state, id);
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,
  batch_id INTEGER NOT NULL REFERENCES batches(id),
  ordinal INTEGER NOT NULL,
  model TEXT NOT NULL,
  prompt TEXT NOT NULL,
  negative_prompt TEXT NOT NULL DEFAULT '',
  tags TEXT NOT NULL DEFAULT '[]',
  seed INTEGER NOT NULL,
  repeat_index INTEGER NOT NULL DEFAULT 0,
  width INTEGER NOT NULL,
  height INTEGER NOT NULL,
  steps INTEGER NOT NULL,
  guidance REAL NOT NULL,
  sampler TEXT NOT NULL,
  precision TEXT NOT NULL,
  settings TEXT NOT NULL,
  golden_key TEXT,
  output_dir TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'leased', 'done', 'failed', 'dead', 'cancelled')),
  attempts INTEGER NOT NULL DEFAULT 0,
  lease_worker TEXT,
  lease_deadline REAL,
  verdict TEXT,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL,
  UNIQUE (batch_id, ordinal)
);
CREATE INDEX jobs_by_state ON jobs(state, id);
-- Leased jobs are few (one or two per worker): expiry and per-worker scans
-- walk this small partial index in id order.
CREATE INDEX jobs_leased ON jobs(id) WHERE state = 'leased';
CREATE INDEX jobs_by_model ON jobs(model, created_at);
CREATE TABLE attempts (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  worker_id TEXT NOT NULL,
  started_at REAL NOT NULL,
  finished_at REAL,
  state TEXT NOT NULL CHECK (state IN ('running', 'done', 'failed', 'expired', 'cancelled')),
  error TEXT,
  UNIQUE (job_id, attempt)
);
CREATE INDEX attempts_by_worker ON attempts(worker_id, started_at);
CREATE TABLE results (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL UNIQUE REFERENCES jobs(id),
  attempt_id INTEGER NOT NULL UNIQUE REFERENCES attempts(id),
  worker_id TEXT NOT NULL,
  verdict TEXT NOT NULL,
  cosine REAL,
  max_abs REAL,
  rel_l2 REAL,
  psnr REAL,
  golden_key TEXT,
  parity_reason TEXT,
  outputs TEXT NOT NULL DEFAULT '[]',
  peak_memory_bytes INTEGER,
  warm INTEGER NOT NULL DEFAULT 0,
  recorded_at REAL NOT NULL
);
CREATE INDEX results_by_time ON results(recorded_at);
CREATE INDEX results_by_verdict ON results(verdict, recorded_at);
CREATE INDEX results_by_worker ON results(worker_id, recorded_at);
CREATE TABLE phase_timings (
  attempt_id INTEGER NOT NULL REFERENCES attempts(id),
  phase TEXT NOT NULL,
  host_ms REAL NOT NULL,
  gpu_ms REAL,
  PRIMARY KEY (attempt_id, phase)
) WITHOUT ROWID;
CREATE INDEX phase_timings_by_phase ON phase_timings(phase, attempt_id);
CREATE TABLE step_timings (
  attempt_id INTEGER NOT NULL REFERENCES attempts(id),
  step INTEGER NOT NULL,
  host_ms REAL NOT NULL,
  gpu_ms REAL,
  PRIMARY KEY (attempt_id, step)
) WITHOUT ROWID;
CREATE TABLE workers (
  id TEXT PRIMARY KEY NOT NULL,
  host TEXT NOT NULL DEFAULT '',
  device_index INTEGER NOT NULL DEFAULT 0,
  device_name TEXT NOT NULL DEFAULT '',
  arch TEXT NOT NULL DEFAULT '',
  memory_bytes INTEGER NOT NULL DEFAULT 0,
  runtime_version TEXT NOT NULL DEFAULT '',
  driver_version TEXT NOT NULL DEFAULT '',
  build_sha TEXT NOT NULL DEFAULT '',
  backend TEXT NOT NULL DEFAULT '',
  first_seen REAL NOT NULL,
  last_seen REAL NOT NULL,
  state TEXT NOT NULL DEFAULT ''
);
CREATE TABLE goldens (
  key TEXT PRIMARY KEY NOT NULL,
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  provenance TEXT NOT NULL,
  pinned INTEGER NOT NULL,
  reference TEXT NOT NULL CHECK (reference IN ('diffusers', 'hipq')),
  created_at REAL,
  imported_at REAL NOT NULL
);
)sql";

// Version 2: the batch priority copied onto each job, so lease_next is a walk
// of a small partial index (queued jobs only) instead of a join and a sort.
constexpr char kSchemaV2[] = R"sql(
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET priority = (SELECT b.priority FROM batches b WHERE b.id = jobs.batch_id);
DROP INDEX jobs_by_state;
CREATE INDEX jobs_queued_fifo ON jobs(priority, id) WHERE state = 'queued';
CREATE INDEX jobs_queued_by_model ON jobs(priority, model, id) WHERE state = 'queued';
CREATE INDEX jobs_by_batch_state ON jobs(batch_id, state);
)sql";

// Version 3: the generation settings are stored once, as columns. The rng,
// until now only inside the settings JSON, gets its column; the JSON copy
// (settings) goes. A job whose JSON names no rng ran with the default.
constexpr char kSchemaV3[] = R"sql(
ALTER TABLE jobs ADD COLUMN rng TEXT NOT NULL DEFAULT 'torch-cpu';
UPDATE jobs SET rng = json_extract(settings, '$.rng')
  WHERE json_valid(settings) AND json_type(settings, '$.rng') = 'text';
ALTER TABLE jobs DROP COLUMN settings;
)sql";

// Version 4: a worker id is bound to the CURVE key that first registered it
// (Z85 public key; NULL when it registered without CURVE, or before this
// version: the next CURVE hello binds it). Nothing to back-fill.
constexpr char kSchemaV4[] = R"sql(
ALTER TABLE workers ADD COLUMN curve_key TEXT;
)sql";

// Version 5: the schedule settings of a job (protocol 4): its timestep
// spacing ("" = the model's scheduler config) and guidance_rescale (0 = off).
// Jobs written before ran with both at those defaults.
constexpr char kSchemaV5[] = R"sql(
ALTER TABLE jobs ADD COLUMN timestep_spacing TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN guidance_rescale REAL NOT NULL DEFAULT 0;
)sql";

// Version 6: LoRA, img2img and refiner settings of a job (protocol 5).
// loras: JSON [{"path","scale","sha256"}] in application order; lora_key: the
// set's identity for dispatch affinity (spec::lora_set_key, "" = none), with
// a partial index beside jobs_queued_by_model; the init image's path and
// sha256 as submitted; the refiner's model spec ("" = none), switch point and
// aesthetic scores. Jobs written before ran with none of them.
constexpr char kSchemaV6[] = R"sql(
ALTER TABLE jobs ADD COLUMN loras TEXT NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN lora_key TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN init_image TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN init_image_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN strength REAL NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN refiner TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN refiner_switch_at REAL NOT NULL DEFAULT 0.8;
ALTER TABLE jobs ADD COLUMN aesthetic_score REAL NOT NULL DEFAULT 6;
ALTER TABLE jobs ADD COLUMN negative_aesthetic_score REAL NOT NULL DEFAULT 2.5;
CREATE INDEX jobs_queued_by_adapters ON jobs(priority, model, lora_key, id) WHERE state = 'queued';
)sql";

// Version 7: indexes no query reads, each updated by every job, dropped: a
// result inserted one entry into each of results_by_time and
// results_by_worker, a lease one into attempts_by_worker (docs/schema.md,
// "What one job writes"). History is read by job id (hipq runs, report,
// stats), results by job and by verdict (results_by_verdict stays).
constexpr char kSchemaV7[] = R"sql(
DROP INDEX IF EXISTS results_by_time;
DROP INDEX IF EXISTS results_by_worker;
DROP INDEX IF EXISTS attempts_by_worker;
)sql";

// Version 8: how many jobs shared the UNet batch a result came from
// (protocol 7, JobResult.batch_size; 1 = it ran alone), so the run history
// shows which jobs ran together. Results written before ran alone.
constexpr char kSchemaV8[] = R"sql(
ALTER TABLE results ADD COLUMN batch_size INTEGER NOT NULL DEFAULT 1;
)sql";

// Version 9: the dtype a job's VAE decodes in (protocol 8): "" = the
// precision's rule (fp32 for an fp16 SDXL job), else fp32 | bf16. Jobs written
// before left it to the precision.
constexpr char kSchemaV9[] = R"sql(
ALTER TABLE jobs ADD COLUMN vae_precision TEXT NOT NULL DEFAULT '';
)sql";

struct Migration {
  int to_version;
  const char* what;
  const char* sql;
};

constexpr Migration kMigrations[] = {
    {1, "create tables", kSchemaV1},
    {2, "jobs.priority and dispatch indexes", kSchemaV2},
    {3, "settings stored once: jobs.rng, jobs.settings dropped", kSchemaV3},
    {4, "workers.curve_key", kSchemaV4},
    {5, "jobs.timestep_spacing and jobs.guidance_rescale", kSchemaV5},
    {6, "jobs: loras, lora_key, init_image, strength and refiner settings", kSchemaV6},
    {7, "drop indexes no query reads: results_by_time, results_by_worker, attempts_by_worker", kSchemaV7},
    {8, "results.batch_size", kSchemaV8},
    {9, "jobs.vae_precision", kSchemaV9},
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kLatestSchemaVersion,
              "one migration per schema version");

constexpr char kHasMetaTable[] =
    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_meta'";
constexpr char kSelectVersion[] = "SELECT value FROM schema_meta WHERE key = 'version'";
constexpr char kUpsertVersion[] =
    "INSERT INTO schema_meta (key, value) VALUES ('version', ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value";

Status check_known(Database& db, int version) {
  if (version > kLatestSchemaVersion) {
    return Status::FailedPrecondition("database " + db.describe() + " has schema version " +
                                      std::to_string(version) + ", newer than this hipq knows (" +
                                      std::to_string(kLatestSchemaVersion) + "); upgrade hipq");
  }
  return Status::Ok();
}

}  // namespace

Result<int> schema_version(Database& db) {
  Statement has(db, kHasMetaTable);
  HIPQ_ASSIGN_OR_RETURN(bool row, has.step());
  if (!row || has.column_int64(0) == 0) return 0;
  Statement s(db, kSelectVersion);
  HIPQ_ASSIGN_OR_RETURN(row, s.step());
  if (!row) return 0;
  std::string text = s.column_text(0);
  int version = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (ec != std::errc() || end != text.data() + text.size() || version < 0) {
    return Status::Corruption("database " + db.describe() + ": schema_meta version is '" + text +
                              "', not a number");
  }
  return version;
}

Status migrate_to(Database& db, int target) {
  if (target < 0 || target > kLatestSchemaVersion) {
    return Status::InvalidArgument("schema version " + std::to_string(target) + " is out of range 0.." +
                                   std::to_string(kLatestSchemaVersion));
  }
  HIPQ_ASSIGN_OR_RETURN(int current, schema_version(db));
  HIPQ_RETURN_IF_ERROR(check_known(db, current));
  if (target < current) {
    return Status::InvalidArgument("database " + db.describe() + " is at schema version " +
                                   std::to_string(current) + "; cannot migrate down to " + std::to_string(target));
  }
  for (const Migration& m : kMigrations) {
    if (m.to_version > target) break;
    HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_immediate(db));
    // Re-read under the write lock: another process may have migrated meanwhile.
    HIPQ_ASSIGN_OR_RETURN(int now_at, schema_version(db));
    HIPQ_RETURN_IF_ERROR(check_known(db, now_at));
    if (now_at >= m.to_version) continue;  // txn rolls back (nothing written)
    std::string step = "migration to schema version " + std::to_string(m.to_version) + " (" + m.what + ")";
    HIPQ_RETURN_IF_ERROR(db.execute(m.sql).WithContext(step));
    Statement v(db, kUpsertVersion);
    v.bind_text(0, std::to_string(m.to_version));
    HIPQ_RETURN_IF_ERROR(v.run().WithContext(step));
    HIPQ_RETURN_IF_ERROR(txn.commit().WithContext(step));
  }
  return Status::Ok();
}

Status migrate(Database& db) { return migrate_to(db, kLatestSchemaVersion); }

}  // namespace hipq::db
