#include "db/schema.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "db/database.h"
#include "db/job_store.h"
#include "db/run_queries.h"
#include "db/statement.h"
#include "tests/db/test_util.h"

namespace hipq::db {
namespace {

std::unique_ptr<Database> memory_db() {
  auto db = Database::open_in_memory();
  HIPQ_CHECK(db.ok());
  return std::move(*db);
}

std::set<std::string> names_of(Database& db, const char* type) {
  Statement s(db, "SELECT name FROM sqlite_master WHERE type = ? AND name NOT LIKE 'sqlite_%' ORDER BY name");
  s.bind_text(0, type);
  std::set<std::string> out;
  while (*s.step()) out.insert(s.column_text(0));
  return out;
}

std::string query_plan(Database& db, const std::string& sql) {
  Statement s(db, "EXPLAIN QUERY PLAN " + sql);
  std::string plan;
  while (true) {
    auto row = s.step();
    if (!row.ok() || !*row) break;
    plan += s.column_text(3) + "\n";
  }
  return plan;
}

TEST(SchemaTest, EmptyDatabaseIsVersionZero) {
  auto db = memory_db();
  auto v = schema_version(*db);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 0);
}

TEST(SchemaTest, MigrateCreatesAllTablesAtLatestVersion) {
  auto db = memory_db();
  ASSERT_TRUE(migrate(*db).ok());
  EXPECT_EQ(*schema_version(*db), kLatestSchemaVersion);
  EXPECT_EQ(names_of(*db, "table"),
            (std::set<std::string>{"attempts", "batches", "goldens", "jobs", "manifests", "phase_timings",
                                   "results", "schema_meta", "step_timings", "workers"}));
}

TEST(SchemaTest, MigrateTwiceIsANoOp) {
  auto db = memory_db();
  ASSERT_TRUE(migrate(*db).ok());
  ASSERT_TRUE(migrate(*db).ok());
  EXPECT_EQ(*schema_version(*db), kLatestSchemaVersion);
}

TEST(SchemaTest, StepOneCreatesVersionOneTables) {
  auto db = memory_db();
  ASSERT_TRUE(migrate_to(*db, 1).ok());
  EXPECT_EQ(*schema_version(*db), 1);
  auto indexes = names_of(*db, "index");
  EXPECT_TRUE(indexes.count("jobs_by_state"));
  EXPECT_FALSE(indexes.count("jobs_queued_fifo"));
  Statement s(*db, "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name = 'priority'");
  ASSERT_TRUE(*s.step());
  EXPECT_EQ(s.column_int(0), 0);
}

// A database written by a version-1 hipq migrates to version 2 with every
// row intact and the batch priority copied onto its jobs.
TEST(SchemaTest, VersionOneDataSurvivesMigrationToTwo) {
  testing::TempDir dir;
  auto path = dir.path() / "v1.db";
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(migrate_to(**db, 1).ok());
    ASSERT_TRUE((*db)->execute(R"sql(
      INSERT INTO manifests (id, sha256, path, text, created_at) VALUES (1, 'abc', '/m.yaml', 'model: x', 10);
      INSERT INTO batches (id, manifest_id, name, priority, state, max_attempts, output_root, job_count, created_at)
        VALUES (1, 1, 'low', 1, 'active', 3, '/out', 2, 10), (2, 1, 'high', 7, 'active', 3, '/out', 1, 11);
      INSERT INTO jobs (id, batch_id, ordinal, model, prompt, seed, width, height, steps, guidance, sampler,
                        precision, settings, output_dir, state, created_at, updated_at)
        VALUES (1, 1, 0, 'm', 'a cat', 1, 64, 64, 4, 5.0, 'euler', 'fp32', '{}', 'o/0', 'queued', 10, 10),
               (2, 1, 1, 'm', 'a dog', 2, 64, 64, 4, 5.0, 'euler', 'fp32', '{}', 'o/1', 'done', 10, 12),
               (3, 2, 0, 'm', 'a cow', 3, 64, 64, 4, 5.0, 'euler', 'fp32', '{}', 'o/2', 'queued', 11, 11);
      INSERT INTO attempts (id, job_id, attempt, worker_id, started_at, finished_at, state)
        VALUES (1, 2, 1, 'w1', 11, 12, 'done');
      INSERT INTO results (job_id, attempt_id, worker_id, verdict, cosine, recorded_at)
        VALUES (2, 1, 'w1', 'PASS', 0.9999, 12);
    )sql").ok());
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_EQ(*schema_version(**db), 1);
  ASSERT_TRUE(migrate(**db).ok());
  EXPECT_EQ(*schema_version(**db), kLatestSchemaVersion);

  Statement s(**db, "SELECT id, prompt, state, priority FROM jobs ORDER BY id");
  std::vector<std::tuple<int64_t, std::string, std::string, int>> rows;
  while (*s.step()) rows.emplace_back(s.column_int64(0), s.column_text(1), s.column_text(2), s.column_int(3));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], std::make_tuple(int64_t{1}, std::string("a cat"), std::string("queued"), 1));
  EXPECT_EQ(rows[1], std::make_tuple(int64_t{2}, std::string("a dog"), std::string("done"), 1));
  EXPECT_EQ(rows[2], std::make_tuple(int64_t{3}, std::string("a cow"), std::string("queued"), 7));
  Statement r(**db, "SELECT verdict, cosine FROM results WHERE job_id = 2");
  ASSERT_TRUE(*r.step());
  EXPECT_EQ(r.column_text(0), "PASS");
  EXPECT_DOUBLE_EQ(r.column_double(1), 0.9999);

