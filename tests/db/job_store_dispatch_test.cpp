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

// ---- dispatch ---------------------------------------------------------------

TEST_F(JobStoreTest, LeaseNextIsFifoAndStartsAttemptOne) {
  int64_t b = insert(make_batch(3));
  LeasedJob l = lease("w1", kT0 + 1);
  EXPECT_EQ(l.job.ordinal, 0);
  EXPECT_EQ(l.job.batch_id, b);
  EXPECT_EQ(l.attempt, 1);
  EXPECT_EQ(l.job.state, JobState::kLeased);
  EXPECT_EQ(l.job.lease_worker, "w1");
  EXPECT_DOUBLE_EQ(l.lease_deadline, kT0 + 1 + kLease);
  EXPECT_EQ(l.batch.output_root, "/srv/hipq/out");
  auto attempts = store_->list_attempts(l.job.id);
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 1u);
  EXPECT_EQ((*attempts)[0].id, l.attempt_id);
  EXPECT_EQ((*attempts)[0].state, AttemptState::kRunning);
  EXPECT_EQ((*attempts)[0].worker_id, "w1");
  EXPECT_DOUBLE_EQ((*attempts)[0].started_at, kT0 + 1);
  EXPECT_EQ(lease("w2").job.ordinal, 1);
  EXPECT_EQ(lease("w1").job.ordinal, 2);
  auto none = store_->lease_next("w1", {}, kT0, kLease);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

// One batch whose jobs differ in sampler and schedule options: each lease
// carries its own job's settings, as the worker must run them.
TEST_F(JobStoreTest, MixedSamplersInOneBatchLeaseWithTheirOwnSettings) {
  NewBatch b = make_batch(4);
  const char* samplers[] = {"euler_ancestral", "dpmpp_2m_sde_karras", "ddim", "euler"};
  const char* spacings[] = {"trailing", "", "linspace", "leading"};
  for (size_t i = 0; i < 4; ++i) {
    b.jobs[i].sampler = samplers[i];
    b.jobs[i].timestep_spacing = spacings[i];
    b.jobs[i].guidance_rescale = i == 1 ? 0.7 : 0.0;
  }
  insert(b);
  for (size_t i = 0; i < 4; ++i) {
    const spec::GenerationSettings s = lease("w" + std::to_string(i)).job.generation_settings();
    EXPECT_EQ(s.sampler, samplers[i]);
    EXPECT_EQ(s.timestep_spacing, spacings[i]);
    EXPECT_FLOAT_EQ(s.guidance_rescale, i == 1 ? 0.7f : 0.0f);
    EXPECT_TRUE(s.validate().ok()) << s.validate().ToString();
  }
}

TEST_F(JobStoreTest, HigherPriorityBatchFirstEvenIfNewer) {
  insert(make_batch(2, 0, 3, "low"));
  int64_t high = insert(make_batch(2, 5, 3, "high"));
  EXPECT_EQ(lease("w").job.batch_id, high);
  EXPECT_EQ(lease("w").job.batch_id, high);
  EXPECT_NE(lease("w").job.batch_id, high);
}

TEST_F(JobStoreTest, AffinityPrefersLoadedModelWithinPriority) {
  NewBatch b = make_batch(0);
  b.jobs = {make_job(0, "model-a"), make_job(1, "model-b"), make_job(2, "model-a"), make_job(3, "model-b")};
  insert(b);
  EXPECT_EQ(lease("w", kT0, {"model-b"}).job.ordinal, 1);
  EXPECT_EQ(lease("w", kT0, {"model-b"}).job.ordinal, 3);
  // No more model-b: falls back to FIFO of the rest.
  EXPECT_EQ(lease("w", kT0, {"model-b"}).job.ordinal, 0);
  EXPECT_EQ(lease("w", kT0, {"model-x", "model-a"}).job.ordinal, 2);
}

