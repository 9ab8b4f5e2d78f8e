// JobStore operations that stop, resume and fail a whole batch
// (db/job_store.h, "stop, resume, fail"). Each is one write transaction
// (a savepoint inside a caller's).
#include <string>

#include "db/database.h"
#include "db/job_store.h"
#include "db/statement.h"
#include "db/transaction.h"

namespace hipq::db {
namespace {

constexpr char kBatchStateOf[] = "SELECT state FROM batches WHERE id = ?";
constexpr char kFinishIfDrained[] =
    "UPDATE batches SET state = 'done', finished_at = ? WHERE id = ? AND state = 'active' AND NOT EXISTS "
    "(SELECT 1 FROM jobs WHERE batch_id = ? AND state IN ('queued', 'leased'))";

Result<std::string> batch_state_of(Database& db, int64_t batch_id) {
  Statement s = db.prepare_cached(kBatchStateOf);
  s.bind_int64(0, batch_id);
  HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return Status::NotFound("batch " + std::to_string(batch_id) + " does not exist");
  return s.column_text(0);
}

}  // namespace

Result<std::optional<BatchRecord>> JobStore::latest_batch_of_manifest(std::string_view manifest_sha256) {
  static constexpr char kLatestBatchOfManifest[] =
      "SELECT b.id FROM batches b JOIN manifests m ON m.id = b.manifest_id WHERE m.sha256 = ? "
      "ORDER BY b.id DESC LIMIT 1";
  Statement s = db_.prepare_cached(kLatestBatchOfManifest);
  s.bind_text(0, manifest_sha256);
  HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return std::optional<BatchRecord>();
  int64_t id = s.column_int64(0);
  HIPQ_ASSIGN_OR_RETURN(BatchRecord b, get_batch(id));
  return std::optional<BatchRecord>(std::move(b));
}

Result<int64_t> JobStore::reopen_batch(int64_t batch_id, double now) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  HIPQ_ASSIGN_OR_RETURN(std::string state, batch_state_of(db_, batch_id));
  if (state == "cancelled") {
    return Status::FailedPrecondition("batch " + std::to_string(batch_id) + " was cancelled; it is not resumed");
  }
  int64_t requeued = 0;
  {
    static constexpr char kRequeueFailed[] =
        "UPDATE jobs SET state = 'queued', lease_worker = NULL, lease_deadline = NULL, updated_at = ? "
        "WHERE batch_id = ? AND state IN ('failed', 'dead')";
    Statement s = db_.prepare_cached(kRequeueFailed);
    s.bind_double(0, now);
    s.bind_int64(1, batch_id);
    HIPQ_RETURN_IF_ERROR(s.run());
    requeued = db_.changes();
  }
  {
    static constexpr char kReactivate[] =
        "UPDATE batches SET state = 'active', finished_at = NULL WHERE id = ? AND EXISTS "
        "(SELECT 1 FROM jobs WHERE batch_id = ? AND state IN ('queued', 'leased'))";
    Statement s = db_.prepare_cached(kReactivate);
    s.bind_int64(0, batch_id);
    s.bind_int64(1, batch_id);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return requeued;
}

Result<int64_t> JobStore::release_batch_leases(int64_t batch_id, std::string_view reason, double now) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  HIPQ_RETURN_IF_ERROR(batch_state_of(db_, batch_id).status());
  {
    static constexpr char kCancelRunningAttempts[] =
        "UPDATE attempts SET state = 'cancelled', finished_at = ?, error = ? WHERE state = 'running' AND job_id IN "
        "(SELECT id FROM jobs WHERE batch_id = ? AND state = 'leased')";
    Statement s = db_.prepare_cached(kCancelRunningAttempts);
    s.bind_double(0, now);
    s.bind_text(1, reason);
    s.bind_int64(2, batch_id);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  int64_t released = 0;
  {
    static constexpr char kRequeueLeased[] =
        "UPDATE jobs SET state = 'queued', lease_worker = NULL, lease_deadline = NULL, updated_at = ? "
        "WHERE batch_id = ? AND state = 'leased'";
    Statement s = db_.prepare_cached(kRequeueLeased);
    s.bind_double(0, now);
    s.bind_int64(1, batch_id);
    HIPQ_RETURN_IF_ERROR(s.run());
    released = db_.changes();
  }
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return released;
}

Result<int64_t> JobStore::fail_queued_jobs(int64_t batch_id, std::string_view reason, double now) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  HIPQ_RETURN_IF_ERROR(batch_state_of(db_, batch_id).status());
  {
    static constexpr char kRecordNotRun[] =
        "INSERT INTO attempts (job_id, attempt, worker_id, started_at, finished_at, state, error) "
        "SELECT id, attempts + 1, 'coordinator', ?, ?, 'failed', ? FROM jobs WHERE batch_id = ? AND state = 'queued'";
    Statement s = db_.prepare_cached(kRecordNotRun);
    s.bind_double(0, now);
    s.bind_double(1, now);
    s.bind_text(2, reason);
    s.bind_int64(3, batch_id);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  int64_t failed = 0;
  {
    static constexpr char kFailQueued[] =
        "UPDATE jobs SET state = 'failed', attempts = attempts + 1, updated_at = ? "
        "WHERE batch_id = ? AND state = 'queued'";
    Statement s = db_.prepare_cached(kFailQueued);
    s.bind_double(0, now);
    s.bind_int64(1, batch_id);
    HIPQ_RETURN_IF_ERROR(s.run());
    failed = db_.changes();
  }
  {
    Statement s = db_.prepare_cached(kFinishIfDrained);
    s.bind_double(0, now);
    s.bind_int64(1, batch_id);
    s.bind_int64(2, batch_id);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return failed;
}

}  // namespace hipq::db