  // And the migrated file works with the job store: the high-priority job first.
  JobStore store(**db);
  auto leased = store.lease_next("w2", {}, 20, 30);
  ASSERT_TRUE(leased.ok()) << leased.status().ToString();
  ASSERT_TRUE(leased->has_value());
  EXPECT_EQ((*leased)->job.id, 3);
  EXPECT_EQ((*leased)->job.priority, 7);
}

// A database written by a version-2 hipq (settings both as columns and as the
// jobs.settings JSON) migrates to version 3: the rng moves from the JSON into
// its column, the JSON copy goes, and the jobs read back with their settings.
TEST(SchemaTest, VersionTwoSettingsAreStoredOnceAfterMigrationToThree) {
  testing::TempDir dir;
  auto path = dir.path() / "v2.db";
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(migrate_to(**db, 2).ok());
    // The rows exactly as version 2's job store wrote them.
    ASSERT_TRUE((*db)->execute(R"sql(
      INSERT INTO manifests (id, sha256, path, text, created_at) VALUES (1, 'abc', '/m.yaml', 'model: x', 10);
      INSERT INTO batches (id, manifest_id, name, priority, state, max_attempts, output_root, job_count, created_at)
        VALUES (1, 1, 'sweep', 2, 'active', 3, '/out', 3, 10);
      INSERT INTO jobs (id, batch_id, ordinal, model, prompt, negative_prompt, seed, width, height, steps, guidance,
                        sampler, precision, settings, output_dir, priority, state, created_at, updated_at)
        VALUES (1, 1, 0, 'm', 'a cat', 'blurry', -1, 512, 768, 20, 7.1, 'dpmpp_2m_karras', 'bf16',
                '{"prompt":"a cat","negative_prompt":"blurry","seed":18446744073709551615,"width":512,"height":768,'
                || '"steps":20,"guidance":7.1,"sampler":"dpmpp_2m_karras","precision":"bf16","rng":"torch-cuda"}',
                'o/0', 2, 'queued', 10, 10),
               (2, 1, 1, 'm', 'a dog', '', 2, 64, 64, 4, 5.0, 'euler', 'fp32', '{"prompt":"a dog","seed":2}',
                'o/1', 2, 'queued', 10, 10),
               (3, 1, 2, 'm', 'a cow', '', 3, 64, 64, 4, 5.0, 'ddim', 'fp16', 'not json', 'o/2', 2, 'queued', 10, 10);
    )sql").ok());
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_EQ(*schema_version(**db), 2);
  ASSERT_TRUE(migrate(**db).ok());
  EXPECT_EQ(*schema_version(**db), kLatestSchemaVersion);
  Statement gone(**db, "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name = 'settings'");
  ASSERT_TRUE(*gone.step());
  EXPECT_EQ(gone.column_int(0), 0) << "the JSON copy of the settings is dropped";

  JobStore store(**db);
  auto jobs = store.list_jobs(1);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 3u);
  spec::GenerationSettings first = (*jobs)[0].generation_settings();
  EXPECT_EQ(first.prompt, "a cat");
  EXPECT_EQ(first.negative_prompt, "blurry");
  EXPECT_EQ(first.seed, 18446744073709551615ull);
  EXPECT_EQ(first.width, 512);
  EXPECT_EQ(first.height, 768);
  EXPECT_EQ(first.steps, 20);
  EXPECT_FLOAT_EQ(first.guidance, 7.1f);
  EXPECT_EQ(first.sampler, "dpmpp_2m_karras");
  EXPECT_EQ(first.precision, "bf16");
  EXPECT_EQ(first.rng, "torch-cuda") << "the rng lived only in the JSON";
  EXPECT_TRUE(first.validate().ok());
  EXPECT_EQ((*jobs)[1].generation_settings().rng, "torch-cpu") << "no rng in the JSON: the default";
  EXPECT_EQ((*jobs)[2].generation_settings().rng, "torch-cpu") << "unreadable JSON: the default";
  EXPECT_EQ((*jobs)[2].generation_settings().sampler, "ddim");

  // And a new batch goes in and reads back with its rng.
  NewBatch b = testing::make_batch(1);
  b.jobs[0].rng = "torch-cuda";
  auto id = store.insert_batch(b, 20);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto added = store.list_jobs(*id);
  ASSERT_TRUE(added.ok());
  ASSERT_EQ(added->size(), 1u);
  EXPECT_EQ((*added)[0].generation_settings().rng, "torch-cuda");
}