// A worker holding model-a with LoRA set X takes the oldest job needing
// exactly that (no switch) before an older model-a job with another set (a
// switch), and that before another model (a load).
TEST_F(JobStoreTest, AffinityPrefersTheHeldLoraSetThenTheHeldModel) {
  auto with_lora = [](int ordinal, const std::string& model, char digest, float scale) {
    NewJob j = make_job(ordinal, model);
    j.loras = {{"/loras/" + std::string(1, digest) + ".safetensors", scale}};
    j.inputs.loras = {std::string(64, digest)};
    return j;
  };
  NewBatch b = make_batch(0);
  b.jobs = {make_job(0, "model-b"), make_job(1, "model-a"), with_lora(2, "model-a", 'c', 0.5f),
            with_lora(3, "model-a", 'd', 0.5f), with_lora(4, "model-a", 'd', 0.8f)};
  insert(b);
  const std::string held = std::string(64, 'd') + "*0.5";
  auto next = [&](const std::vector<ModelHolding>& holding) {
    auto l = store_->lease_next("w", {"model-a"}, kT0, kLease, holding);
    EXPECT_TRUE(l.ok() && l->has_value());
    return l.ok() && l->has_value() ? (*l)->job.ordinal : -1;
  };
  EXPECT_EQ(next({{"model-a", held}}), 3) << "the same files at the same scales";
  EXPECT_EQ(next({{"model-a", held}}), 1) << "then the held model, oldest first";
  EXPECT_EQ(next({{"model-a", ""}}), 2) << "the base model held: oldest of model-a";
  EXPECT_EQ(next({{"model-a", std::string(64, 'd') + "*0.8"}}), 4);
  EXPECT_EQ(next({{"model-a", held}}), 0) << "nothing of model-a left: FIFO";
}

TEST_F(JobStoreTest, PriorityBeatsAffinity) {
  insert(make_batch(1, 0, 3, "low", "model-a"));
  int64_t high = insert(make_batch(1, 9, 3, "high", "model-b"));
  EXPECT_EQ(lease("w", kT0, {"model-a"}).job.batch_id, high);
}

TEST_F(JobStoreTest, ExtendLeaseMovesDeadlineOnlyForCurrentHolder) {
  insert(make_batch(1));
  LeasedJob l = lease("w1");
  ASSERT_TRUE(store_->extend_lease(l.job.id, 1, "w1", kT0 + 20, kLease).ok());
  EXPECT_DOUBLE_EQ(*store_->get_job(l.job.id)->lease_deadline, kT0 + 20 + kLease);
  EXPECT_EQ(store_->extend_lease(l.job.id, 1, "w2", kT0 + 21, kLease).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->extend_lease(l.job.id, 2, "w1", kT0 + 21, kLease).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->extend_lease(12345, 1, "w1", kT0, kLease).code(), StatusCode::kNotFound);
  EXPECT_DOUBLE_EQ(*store_->get_job(l.job.id)->lease_deadline, kT0 + 20 + kLease);
}

TEST_F(JobStoreTest, ExtendWorkerLeasesTouchesOnlyThatWorker) {
  insert(make_batch(3));
  LeasedJob a = lease("w1");
  LeasedJob b = lease("w1");
  LeasedJob c = lease("w2");
  auto n = store_->extend_worker_leases("w1", kT0 + 10, kLease);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);
  EXPECT_DOUBLE_EQ(*store_->get_job(a.job.id)->lease_deadline, kT0 + 10 + kLease);
  EXPECT_DOUBLE_EQ(*store_->get_job(b.job.id)->lease_deadline, kT0 + 10 + kLease);
  EXPECT_DOUBLE_EQ(*store_->get_job(c.job.id)->lease_deadline, kT0 + kLease);
}

// ---- results ---------------------------------------------------------------

