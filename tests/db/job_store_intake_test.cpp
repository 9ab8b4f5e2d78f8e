#include "db/job_store.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <thread>

#include "base/fs.h"
#include "db/database.h"
#include "db/schema.h"
#include "db/statement.h"
#include "db/transaction.h"
#include "tests/base/test_strings.h"
#include "tests/db/test_util.h"
#include "tests/db/job_store_fixture.h"

namespace hipq::db {
namespace {

// ---- intake ----------------------------------------------------------------

TEST_F(JobStoreTest, InsertBatchStoresManifestBatchAndJobs) {
  NewBatch b = make_batch(3, 2, 4, "parti");
  b.jobs[1].seed = 0xFFFFFFFFFFFFFFFFull;  // needs all 64 bits
  int64_t id = insert(b);
  auto batch = store_->get_batch(id);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->name, "parti");
  EXPECT_EQ(batch->priority, 2);
  EXPECT_EQ(batch->max_attempts, 4);
  EXPECT_EQ(batch->state, BatchState::kActive);
  EXPECT_EQ(batch->job_count, 3);
  EXPECT_EQ(batch->save, (std::vector<std::string>{"latent", "png"}));
  EXPECT_EQ(batch->golden_source, "store");
  spec::ParityGate gate;
  gate.max_abs_max = 0.5;
  EXPECT_EQ(batch->parity_gate, gate);
  EXPECT_DOUBLE_EQ(batch->created_at, kT0);
  EXPECT_FALSE(batch->finished_at.has_value());

  auto manifest = store_->get_manifest(batch->manifest_id);
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(manifest->text, b.manifest_text);
  EXPECT_EQ(manifest->sha256, sha256_hex(b.manifest_text));
  EXPECT_EQ(manifest->path, b.manifest_path);

  auto jobs = store_->list_jobs(id);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const JobRecord& j = (*jobs)[i];
    EXPECT_EQ(j.ordinal, static_cast<int64_t>(i));
    EXPECT_EQ(j.state, JobState::kQueued);
    EXPECT_EQ(j.attempts, 0);
    EXPECT_EQ(j.priority, 2);
    EXPECT_EQ(j.tags, b.jobs[i].tags);
    EXPECT_EQ(j.seed, b.jobs[i].seed);
    EXPECT_EQ(j.output_dir, b.jobs[i].output_dir);
    EXPECT_EQ(j.rng, b.jobs[i].rng);
    EXPECT_EQ(j.generation_settings().prompt, b.jobs[i].prompt);
    EXPECT_EQ(j.generation_settings().seed, b.jobs[i].seed);
    EXPECT_FALSE(j.lease_worker.has_value());
  }
}

TEST_F(JobStoreTest, SameManifestTextIsStoredOnce) {
  int64_t a = insert(make_batch(1));
  int64_t b = insert(make_batch(1));
  EXPECT_NE(a, b);
  EXPECT_EQ(store_->get_batch(a)->manifest_id, store_->get_batch(b)->manifest_id);
  EXPECT_EQ(count("SELECT COUNT(*) FROM manifests"), 1);
}

TEST_F(JobStoreTest, InvalidBatchesWriteNothing) {
  NewBatch empty = make_batch(0);
  EXPECT_EQ(store_->insert_batch(empty, kT0).status().code(), StatusCode::kInvalidArgument);
  NewBatch escape = make_batch(2);
  escape.jobs[1].output_dir = "a/../../etc";
  EXPECT_EQ(store_->insert_batch(escape, kT0).status().code(), StatusCode::kInvalidArgument);
  NewBatch absolute = make_batch(1);
  absolute.jobs[0].output_dir = "/etc";
  EXPECT_EQ(store_->insert_batch(absolute, kT0).status().code(), StatusCode::kInvalidArgument);
  NewBatch relative_root = make_batch(1);
  relative_root.output_root = "out";
  EXPECT_EQ(store_->insert_batch(relative_root, kT0).status().code(), StatusCode::kInvalidArgument);
  NewBatch dup = make_batch(2);
  dup.jobs[1].ordinal = 0;
  EXPECT_EQ(store_->insert_batch(dup, kT0).status().code(), StatusCode::kInvalidArgument);
  NewBatch zero = make_batch(1, 0, 0);
  EXPECT_EQ(store_->insert_batch(zero, kT0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(count("SELECT COUNT(*) FROM manifests"), 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM batches"), 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM jobs"), 0);
}

}  // namespace
}  // namespace hipq::db