// A database written by a version-3 hipq (workers without a key column)
// migrates to version 4: its workers are bound to no key, the first CURVE
// hello binds one, and from then on another key is refused under that id.
TEST(SchemaTest, VersionThreeWorkersAreUnboundAfterMigrationToFourAndTheFirstKeyBindsThem) {
  testing::TempDir dir;
  auto path = dir.path() / "v3.db";
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(migrate_to(**db, 3).ok());
    // The row exactly as version 3's upsert_worker wrote it.
    ASSERT_TRUE((*db)->execute(R"sql(
      INSERT INTO workers (id, host, device_index, device_name, arch, memory_bytes, runtime_version, driver_version,
                           build_sha, backend, first_seen, last_seen, state)
        VALUES ('box/hip0', 'box', 0, 'Radeon', 'gfx1100', 25769803776, '6.3', '6.3', 'abc123', 'hip', 10, 20, 'idle');
    )sql").ok());
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_EQ(*schema_version(**db), 3);
  ASSERT_TRUE(migrate(**db).ok());
  EXPECT_EQ(*schema_version(**db), kLatestSchemaVersion);

  JobStore store(**db);
  auto ws = store.list_workers();
  ASSERT_TRUE(ws.ok()) << ws.status().ToString();
  ASSERT_EQ(ws->size(), 1u);
  EXPECT_EQ((*ws)[0].device_name, "Radeon");
  EXPECT_EQ((*ws)[0].memory_bytes, int64_t{24} << 30);
  EXPECT_DOUBLE_EQ((*ws)[0].first_seen, 10);
  EXPECT_FALSE((*ws)[0].curve_key.has_value()) << "registered before keys were kept";
  auto unbound = store.worker_curve_key("box/hip0");
  ASSERT_TRUE(unbound.ok());
  EXPECT_FALSE(unbound->has_value());

  WorkerRecord w = (*ws)[0];
  w.curve_key = std::string(40, 'A');
  ASSERT_TRUE(store.upsert_worker(w, 30).ok());
  EXPECT_EQ(store.worker_curve_key("box/hip0")->value_or(""), std::string(40, 'A'));
  w.curve_key = std::string(40, 'B');
  w.state = "busy";
  EXPECT_EQ(store.upsert_worker(w, 31).code(), StatusCode::kPermissionDenied);
  auto after = store.list_workers();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)[0].state, "idle") << "a refused key changes nothing";
  EXPECT_EQ((*after)[0].curve_key.value_or(""), std::string(40, 'A'));
  EXPECT_DOUBLE_EQ((*after)[0].first_seen, 10);
}