TEST_F(JobStoreTest, RecordResultWritesEverythingAndFinishesBatch) {
  int64_t b = insert(make_batch(1));
  LeasedJob l = lease("w1");
  NewResult r = result_for(l);
  ASSERT_TRUE(store_->record_result(r, kT0 + 5).ok());

  auto job = store_->get_job(l.job.id);
  EXPECT_EQ(job->state, JobState::kDone);
  EXPECT_EQ(job->verdict, "PASS");
  EXPECT_EQ(job->golden_key, r.golden_key);
  EXPECT_FALSE(job->lease_worker.has_value());
  EXPECT_FALSE(job->lease_deadline.has_value());

  auto res = store_->get_result(l.job.id);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->attempt_id, l.attempt_id);
  EXPECT_EQ(res->worker_id, "w1");
  EXPECT_EQ(res->verdict, "PASS");
  EXPECT_DOUBLE_EQ(*res->cosine, 0.99995);
  EXPECT_FALSE(res->psnr.has_value());
  ASSERT_EQ(res->outputs.size(), 2u);
  EXPECT_EQ(res->outputs[1].kind, "png");
  EXPECT_EQ(res->outputs[1].bytes, 1234);
  EXPECT_EQ(res->peak_memory_bytes, int64_t{1} << 30);
  EXPECT_TRUE(res->warm);
  EXPECT_DOUBLE_EQ(res->recorded_at, kT0 + 5);

  auto phases = store_->list_phase_timings(l.attempt_id);
  ASSERT_EQ(phases->size(), 4u);
  EXPECT_EQ((*phases)[0].phase, "load");
  EXPECT_FALSE((*phases)[0].gpu_ms.has_value());
  EXPECT_EQ((*phases)[3].phase, "decode");
  auto steps = store_->list_step_timings(l.attempt_id);
  ASSERT_EQ(steps->size(), 4u);
  EXPECT_DOUBLE_EQ((*steps)[3].host_ms, 13.0);

  auto attempts = store_->list_attempts(l.job.id);
  EXPECT_EQ((*attempts)[0].state, AttemptState::kDone);
  EXPECT_DOUBLE_EQ(*(*attempts)[0].finished_at, kT0 + 5);

  auto batch = store_->get_batch(b);
  EXPECT_EQ(batch->state, BatchState::kDone);
  EXPECT_DOUBLE_EQ(*batch->finished_at, kT0 + 5);
}

TEST_F(JobStoreTest, DuplicateResultIsAlreadyExistsAndChangesNothing) {
  insert(make_batch(1));
  LeasedJob l = lease("w1");
  ASSERT_TRUE(store_->record_result(result_for(l), kT0 + 5).ok());
  NewResult again = result_for(l, "FAIL");
  Status s = store_->record_result(again, kT0 + 6);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_EQ(store_->get_job(l.job.id)->verdict, "PASS");
  EXPECT_DOUBLE_EQ(store_->get_result(l.job.id)->recorded_at, kT0 + 5);
  EXPECT_EQ(count("SELECT COUNT(*) FROM results"), 1);
  EXPECT_EQ(count("SELECT COUNT(*) FROM phase_timings"), 4);
}

TEST_F(JobStoreTest, StaleAttemptResultIsFailedPreconditionAndChangesNothing) {
  insert(make_batch(1));
  LeasedJob first = lease("w1", kT0);
  auto expired = store_->expire_leases(kT0 + kLease + 1);
  ASSERT_TRUE(expired.ok());
  ASSERT_EQ(expired->size(), 1u);
  LeasedJob second = lease("w2", kT0 + kLease + 2);
  EXPECT_EQ(second.attempt, 2);
  // The first worker finally answers: too late.
  Status s = store_->record_result(result_for(first), kT0 + kLease + 3);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("expired"), std::string::npos) << s.ToString();
  EXPECT_EQ(count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(store_->get_job(second.job.id)->state, JobState::kLeased);
  // The current holder still records.
  ASSERT_TRUE(store_->record_result(result_for(second), kT0 + kLease + 4).ok());
  EXPECT_EQ(store_->get_result(second.job.id)->attempt_id, second.attempt_id);
}

