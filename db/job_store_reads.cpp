// JobStore reads (db/job_store.h, "reads"): rows and counts, no writes.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <set>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "db/database.h"
#include "db/job_rows.h"
#include "db/job_store.h"
#include "db/run_queries.h"
#include "db/statement.h"
#include "db/transaction.h"

namespace hipq::db {

// ---- reads -------------------------------------------------------------------------

Result<BatchRecord> JobStore::get_batch(int64_t batch_id) {
  Statement s = db_.prepare_cached(std::string("SELECT ") + kBatchColumns + " FROM batches WHERE id = ?");
  s.bind_int64(0, batch_id);
  HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return Status::NotFound("batch " + std::to_string(batch_id) + " does not exist");
  return read_batch(s);
}

Result<JobRecord> JobStore::get_job(int64_t job_id) {
  Statement s = db_.prepare_cached(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?");
  s.bind_int64(0, job_id);
  HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  return read_job(s);
}

Result<ManifestRecord> JobStore::get_manifest(int64_t manifest_id) {
  static constexpr char kSelectManifest[] = "SELECT id, sha256, path, text, created_at FROM manifests WHERE id = ?";
  Statement s = db_.prepare_cached(kSelectManifest);
  s.bind_int64(0, manifest_id);
  HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return Status::NotFound("manifest " + std::to_string(manifest_id) + " does not exist");
  ManifestRecord m;
  m.id = s.column_int64(0);
  m.sha256 = s.column_text(1);
  m.path = s.column_text(2);
  m.text = s.column_text(3);
  m.created_at = s.column_double(4);
  return m;
}

Result<std::vector<BatchRecord>> JobStore::list_batches(std::optional<BatchState> state, int64_t limit) {
  std::string sql = std::string("SELECT ") + kBatchColumns + " FROM batches";
  if (state) sql += " WHERE state = ?";
  sql += " ORDER BY id";
  if (limit > 0) sql += " LIMIT ?";
  Statement s = db_.prepare_cached(sql);
  int i = 0;
  if (state) s.bind_text(i++, batch_state_name(*state));
  if (limit > 0) s.bind_int64(i++, limit);
  std::vector<BatchRecord> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    HIPQ_ASSIGN_OR_RETURN(BatchRecord b, read_batch(s));
    out.push_back(std::move(b));
  }
  return out;
}

Result<std::vector<JobRecord>> JobStore::list_jobs(int64_t batch_id) {
  Statement s = db_.prepare_cached(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE batch_id = ? ORDER BY ordinal");
  s.bind_int64(0, batch_id);
  std::vector<JobRecord> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    HIPQ_ASSIGN_OR_RETURN(JobRecord j, read_job(s));
    out.push_back(std::move(j));
  }
  return out;
}

Result<std::vector<AttemptRecord>> JobStore::list_attempts(int64_t job_id) {
  static constexpr char kSelectAttempts[] =
      "SELECT id, job_id, attempt, worker_id, started_at, finished_at, state, error FROM attempts WHERE job_id = ? "
      "ORDER BY attempt";
  Statement s = db_.prepare_cached(kSelectAttempts);
  s.bind_int64(0, job_id);
  std::vector<AttemptRecord> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    AttemptRecord a;
    a.id = s.column_int64(0);
    a.job_id = s.column_int64(1);
    a.attempt = s.column_int(2);
    a.worker_id = s.column_text(3);
    a.started_at = s.column_double(4);
    a.finished_at = s.column_optional_double(5);
    HIPQ_ASSIGN_OR_RETURN(a.state, parse_attempt_state(s.column_text(6)));
    a.error = s.column_optional_text(7);
    out.push_back(std::move(a));
  }
  return out;
}

Result<ResultRecord> JobStore::get_result(int64_t job_id) {
  static constexpr char kSelectResult[] =
      "SELECT id, job_id, attempt_id, worker_id, verdict, cosine, max_abs, rel_l2, psnr, outputs, "
      "peak_memory_bytes, warm, golden_key, parity_reason, recorded_at, batch_size FROM results WHERE job_id = ?";
  Statement s = db_.prepare_cached(kSelectResult);
  s.bind_int64(0, job_id);
  HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return Status::NotFound("job " + std::to_string(job_id) + " has no result");
  ResultRecord r;
  r.id = s.column_int64(0);
  r.job_id = s.column_int64(1);
  r.attempt_id = s.column_int64(2);
  r.worker_id = s.column_text(3);
  r.verdict = s.column_text(4);
  r.cosine = s.column_optional_double(5);
  r.max_abs = s.column_optional_double(6);
  r.rel_l2 = s.column_optional_double(7);
  r.psnr = s.column_optional_double(8);
  HIPQ_ASSIGN_OR_RETURN(r.outputs, outputs_from_json(s.column_text(9), job_id));
  r.peak_memory_bytes = s.column_optional_int64(10);
  r.warm = s.column_bool(11);
  r.golden_key = s.column_optional_text(12);
  r.parity_reason = s.column_optional_text(13);
  r.recorded_at = s.column_double(14);
  r.batch_size = static_cast<int>(s.column_int64(15));
  return r;
}