// A database written by a version-4 hipq (no schedule columns) migrates to
// version 5: its jobs read back with the model's spacing and no rescale (what
// they ran with), and a new job keeps both settings.
TEST(SchemaTest, VersionFourJobsKeepTheModelsScheduleAfterMigrationToFive) {
  testing::TempDir dir;
  auto path = dir.path() / "v4.db";
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(migrate_to(**db, 4).ok());
    ASSERT_TRUE((*db)->execute(R"sql(
      INSERT INTO manifests (id, sha256, path, text, created_at) VALUES (1, 'abc', '/m.yaml', 'model: x', 10);
      INSERT INTO batches (id, manifest_id, name, priority, state, max_attempts, output_root, job_count, created_at)
        VALUES (1, 1, 'sweep', 0, 'active', 3, '/out', 1, 10);
      INSERT INTO jobs (id, batch_id, ordinal, model, prompt, negative_prompt, seed, width, height, steps, guidance,
                        sampler, precision, rng, output_dir, priority, state, created_at, updated_at)
        VALUES (1, 1, 0, 'm', 'a cat', '', 7, 64, 64, 4, 5.0, 'euler', 'fp32', 'torch-cpu', 'o/0', 0, 'queued', 10, 10);
    )sql").ok());
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_EQ(*schema_version(**db), 4);
  ASSERT_TRUE(migrate(**db).ok());
  EXPECT_EQ(*schema_version(**db), kLatestSchemaVersion);
  JobStore store(**db);
  auto jobs = store.list_jobs(1);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 1u);
  const spec::GenerationSettings old = (*jobs)[0].generation_settings();
  EXPECT_EQ(old.timestep_spacing, "");
  EXPECT_EQ(old.guidance_rescale, 0.0f);
  EXPECT_EQ(old.prompt, "a cat");

  NewBatch b = testing::make_batch(1);
  b.jobs[0].sampler = "euler_ancestral";
  b.jobs[0].timestep_spacing = "trailing";
  b.jobs[0].guidance_rescale = 0.7;
  auto id = store.insert_batch(b, 20);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto added = store.list_jobs(*id);
  ASSERT_TRUE(added.ok());
  const spec::GenerationSettings s = (*added)[0].generation_settings();
  EXPECT_EQ(s.sampler, "euler_ancestral");
  EXPECT_EQ(s.timestep_spacing, "trailing");
  EXPECT_FLOAT_EQ(s.guidance_rescale, 0.7f);
}