TEST_F(JobStoreTest, ResultFromWrongWorkerOrUnknownJob) {
  insert(make_batch(1));
  LeasedJob l = lease("w1");
  NewResult r = result_for(l);
  r.worker_id = "impostor";
  EXPECT_EQ(store_->record_result(r, kT0).code(), StatusCode::kFailedPrecondition);
  r = result_for(l);
  r.job_id = 999;
  EXPECT_EQ(store_->record_result(r, kT0).code(), StatusCode::kNotFound);
  r = result_for(l);
  r.verdict.clear();
  EXPECT_EQ(store_->record_result(r, kT0).code(), StatusCode::kInvalidArgument);
  r = result_for(l);
  r.phases.push_back({"load", 1.0, 1.0});
  EXPECT_EQ(store_->record_result(r, kT0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->get_job(l.job.id)->state, JobState::kLeased);
  EXPECT_EQ(count("SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM phase_timings"), 0);
}

TEST_F(JobStoreTest, ParityFailIsAResultNotARetry) {
  insert(make_batch(1));
  LeasedJob l = lease("w1");
  ASSERT_TRUE(store_->record_result(result_for(l, "FAIL"), kT0 + 1).ok());
  auto job = store_->get_job(l.job.id);
  EXPECT_EQ(job->state, JobState::kDone);
  EXPECT_EQ(job->verdict, "FAIL");
  EXPECT_EQ(job->attempts, 1);
}

// ---- failures and expiry --------------------------------------------------------

TEST_F(JobStoreTest, FailureRequeuesUntilMaxAttemptsThenDeadKeepingEveryError) {
  int64_t b = insert(make_batch(1, 0, /*max_attempts=*/3));
  for (int attempt = 1; attempt <= 3; ++attempt) {
    LeasedJob l = lease(numbered("w", attempt), kT0 + attempt);
    ASSERT_EQ(l.attempt, attempt);
    auto out = store_->record_failure(l.job.id, attempt, numbered("w", attempt),
                                      numbered("out of memory #", attempt), true, kT0 + attempt + 0.5);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->attempt, attempt);
    EXPECT_EQ(out->new_state, attempt < 3 ? JobState::kQueued : JobState::kDead);
  }
  auto jobs = store_->list_jobs(b);
  EXPECT_EQ((*jobs)[0].state, JobState::kDead);
  auto attempts = store_->list_attempts((*jobs)[0].id);
  ASSERT_EQ(attempts->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*attempts)[i].state, AttemptState::kFailed);
    EXPECT_EQ((*attempts)[i].error, numbered("out of memory #", i + 1));
  }
  EXPECT_EQ(store_->get_batch(b)->state, BatchState::kDone);
  auto none = store_->lease_next("w9", {}, kT0 + 10, kLease);
  EXPECT_FALSE(none->has_value());
}

// A worker that refuses a job unstarted (busy, draining) must not bring it
// closer to dead: with max_attempts 1, a hundred refusals still leave it
// queued, and the next real attempt is attempt 1.
TEST_F(JobStoreTest, ReturnedLeaseRequeuesWithoutCountingAnAttempt) {
  int64_t b = insert(make_batch(1, 0, /*max_attempts=*/1));
  for (int i = 0; i < 100; ++i) {
    LeasedJob l = lease("busy", kT0 + i);
    ASSERT_EQ(l.attempt, 1);
    ASSERT_TRUE(store_->return_lease(l.job.id, l.attempt, "busy", kT0 + i + 0.5).ok());
  }
  auto jobs = store_->list_jobs(b);
  EXPECT_EQ((*jobs)[0].state, JobState::kQueued);
  EXPECT_EQ((*jobs)[0].attempts, 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM attempts"), 0);
  LeasedJob l = lease("w1", kT0 + 200);
  EXPECT_EQ(l.attempt, 1);
  // Only the holder of the current lease may give it back.
  EXPECT_EQ(store_->return_lease(l.job.id, l.attempt, "other", kT0 + 201).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_->record_result(result_for(l), kT0 + 202).ok());
  EXPECT_EQ(store_->return_lease(l.job.id, l.attempt, "w1", kT0 + 203).code(), StatusCode::kAlreadyExists);
}

TEST_F(JobStoreTest, NonRetryableFailureEndsJobFailed) {
  insert(make_batch(2));
  LeasedJob l = lease("w1");
  auto out = store_->record_failure(l.job.id, 1, "w1", "model files not found", false, kT0 + 1);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->new_state, JobState::kFailed);
  EXPECT_EQ(store_->get_job(l.job.id)->state, JobState::kFailed);
  // A repeat of the same failure report is stale now.
  EXPECT_EQ(store_->record_failure(l.job.id, 1, "w1", "again", false, kT0 + 2).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(JobStoreTest, ExpireLeasesRequeuesOnlyPastDeadline) {
  insert(make_batch(2, 0, 2));
  LeasedJob a = lease("w1", kT0);
  LeasedJob b = lease("w2", kT0 + 10);
  auto none = store_->expire_leases(kT0 + kLease);  // a's deadline is not < now yet
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto out = store_->expire_leases(kT0 + kLease + 1);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].job_id, a.job.id);
  EXPECT_EQ((*out)[0].worker_id, "w1");
  EXPECT_EQ((*out)[0].new_state, JobState::kQueued);
  EXPECT_EQ(store_->get_job(a.job.id)->state, JobState::kQueued);
  EXPECT_EQ(store_->get_job(b.job.id)->state, JobState::kLeased);
  auto attempts = store_->list_attempts(a.job.id);
  EXPECT_EQ((*attempts)[0].state, AttemptState::kExpired);
  EXPECT_NE((*attempts)[0].error->find("expired"), std::string::npos);
  EXPECT_NE((*attempts)[0].error->find("w1"), std::string::npos);

  // Second expiry of the same job at max_attempts=2 → dead.
  LeasedJob again = lease("w3", kT0 + 40);
  EXPECT_EQ(again.job.id, a.job.id);
  EXPECT_EQ(again.attempt, 2);
  auto out2 = store_->expire_leases(kT0 + 40 + kLease + 1);
  ASSERT_TRUE(out2.ok());
  ASSERT_EQ(out2->size(), 2u);  // b (deadline T0+40) and a again
  for (const auto& o : *out2) {
    if (o.job_id == a.job.id) {
      EXPECT_EQ(o.new_state, JobState::kDead);
    } else {
      EXPECT_EQ(o.job_id, b.job.id);
      EXPECT_EQ(o.new_state, JobState::kQueued);
    }
  }
}