Result<std::vector<PhaseTimingRecord>> JobStore::list_phase_timings(int64_t attempt_id) {
  return query_phase_timings(db_, attempt_id);
}

Result<std::vector<StepTimingRecord>> JobStore::list_step_timings(int64_t attempt_id) {
  return query_step_timings(db_, attempt_id);
}

Result<std::vector<CancelledLease>> JobStore::list_leases() {
  static constexpr char kSelectLeases[] =
      "SELECT id, attempts, lease_worker FROM jobs WHERE state = 'leased' ORDER BY id";
  Statement s = db_.prepare_cached(kSelectLeases);
  return collect_cancelled(s);
}

Result<BatchCounts> JobStore::batch_counts(int64_t batch_id) {
  // One snapshot for both counts; inside a caller's transaction that is it.
  std::optional<Transaction> txn;
  if (!db_.in_transaction()) {
    HIPQ_ASSIGN_OR_RETURN(Transaction t, Transaction::begin_deferred(db_));
    txn.emplace(std::move(t));
  }
  BatchCounts c;
  c.batch_id = batch_id;
  HIPQ_ASSIGN_OR_RETURN(c.state, read_batch_state(db_, batch_id));
  for (JobState st : {JobState::kQueued, JobState::kLeased, JobState::kDone, JobState::kFailed, JobState::kDead,
                      JobState::kCancelled})
    c.by_state[std::string(job_state_name(st))] = 0;
  {
    static constexpr char kCountJobsByState[] =
        "SELECT state, COUNT(*) FROM jobs WHERE batch_id = ? GROUP BY state ORDER BY state";
    Statement s = db_.prepare_cached(kCountJobsByState);
    s.bind_int64(0, batch_id);
    while (true) {
      HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
      if (!row) break;
      c.by_state[s.column_text(0)] = s.column_int64(1);
      c.total += s.column_int64(1);
    }
  }
  {
    static constexpr char kCountJobsByVerdict[] =
        "SELECT verdict, COUNT(*) FROM jobs WHERE batch_id = ? AND verdict IS NOT NULL GROUP BY verdict "
        "ORDER BY verdict";
    Statement s = db_.prepare_cached(kCountJobsByVerdict);
    s.bind_int64(0, batch_id);
    while (true) {
      HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
      if (!row) break;
      c.by_verdict[s.column_text(0)] = s.column_int64(1);
    }
  }
  if (c.by_state["failed"] + c.by_state["dead"] > 0) {
    static constexpr char kFirstFailure[] =
        "SELECT j.id, a.error FROM jobs j JOIN attempts a ON a.job_id = j.id AND a.attempt = j.attempts "
        "WHERE j.batch_id = ? AND j.state IN ('failed', 'dead') ORDER BY j.id LIMIT 1";
    Statement s = db_.prepare_cached(kFirstFailure);
    s.bind_int64(0, batch_id);
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (row) c.reason = "job " + std::to_string(s.column_int64(0)) + ": " + s.column_optional_text(1).value_or("?");
  }
  if (txn) HIPQ_RETURN_IF_ERROR(txn->commit());
  return c;
}

Result<std::vector<BatchCounts>> JobStore::all_batch_counts(std::optional<BatchState> state) {
  HIPQ_ASSIGN_OR_RETURN(auto batches, list_batches(state));
  std::vector<BatchCounts> out;
  for (const auto& b : batches) {
    HIPQ_ASSIGN_OR_RETURN(BatchCounts c, batch_counts(b.id));
    out.push_back(std::move(c));
  }
  return out;
}

Result<int64_t> JobStore::queued_count() {
  static constexpr char kCountQueued[] = "SELECT COUNT(*) FROM jobs WHERE state = 'queued'";
  Statement s = db_.prepare_cached(kCountQueued);
  HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
  return row ? s.column_int64(0) : 0;
}

}  // namespace hipq::db
