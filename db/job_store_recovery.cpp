// JobStore operations that stop, resume and fail a whole batch
// (db/job_store.h, "stop, resume, fail"). Each is one write transaction
// (a savepoint inside a caller's).
#include <string>

#include "db/database.h"
#include "db/job_rows.h"
#include "db/job_store.h"
#include "db/statement.h"
#include "db/transaction.h"

namespace hipq::db {

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
  HIPQ_ASSIGN_OR_RETURN(BatchState state, read_batch_state(db_, batch_id));
  if (state == BatchState::kCancelled) {
    return Status::FailedPrecondition("batch " + std::to_string(batch_id) + " was cancelled; it is not resumed");
  }
  static constexpr char kRequeueFailed[] =
      "UPDATE jobs SET state = 'queued', lease_worker = NULL, lease_deadline = NULL, updated_at = ? "
      "WHERE batch_id = ? AND state IN ('failed', 'dead')";
  HIPQ_ASSIGN_OR_RETURN(int64_t requeued, move_batch_jobs(db_, batch_id, nullptr, "", kRequeueFailed, now));
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
  static constexpr char kRequeueLeased[] =
      "UPDATE jobs SET state = 'queued', lease_worker = NULL, lease_deadline = NULL, updated_at = ? "
      "WHERE batch_id = ? AND state = 'leased'";
  return move_batch_jobs(db_, batch_id, kCancelLeasedAttempts, reason, kRequeueLeased, now);
}

Result<int64_t> JobStore::fail_queued_jobs(int64_t batch_id, std::string_view reason, double now) {
  // ?1 = now (started and finished), ?2 = reason, ?3 = batch id.
  static constexpr char kRecordNotRun[] =
      "INSERT INTO attempts (job_id, attempt, worker_id, started_at, finished_at, state, error) "
      "SELECT id, attempts + 1, 'coordinator', ?1, ?1, 'failed', ?2 FROM jobs "
      "WHERE batch_id = ?3 AND state = 'queued'";
  static constexpr char kFailQueued[] =
      "UPDATE jobs SET state = 'failed', attempts = attempts + 1, updated_at = ? "
      "WHERE batch_id = ? AND state = 'queued'";
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  HIPQ_ASSIGN_OR_RETURN(int64_t failed,
                        move_batch_jobs(db_, batch_id, kRecordNotRun, reason, kFailQueued, now));
  HIPQ_RETURN_IF_ERROR(finish_batch_if_drained(db_, batch_id, now));
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return failed;
}

}  // namespace hipq::db