TEST_F(JobStoreTest, ReleaseWorkerLeasesEndsOnlyThatWorkersJobs) {
  insert(make_batch(3));
  LeasedJob a = lease("w1");
  LeasedJob b = lease("w2");
  auto out = store_->release_worker_leases("w1", "3 heartbeats missed", kT0 + 3);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].job_id, a.job.id);
  EXPECT_EQ(store_->get_job(a.job.id)->state, JobState::kQueued);
  EXPECT_EQ(store_->get_job(b.job.id)->state, JobState::kLeased);
  EXPECT_EQ(*store_->list_attempts(a.job.id)->at(0).error, "worker w1 lost: 3 heartbeats missed");
  // The requeued job is next in FIFO order.
  EXPECT_EQ(lease("w3").job.id, a.job.id);
}

TEST_F(JobStoreTest, ListLeasesForRestart) {
  insert(make_batch(3));
  LeasedJob a = lease("w1");
  LeasedJob b = lease("w2");
  auto leases = store_->list_leases();
  ASSERT_TRUE(leases.ok());
  ASSERT_EQ(leases->size(), 2u);
  EXPECT_EQ((*leases)[0].job_id, a.job.id);
  EXPECT_EQ((*leases)[1].worker_id, "w2");
  EXPECT_EQ(*store_->queued_count(), 1);
}

// ---- cancel ----------------------------------------------------------------------

TEST_F(JobStoreTest, CancelBatchCancelsQueuedAndLeasedAndNamesLeaseHolders) {
  int64_t b = insert(make_batch(4));
  LeasedJob a = lease("w1");
  LeasedJob done = lease("w2");
  ASSERT_TRUE(store_->record_result(result_for(done), kT0 + 1).ok());
  auto out = store_->cancel_batch(b, kT0 + 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->jobs_cancelled, 3);
  ASSERT_EQ(out->leases.size(), 1u);
  EXPECT_EQ(out->leases[0].job_id, a.job.id);
  EXPECT_EQ(out->leases[0].worker_id, "w1");
  EXPECT_EQ(store_->get_batch(b)->state, BatchState::kCancelled);
  EXPECT_EQ(store_->get_job(done.job.id)->state, JobState::kDone);
  EXPECT_EQ(store_->list_attempts(a.job.id)->at(0).state, AttemptState::kCancelled);
  EXPECT_FALSE(store_->lease_next("w1", {}, kT0 + 3, kLease)->has_value());
  // The cancelled worker's late result is refused.
  EXPECT_EQ(store_->record_result(result_for(a), kT0 + 4).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->cancel_batch(b, kT0 + 5).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->cancel_batch(777, kT0 + 5).status().code(), StatusCode::kNotFound);
}