// A database written by a version-5 hipq (no LoRA, img2img or refiner
// columns) migrates to version 6: its jobs read back as the text-to-image,
// base-model jobs they were, and a new job keeps every new setting and the
// digests of its files.
TEST(SchemaTest, VersionFiveJobsStayTextToImageAfterMigrationToSixAndNewJobsKeepTheirFiles) {
  testing::TempDir dir;
  auto path = dir.path() / "v5.db";
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(migrate_to(**db, 5).ok());
    ASSERT_TRUE((*db)->execute(R"sql(
      INSERT INTO manifests (id, sha256, path, text, created_at) VALUES (1, 'abc', '/m.yaml', 'model: x', 10);
      INSERT INTO batches (id, manifest_id, name, priority, state, max_attempts, output_root, job_count, created_at)
        VALUES (1, 1, 'sweep', 0, 'active', 3, '/out', 1, 10);
      INSERT INTO jobs (id, batch_id, ordinal, model, prompt, negative_prompt, seed, width, height, steps, guidance,
                        sampler, precision, rng, output_dir, priority, state, created_at, updated_at,
                        timestep_spacing, guidance_rescale)
        VALUES (1, 1, 0, 'm', 'a cat', '', 7, 64, 64, 4, 5.0, 'euler', 'fp32', 'torch-cpu', 'o/0', 0, 'queued', 10, 10,
                'trailing', 0.5);
    )sql").ok());
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_EQ(*schema_version(**db), 5);
  ASSERT_TRUE(migrate(**db).ok());
  EXPECT_EQ(*schema_version(**db), kLatestSchemaVersion);
  JobStore store(**db);
  auto jobs = store.list_jobs(1);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 1u);
  const spec::GenerationSettings old = (*jobs)[0].generation_settings();
  EXPECT_EQ(old, [] {
    spec::GenerationSettings s;
    s.prompt = "a cat";
    s.seed = 7;
    s.width = 64;
    s.height = 64;
    s.steps = 4;
    s.timestep_spacing = "trailing";
    s.guidance_rescale = 0.5f;
    return s;
  }());
  EXPECT_TRUE((*jobs)[0].inputs.empty());

  NewBatch b = testing::make_batch(1);
  b.jobs[0].loras = {{"/loras/a.safetensors", 0.8f}, {"/loras/b.safetensors", -0.25f}};
  b.jobs[0].init_image = "/inits/fox.png";
  b.jobs[0].strength = 0.6;
  b.jobs[0].refiner = "synthetic:sdxl-refiner";
  b.jobs[0].refiner_switch_at = 0.75;
  b.jobs[0].aesthetic_score = 7;
  b.jobs[0].negative_aesthetic_score = 2;
  b.jobs[0].inputs.loras = {std::string(64, 'a'), std::string(64, 'b')};
  b.jobs[0].inputs.init_image = std::string(64, 'c');
  auto id = store.insert_batch(b, 20);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto added = store.list_jobs(*id);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  const JobRecord& j = (*added)[0];
  const spec::GenerationSettings s = j.generation_settings();
  EXPECT_EQ(s.loras, b.jobs[0].loras);
  EXPECT_EQ(s.init_image, "/inits/fox.png");
  EXPECT_FLOAT_EQ(s.strength, 0.6f);
  EXPECT_EQ(s.refiner, "synthetic:sdxl-refiner");
  EXPECT_FLOAT_EQ(s.refiner_switch_at, 0.75f);
  EXPECT_FLOAT_EQ(s.aesthetic_score, 7.0f);
  EXPECT_FLOAT_EQ(s.negative_aesthetic_score, 2.0f);
  EXPECT_EQ(j.inputs, b.jobs[0].inputs);
  Statement key(**db, "SELECT lora_key FROM jobs WHERE id = ?");
  key.bind_int64(0, j.id);
  ASSERT_TRUE(*key.step());
  EXPECT_EQ(key.column_text(0), std::string(64, 'a') + "*0.8," + std::string(64, 'b') + "*-0.25");

  // A LoRA without its digest is refused before anything is written.
  NewBatch unpinned = testing::make_batch(1);
  unpinned.jobs[0].loras = {{"/loras/a.safetensors", 1.0f}};
  auto refused = store.insert_batch(unpinned, 30);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("need their sha256"), std::string::npos) << refused.status().message();
}

// The gate's stored form (its JSON in batches.parity_gate) is the one every
// version wrote: gates stored by a version-1 hipq read back typed after the
// migrations, "{}" as the default gate, and the next batch stores its own.
TEST(SchemaTest, ParityGatesStoredByVersionOneReadBackTypedAfterMigration) {
  testing::TempDir dir;
  auto path = dir.path() / "v1-gates.db";
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(migrate_to(**db, 1).ok());
    ASSERT_TRUE((*db)->execute(R"sql(
      INSERT INTO manifests (id, sha256, path, text, created_at) VALUES (1, 'abc', '/m.yaml', 'model: x', 10);
      INSERT INTO batches (id, manifest_id, name, state, max_attempts, output_root, parity_gate, job_count,
                           created_at)
        VALUES (1, 1, 'default', 'active', 3, '/out', '{}', 0, 10),
               (2, 1, 'strict', 'active', 3, '/out', '{"cosine_min":0.99,"max_abs_max":0.5}', 0, 10),
               (3, 1, 'no-image', 'active', 3, '/out', '{"cosine_min":null,"psnr_min":null}', 0, 10);
      INSERT INTO batches (id, manifest_id, name, state, max_attempts, output_root, job_count, created_at)
        VALUES (4, 1, 'column-default', 'active', 3, '/out', 0, 10);
    )sql").ok());
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(migrate(**db).ok());
  JobStore store(**db);
  auto gate_of = [&](int64_t batch) {
    auto b = store.get_batch(batch);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? b->parity_gate : spec::ParityGate{};
  };
  EXPECT_EQ(gate_of(1), spec::ParityGate{});
  spec::ParityGate strict;
  ASSERT_TRUE(strict.set("cosine_min", 0.99).ok());
  strict.max_abs_max = 0.5;
  EXPECT_EQ(gate_of(2), strict);
  spec::ParityGate no_image;
  ASSERT_TRUE(no_image.set("cosine_min", std::nullopt).ok());
  no_image.psnr_min_set = true;
  EXPECT_EQ(gate_of(3), no_image);
  EXPECT_FALSE(gate_of(3).psnr_bound("fp32").has_value());
  EXPECT_EQ(gate_of(4), spec::ParityGate{});

  // A new batch stores its gate and reads it back.
  NewBatch b = testing::make_batch(1);
  b.parity_gate = no_image;
  b.parity_gate.rel_l2_max = 0.25;
  auto id = store.insert_batch(b, 20);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(gate_of(*id), b.parity_gate);

  // A gate no version could have written is a corrupt row, named as such.
  ASSERT_TRUE((*db)->execute("UPDATE batches SET parity_gate = 'not json' WHERE id = 1").ok());
  auto broken = store.get_batch(1);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kCorruption);
  EXPECT_NE(broken.status().message().find("batches.parity_gate of batch 1"), std::string::npos)
      << broken.status().message();
}

