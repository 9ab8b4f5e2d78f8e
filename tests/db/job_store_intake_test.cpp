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

TEST_F(JobStoreTest, AStreamedBatchIsInsertedOneJobAtATimeAndCounted) {
  const NewBatch proto_batch = make_batch(1);
  NewBatch b = proto_batch;
  b.jobs.clear();
  int runs = 0;
  b.job_stream = [&](const NewJobVisitor& visit) -> Status {
    ++runs;
    NewJob job = proto_batch.jobs[0];
    for (int i = 0; i < 250; ++i) {
      job.ordinal = i;
      job.seed = static_cast<uint64_t>(1000 + i);
      job.output_dir = std::string("{batch_id}/job-") + std::to_string(i);
      HIPQ_RETURN_IF_ERROR(visit(job));
    }
    return Status::Ok();
  };
  ASSERT_TRUE(store_->check_folders_free(b).ok());
  int64_t id = insert(b);
  auto batch = store_->get_batch(id);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->job_count, 250);
  EXPECT_EQ(count("SELECT COUNT(*) FROM jobs WHERE batch_id = " + std::to_string(id)), 250);
  EXPECT_EQ(count("SELECT COUNT(*) FROM jobs WHERE seed = 1249 AND ordinal = 249 AND output_dir = '" +
                  std::to_string(id) + "/job-249'"),
            1);
  // check_folders_free stopped at the first job (every folder has {batch_id})
  // and read nothing stored; insert_batch ran the stream once more.
  EXPECT_EQ(runs, 2);
}

TEST_F(JobStoreTest, AStreamedBatchWithABadJobLeavesNothing) {
  const NewBatch proto_batch = make_batch(1);
  auto streamed = [&](int bad_at, const std::string& bad_dir, int64_t bad_ordinal) {
    NewBatch b = proto_batch;
    b.jobs.clear();
    b.job_stream = [=](const NewJobVisitor& visit) -> Status {
      NewJob job = proto_batch.jobs[0];
      for (int i = 0; i < 100; ++i) {
        job.ordinal = i == bad_at ? bad_ordinal : i;
        job.output_dir = i == bad_at ? bad_dir : std::string("d") + std::to_string(i);
        HIPQ_RETURN_IF_ERROR(visit(job));
      }
      return Status::Ok();
    };
    return b;
  };
  auto escape = store_->insert_batch(streamed(70, "a/../../etc", 70), kT0);
  EXPECT_EQ(escape.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(escape.status().message().find("job 70"), std::string::npos) << escape.status().message();
  auto dup = store_->insert_batch(streamed(90, "d90", 3), kT0);
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dup.status().message().find("ordinal 3 appears twice"), std::string::npos) << dup.status().message();
  NewBatch empty = proto_batch;
  empty.jobs.clear();
  empty.job_stream = [](const NewJobVisitor&) { return Status::Ok(); };
  EXPECT_EQ(store_->insert_batch(empty, kT0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(count("SELECT COUNT(*) FROM batches"), 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM jobs"), 0);
}

TEST_F(JobStoreTest, AStreamedBatchIsCheckedForFoldersOfEarlierBatches) {
  NewBatch first = make_batch(3);
  for (auto& j : first.jobs) j.output_dir = std::string("shared/") + std::to_string(j.ordinal);
  insert(first);
  NewBatch again = make_batch(1);
  const NewJob job = again.jobs[0];
  again.jobs.clear();
  again.job_stream = [&](const NewJobVisitor& visit) -> Status {
    for (int i = 0; i < 3; ++i) {
      NewJob j = job;
      j.ordinal = i;
      j.output_dir = i == 2 ? "shared/2" : std::string("{batch_id}/") + std::to_string(i);
      HIPQ_RETURN_IF_ERROR(visit(j));
    }
    return Status::Ok();
  };
  Status s = store_->check_folders_free(again);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find("shared/2"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hipq::db