TEST_F(JobStoreTest, CancelJobAndBatchCompletion) {
  int64_t b = insert(make_batch(2));
  LeasedJob a = lease("w1");
  auto jobs = store_->list_jobs(b);
  int64_t queued_id = (*jobs)[1].id;
  auto c1 = store_->cancel_job(queued_id, kT0 + 1);
  ASSERT_TRUE(c1.ok());
  EXPECT_TRUE(c1->leases.empty());
  EXPECT_EQ(store_->get_batch(b)->state, BatchState::kActive);  // a still leased
  auto c2 = store_->cancel_job(a.job.id, kT0 + 2);
  ASSERT_TRUE(c2.ok());
  ASSERT_EQ(c2->leases.size(), 1u);
  EXPECT_EQ(c2->leases[0].attempt, 1);
  auto batch = store_->get_batch(b);
  EXPECT_EQ(batch->state, BatchState::kDone);  // nothing queued or leased remains
  EXPECT_DOUBLE_EQ(*batch->finished_at, kT0 + 2);
  EXPECT_EQ(store_->cancel_job(a.job.id, kT0 + 3).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->cancel_job(4242, kT0).status().code(), StatusCode::kNotFound);
}

// ---- group commit -------------------------------------------------------------------

TEST_F(JobStoreTest, OperationsInsideACallersTransactionCommitTogether) {
  insert(make_batch(3));
  {
    auto outer = Transaction::begin_immediate(*db_);
    ASSERT_TRUE(outer.ok());
    LeasedJob a = lease("w1");
    LeasedJob b = lease("w2");
    ASSERT_TRUE(store_->record_result(result_for(a), kT0 + 1).ok());
    // A refused operation inside the group changes nothing and leaves the rest.
    EXPECT_EQ(store_->record_result(result_for(a), kT0 + 2).code(), StatusCode::kAlreadyExists);
    EXPECT_EQ(store_->batch_counts(a.job.batch_id)->by_state.at("done"), 1);
    EXPECT_TRUE(db_->in_transaction());
    (void)b;
    // outer destroyed without commit: everything above is undone
  }
  EXPECT_EQ(count("SELECT COUNT(*) FROM jobs WHERE state = 'queued'"), 3);
  EXPECT_EQ(count("SELECT COUNT(*) FROM attempts"), 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM results"), 0);

  auto outer = Transaction::begin_immediate(*db_);
  ASSERT_TRUE(outer.ok());
  LeasedJob a = lease("w1");
  ASSERT_TRUE(store_->record_result(result_for(a), kT0 + 1).ok());
  LeasedJob b = lease("w2");
  ASSERT_TRUE(outer->commit().ok());
  EXPECT_EQ(store_->get_job(a.job.id)->state, JobState::kDone);
  EXPECT_EQ(store_->get_job(b.job.id)->state, JobState::kLeased);
}

// ---- concurrency on one file ----------------------------------------------------------

// Leases until the queue is empty; returns the job ids it got.
std::vector<int64_t> drain(const std::filesystem::path& path, const std::string& worker) {
  std::vector<int64_t> got;
  auto db = Database::open(path);
  if (!db.ok()) return {-1};
  JobStore store(**db);
  while (true) {
    auto l = store.lease_next(worker, {}, kT0, kLease);
    if (!l.ok()) return {-2};
    if (!l->has_value()) break;
    got.push_back((*l)->job.id);
    NewResult r;
    r.job_id = (*l)->job.id;
    r.attempt = (*l)->attempt;
    r.worker_id = worker;
    r.verdict = "NO_GOLDEN";
    if (!store.record_result(r, kT0 + 1).ok()) return {-3};
  }
  return got;
}

TEST(JobStoreConcurrencyTest, TwoThreadsNeverLeaseTheSameJob) {
  TempDir dir;
  auto path = dir.path() / "q.db";
  {
    auto db = Database::open_and_migrate(path);
    ASSERT_TRUE(db.ok());
    JobStore store(**db);
    ASSERT_TRUE(store.insert_batch(make_batch(100), kT0).ok());
  }
  std::vector<int64_t> a, b;
  std::thread ta([&] { a = drain(path, "thread-a"); });
  std::thread tb([&] { b = drain(path, "thread-b"); });
  ta.join();
  tb.join();
  std::set<int64_t> all(a.begin(), a.end());
  for (int64_t id : b) EXPECT_TRUE(all.insert(id).second) << "job " << id << " leased twice";
  EXPECT_EQ(all.size(), 100u);
  EXPECT_GT(*all.begin(), 0);  // no error markers
}

TEST(JobStoreConcurrencyTest, TwoProcessesNeverLeaseTheSameJob) {
  TempDir dir;
  auto path = dir.path() / "q.db";
  {
    auto db = Database::open_and_migrate(path);
    ASSERT_TRUE(db.ok());
    JobStore store(**db);
    ASSERT_TRUE(store.insert_batch(make_batch(100), kT0).ok());
  }
  auto child_out = dir.path() / "child.txt";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::vector<int64_t> got = drain(path, "process-child");
    std::ofstream out(child_out);
    for (int64_t id : got) out << id << "\n";
    out.close();
    _exit(out ? 0 : 1);
  }
  std::vector<int64_t> mine = drain(path, "process-parent");
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::vector<int64_t> theirs;
  std::ifstream in(child_out);
  for (int64_t id; in >> id;) theirs.push_back(id);

  std::set<int64_t> all(mine.begin(), mine.end());
  for (int64_t id : theirs) EXPECT_TRUE(all.insert(id).second) << "job " << id << " leased twice";
  EXPECT_EQ(all.size(), 100u);
  EXPECT_GT(*all.begin(), 0);
  // Every job has exactly one result and one attempt.
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  Statement s(**db, "SELECT COUNT(*), COUNT(DISTINCT job_id) FROM results");
  ASSERT_TRUE(*s.step());
  EXPECT_EQ(s.column_int64(0), 100);
  EXPECT_EQ(s.column_int64(1), 100);
  JobStore store(**db);
  EXPECT_EQ(store.list_batches()->at(0).state, BatchState::kDone);
}