TEST(SchemaTest, DispatchQueriesUseThePartialIndexes) {
  auto db = memory_db();
  ASSERT_TRUE(migrate(*db).ok());
  EXPECT_NE(query_plan(*db, "SELECT id FROM jobs WHERE state = 'queued' AND priority = 0 ORDER BY id LIMIT 1")
                .find("jobs_queued_fifo"),
            std::string::npos);
  EXPECT_NE(query_plan(*db,
                       "SELECT id FROM jobs WHERE state = 'queued' AND priority = 0 AND model = 'm' "
                       "ORDER BY id LIMIT 1")
                .find("jobs_queued_by_model"),
            std::string::npos);
  EXPECT_NE(query_plan(*db,
                       "SELECT id FROM jobs WHERE state = 'queued' AND priority = 0 AND model = 'm' AND "
                       "lora_key = 'k' ORDER BY id LIMIT 1")
                .find("jobs_queued_by_adapters"),
            std::string::npos);
  EXPECT_NE(query_plan(*db, "SELECT id FROM jobs WHERE state = 'leased' AND lease_deadline < 5 ORDER BY id")
                .find("jobs_leased"),
            std::string::npos);
  EXPECT_NE(query_plan(*db, "SELECT id FROM jobs WHERE state = 'leased' AND lease_worker = 'w' ORDER BY id")
                .find("jobs_leased"),
            std::string::npos);
  EXPECT_NE(query_plan(*db,
                       "SELECT 1 FROM jobs WHERE batch_id = 1 AND state IN ('queued', 'leased')")
                .find("jobs_by_batch_state"),
            std::string::npos);
}

