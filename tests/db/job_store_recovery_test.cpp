// JobStore's stop/resume/fail operations (db/job_store_recovery.cpp) and the
// job-folder check, on an in-memory database.
#include <gtest/gtest.h>

#include "base/fs.h"
#include "db/database.h"
#include "db/job_store.h"
#include "db/schema.h"
#include "test_util.h"

namespace hipq::db {
namespace {

constexpr double kT0 = 1'800'000'000.0;

class BatchRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::open_in_memory();
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    ASSERT_TRUE(migrate(*db_).ok());
    store_ = std::make_unique<JobStore>(*db_);
  }
  int64_t insert(const NewBatch& b) {
    auto id = store_->insert_batch(b, kT0);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
  LeasedJob lease(const std::string& worker) {
    auto l = store_->lease_next(worker, {}, kT0, 30);
    EXPECT_TRUE(l.ok() && l->has_value());
    return l.ok() && l->has_value() ? **l : LeasedJob{};
  }
  std::map<std::string, int64_t> states(int64_t batch) {
    auto c = store_->batch_counts(batch);
    EXPECT_TRUE(c.ok());
    return c.ok() ? c->by_state : std::map<std::string, int64_t>{};
  }
  std::unique_ptr<Database> db_;
  std::unique_ptr<JobStore> store_;
};

TEST_F(BatchRecoveryTest, LatestBatchOfAManifestIsFoundBySha256) {
  NewBatch b = testing::make_batch(2);
  for (auto& j : b.jobs) j.output_dir = "{batch_id}/" + std::to_string(j.ordinal);
  int64_t first = insert(b);
  int64_t second = insert(b);
  auto latest = store_->latest_batch_of_manifest(sha256_hex(b.manifest_text));
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->id, second);
  EXPECT_NE(first, second);
  auto none = store_->latest_batch_of_manifest(std::string(64, '0'));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto jobs = store_->list_jobs(second);
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[1].output_dir, std::to_string(second) + "/1") << "{batch_id} is replaced when queued";
}

TEST_F(BatchRecoveryTest, ReleasedLeasesGoBackToTheQueueAndFailedJobsAreReopened) {
  int64_t b = insert(testing::make_batch(3, 0, 1));
  LeasedJob a = lease("w1");
  LeasedJob c = lease("w1");
  ASSERT_TRUE(store_->record_failure(c.job.id, c.attempt, "w1", "IOError: disk", true, kT0).ok());  // dead: 1 attempt
  EXPECT_EQ(states(b)["dead"], 1);
  auto released = store_->release_batch_leases(b, "interrupted", kT0);
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(*released, 1);
  EXPECT_EQ(states(b)["leased"], 0);
  auto attempts = store_->list_attempts(a.job.id);
  ASSERT_TRUE(attempts.ok());
  EXPECT_EQ(attempts->back().state, AttemptState::kCancelled);
  EXPECT_EQ(attempts->back().error.value_or(""), "interrupted");

  auto reopened = store_->reopen_batch(b, kT0);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(*reopened, 1);
  EXPECT_EQ(states(b)["queued"], 3);
  LeasedJob again = lease("w2");
  EXPECT_EQ(again.attempt, 2) << "a released job's next lease counts on";
}

TEST_F(BatchRecoveryTest, ACancelledBatchIsNotReopened) {
  int64_t b = insert(testing::make_batch(1));
  ASSERT_TRUE(store_->cancel_batch(b, kT0).ok());
  EXPECT_EQ(store_->reopen_batch(b, kT0).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(BatchRecoveryTest, FailingQueuedJobsRecordsWhyAndFinishesTheBatch) {
  int64_t b = insert(testing::make_batch(4));
  LeasedJob first = lease("w1");
  ASSERT_TRUE(store_->record_failure(first.job.id, first.attempt, "w1", "FailedPrecondition: out", false, kT0).ok());
  auto failed = store_->fail_queued_jobs(b, "not run: configuration error", kT0);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(*failed, 3);
  EXPECT_EQ(states(b)["failed"], 4);
  auto batch = store_->get_batch(b);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->state, BatchState::kDone);
  auto counts = store_->batch_counts(b);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->reason, "job " + std::to_string(first.job.id) + ": FailedPrecondition: out");
  auto jobs = store_->list_jobs(b);
  auto attempts = store_->list_attempts(jobs->back().id);
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 1u);
  EXPECT_EQ(attempts->front().worker_id, "coordinator");
  EXPECT_EQ(attempts->front().error.value_or(""), "not run: configuration error");
}

TEST_F(BatchRecoveryTest, AFolderOfAnotherBatchIsRefused) {
  NewBatch b = testing::make_batch(2);
  insert(b);
  Status s = store_->check_folders_free(b);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find("/srv/hipq/out/b/0' belongs to batch 1"), std::string::npos) << s.message();
  NewBatch other_root = b;
  other_root.output_root = "/srv/hipq/elsewhere";
  EXPECT_TRUE(store_->check_folders_free(other_root).ok());
  NewBatch with_id = b;
  for (auto& j : with_id.jobs) j.output_dir = "b/{batch_id}/" + std::to_string(j.ordinal);
  EXPECT_TRUE(store_->check_folders_free(with_id).ok());
}

}  // namespace
}  // namespace hipq::db