// A coordinator killed in the middle of a write loses that write whole and
// nothing else: the next process sees the job still queued and can lease it.
TEST(JobStoreConcurrencyTest, WriterKilledMidTransactionLeavesNothingHalfWritten) {
  TempDir dir;
  auto path = dir.path() / "q.db";
  {
    auto db = Database::open_and_migrate(path);
    ASSERT_TRUE(db.ok());
    JobStore store(**db);
    ASSERT_TRUE(store.insert_batch(make_batch(2), kT0).ok());
  }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(ready[0]);
    auto db = Database::open(path);
    if (!db.ok()) _exit(1);
    JobStore store(**db);
    auto txn = Transaction::begin_immediate(**db);
    if (!txn.ok()) _exit(2);
    auto l = store.lease_next("doomed", {}, kT0, kLease);
    if (!l.ok() || !l->has_value()) _exit(3);
    NewResult r;
    r.job_id = (*l)->job.id;
    r.attempt = (*l)->attempt;
    r.worker_id = "doomed";
    r.verdict = "PASS";
    r.phases = {{"denoise", 1.0, 1.0}};
    if (!store.record_result(r, kT0 + 1).ok()) _exit(4);
    char c = 'x';
    if (write(ready[1], &c, 1) != 1) _exit(5);
    pause();  // killed here, inside the open transaction
    _exit(6);
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  JobStore store(**db);
  EXPECT_EQ(*store.queued_count(), 2);
  Statement s(**db, "SELECT (SELECT COUNT(*) FROM attempts), (SELECT COUNT(*) FROM results), "
                    "(SELECT COUNT(*) FROM phase_timings)");
  ASSERT_TRUE(*s.step());
  EXPECT_EQ(s.column_int64(0), 0);
  EXPECT_EQ(s.column_int64(1), 0);
  EXPECT_EQ(s.column_int64(2), 0);
  auto l = store.lease_next("survivor", {}, kT0 + 2, kLease);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_TRUE(l->has_value());
  EXPECT_EQ((*l)->attempt, 1);
}

TEST(JobStoreConcurrencyTest, FourConnectionsMigratingAFreshFileAtOnce) {
  TempDir dir;
  auto path = dir.path() / "fresh.db";
  std::vector<Status> results(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto db = Database::open_and_migrate(path);
      results[i] = db.ok() ? Status::Ok() : db.status();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.ToString();
  auto db = Database::open(path);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*schema_version(**db), kLatestSchemaVersion);
}

}  // namespace
}  // namespace hipq::db