// Version 7 drops the indexes no query reads (each cost every job a b-tree
// insert) and keeps the rows; the reads that remain still find their indexes:
// a result by its job, the verdict counts, the attempt of a job.
TEST(SchemaTest, VersionSixHistorySurvivesMigrationToSevenWithoutTheUnreadIndexes) {
  testing::TempDir dir;
  auto path = dir.path() / "v6.db";
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(migrate_to(**db, 6).ok());
    auto indexes = names_of(**db, "index");
    for (const char* name : {"results_by_time", "results_by_worker", "attempts_by_worker"}) {
      EXPECT_TRUE(indexes.count(name)) << name;
    }
    ASSERT_TRUE((*db)->execute(R"sql(
      INSERT INTO manifests (id, sha256, path, text, created_at) VALUES (1, 'abc', '/m.yaml', 'model: x', 10);
      INSERT INTO batches (id, manifest_id, name, state, max_attempts, output_root, job_count, created_at)
        VALUES (1, 1, 'b', 'done', 3, '/out', 1, 10);
      INSERT INTO jobs (id, batch_id, ordinal, model, prompt, seed, width, height, steps, guidance, sampler,
                        precision, output_dir, state, created_at, updated_at)
        VALUES (1, 1, 0, 'm', 'a cat', 1, 64, 64, 4, 5.0, 'euler', 'fp32', 'o/0', 'done', 10, 12);
      INSERT INTO attempts (id, job_id, attempt, worker_id, started_at, finished_at, state)
        VALUES (1, 1, 1, 'w1', 11, 12, 'done');
      INSERT INTO results (job_id, attempt_id, worker_id, verdict, recorded_at) VALUES (1, 1, 'w1', 'PASS', 12);
    )sql").ok());
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(migrate(**db).ok());
  EXPECT_EQ(*schema_version(**db), kLatestSchemaVersion);
  auto indexes = names_of(**db, "index");
  for (const char* name : {"results_by_time", "results_by_worker", "attempts_by_worker"}) {
    EXPECT_FALSE(indexes.count(name)) << name << " is still there";
  }
  EXPECT_TRUE(indexes.count("results_by_verdict"));
  Statement r(**db, "SELECT r.verdict, a.worker_id FROM results r JOIN attempts a ON a.id = r.attempt_id");
  ASSERT_TRUE(*r.step());
  EXPECT_EQ(r.column_text(0), "PASS");
  EXPECT_EQ(r.column_text(1), "w1");
  EXPECT_NE(query_plan(**db, "SELECT verdict, COUNT(*) FROM results GROUP BY verdict").find("results_by_verdict"),
            std::string::npos);
  EXPECT_NE(query_plan(**db, "SELECT id FROM results WHERE job_id = 1").find("INDEX"), std::string::npos);
  EXPECT_NE(query_plan(**db, "SELECT id, state FROM attempts WHERE job_id = 1 AND attempt = 1").find("INDEX"),
            std::string::npos);
}

// Version 8 adds results.batch_size (protocol 7): results written before ran
// alone (1); a new result keeps the batch it shared.
TEST(SchemaTest, VersionSevenResultsRanAloneAfterMigrationToEightAndNewOnesKeepTheirBatch) {
  testing::TempDir dir;
  auto path = dir.path() / "v7.db";
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(migrate_to(**db, 7).ok());
    ASSERT_TRUE((*db)->execute(R"sql(
      INSERT INTO manifests (id, sha256, path, text, created_at) VALUES (1, 'abc', '/m.yaml', 'model: x', 10);
      INSERT INTO batches (id, manifest_id, name, state, max_attempts, output_root, job_count, created_at)
        VALUES (1, 1, 'b', 'active', 3, '/out', 2, 10);
      INSERT INTO jobs (id, batch_id, ordinal, model, prompt, seed, width, height, steps, guidance, sampler,
                        precision, output_dir, state, created_at, updated_at)
        VALUES (1, 1, 0, 'm', 'a cat', 1, 64, 64, 4, 5.0, 'euler', 'fp32', 'o/0', 'done', 10, 12);
      INSERT INTO jobs (id, batch_id, ordinal, model, prompt, seed, width, height, steps, guidance, sampler,
                        precision, output_dir, state, created_at, updated_at)
        VALUES (2, 1, 1, 'm', 'a dog', 2, 64, 64, 4, 5.0, 'euler', 'fp32', 'o/1', 'queued', 10, 10);
      INSERT INTO attempts (id, job_id, attempt, worker_id, started_at, finished_at, state)
        VALUES (1, 1, 1, 'w1', 11, 12, 'done');
      INSERT INTO results (job_id, attempt_id, worker_id, verdict, recorded_at) VALUES (1, 1, 'w1', 'PASS', 12);
    )sql").ok());
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(migrate(**db).ok());
  EXPECT_EQ(*schema_version(**db), kLatestSchemaVersion);
  JobStore store(**db);
  auto old = store.get_result(1);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->batch_size, 1);
  auto leased = store.lease_next("w2", {}, 20, 30);
  ASSERT_TRUE(leased.ok() && leased->has_value()) << leased.status().ToString();
  NewResult r;
  r.job_id = (*leased)->job.id;
  r.attempt = (*leased)->attempt;
  r.worker_id = "w2";
  r.verdict = "NO_GOLDEN";
  r.batch_size = 0;
  EXPECT_EQ(store.record_result(r, 21).code(), StatusCode::kInvalidArgument) << "a batch of none";
  r.batch_size = 4;
  ASSERT_TRUE(store.record_result(r, 21).ok());
  EXPECT_EQ(store.get_result(r.job_id)->batch_size, 4);
}

// Version 9 adds jobs.vae_precision (protocol 8): jobs written before leave
// the decode's dtype to the precision (""); a new job keeps the one it asks
// for, through the row, the lease and the run history.
TEST(SchemaTest, VersionEightJobsLeaveTheVaeToThePrecisionAfterMigrationToNineAndNewOnesKeepTheirs) {
  testing::TempDir dir;
  auto path = dir.path() / "v8.db";
  {
    auto db = Database::open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(migrate_to(**db, 8).ok());
    ASSERT_TRUE((*db)->execute(R"sql(
      INSERT INTO manifests (id, sha256, path, text, created_at) VALUES (1, 'abc', '/m.yaml', 'model: x', 10);
      INSERT INTO batches (id, manifest_id, name, state, max_attempts, output_root, job_count, created_at)
        VALUES (1, 1, 'b', 'active', 3, '/out', 1, 10);
      INSERT INTO jobs (id, batch_id, ordinal, model, prompt, seed, width, height, steps, guidance, sampler,
                        precision, output_dir, state, created_at, updated_at)
        VALUES (1, 1, 0, 'm', 'a cat', 1, 64, 64, 4, 5.0, 'euler', 'fp16', 'o/0', 'queued', 10, 10);
    )sql").ok());
  }
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(migrate(**db).ok());
  EXPECT_EQ(*schema_version(**db), kLatestSchemaVersion);
  JobStore store(**db);
  auto old = store.get_job(1);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->vae_precision, "");
  EXPECT_FALSE(old->generation_settings().to_json().contains("vae_precision"));

  NewBatch b;
  b.name = "fast";
  b.max_attempts = 1;
  b.output_root = "/out";
  b.manifest_path = "/m.yaml";
  b.manifest_text = "model: y";
  NewJob j;
  j.model = "m";
  j.prompt = "a dog";
  j.width = j.height = 64;
  j.steps = 4;
  j.guidance = 5;
  j.sampler = "euler";
  j.precision = "fp16";
  j.vae_precision = "bf16";
  j.output_dir = "o/1";
  b.jobs.push_back(j);
  auto id = store.insert_batch(b, 20);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto rows = store.list_jobs(*id);
  ASSERT_TRUE(rows.ok() && rows->size() == 1u) << rows.status().ToString();
  EXPECT_EQ(rows->front().vae_precision, "bf16");
  EXPECT_EQ(rows->front().generation_settings().vae_precision, "bf16");
  auto runs = query_runs(**db, RunFilter{});
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 2u);
  for (const RunRow& r : *runs) EXPECT_EQ(r.vae_precision, r.prompt == "a dog" ? "bf16" : "") << r.prompt;
}

