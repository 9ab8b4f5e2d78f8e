// Schema: the tables of hipq's database and the migrations between versions.
//
// The version lives in schema_meta(key='version'). migrate() brings a
// database of any older version to kLatestSchemaVersion one step at a time,
// each step in its own BEGIN IMMEDIATE transaction (a failed step leaves the
// database at the previous version). An empty database starts at version 0.
// Tables and columns are documented in docs/schema.md; keep it in step.
//
// Versions:
//   1 — manifests, batches, jobs, attempts, results, phase_timings,
//       step_timings, workers, goldens; history indexes.
//   2 — jobs.priority (copied from the batch, so dispatch is one index walk)
//       and the dispatch index jobs(state, priority, model, id).
//   3 — the generation settings stored once: jobs.rng added (filled from the
//       settings JSON), the JSON copy jobs.settings dropped.
//   4 — workers.curve_key: the CURVE public key that first registered each
//       worker id (NULL without CURVE), so the id stays that key's across
//       coordinator restarts.
//   5 — jobs.timestep_spacing and jobs.guidance_rescale.
//   6 — jobs: loras (with each file's sha256), lora_key (dispatch by LoRA
//       set, index jobs_queued_by_adapters), init_image and its sha256,
//       strength, refiner, refiner_switch_at, the aesthetic scores.
//   7 — indexes no query reads dropped (results_by_time, results_by_worker,
//       attempts_by_worker): each cost every job a b-tree entry.
//   8 — results.batch_size: the jobs that shared the result's UNet batch
//       (protocol 7; 1 = it ran alone).
//   9 — jobs.vae_precision: the decode's dtype a job asks for ("" = the
//       precision's rule; protocol 8).
//
// Errors: FailedPrecondition when the database's version is newer than this
// build knows ("schema version 7 is newer than this hipq (2); upgrade hipq");
// Corruption when schema_meta holds a version that is not a number; any
// SQLite error of a step, named with the step.
// Thread safety: as the Database.
#pragma once

#include "base/result.h"
#include "base/status.h"

namespace hipq::db {

class Database;

inline constexpr int kLatestSchemaVersion = 9;

// The database's schema version (0 for an empty database).
Result<int> schema_version(Database& db);

// Migrates to kLatestSchemaVersion. A no-op at the latest version.
Status migrate(Database& db);

// Migrates up to `target` (<= kLatestSchemaVersion) only; for tests of each
// step. InvalidArgument when target is out of range or below the current
// version (there are no down-migrations).
Status migrate_to(Database& db, int target);

}  // namespace hipq::db