TEST(SchemaTest, NewerVersionIsRefused) {
  auto db = memory_db();
  ASSERT_TRUE(migrate(*db).ok());
  ASSERT_TRUE(db->execute("UPDATE schema_meta SET value = '99' WHERE key = 'version'").ok());
  Status s = migrate(*db);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("99"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("upgrade hipq"), std::string::npos);
}

TEST(SchemaTest, NonNumericVersionIsCorruption) {
  auto db = memory_db();
  ASSERT_TRUE(migrate(*db).ok());
  ASSERT_TRUE(db->execute("UPDATE schema_meta SET value = 'two' WHERE key = 'version'").ok());
  auto v = schema_version(*db);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kCorruption);
}

TEST(SchemaTest, DownMigrationAndOutOfRangeAreRefused) {
  auto db = memory_db();
  ASSERT_TRUE(migrate(*db).ok());
  EXPECT_EQ(migrate_to(*db, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(migrate_to(*db, kLatestSchemaVersion + 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(migrate_to(*db, -1).code(), StatusCode::kInvalidArgument);
}

TEST(SchemaTest, FailedStepLeavesPreviousVersion) {
  auto db = memory_db();
  ASSERT_TRUE(migrate_to(*db, 1).ok());
  // Sabotage step 2: it drops jobs_by_state, which is now missing.
  ASSERT_TRUE(db->execute("DROP INDEX jobs_by_state").ok());
  Status s = migrate(*db);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("migration to schema version 2"), std::string::npos) << s.ToString();
  EXPECT_EQ(*schema_version(*db), 1);
  Statement c(*db, "SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name = 'priority'");
  ASSERT_TRUE(*c.step());
  EXPECT_EQ(c.column_int(0), 0);  // the ALTER of the failed step was rolled back
}

TEST(SchemaTest, OpenAndMigrateOnFile) {
  testing::TempDir dir;
  auto db = Database::open_and_migrate(dir.path() / "h.db");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(*schema_version(**db), kLatestSchemaVersion);
}

}  // namespace
}  // namespace hipq::db
