// JobStore dispatch and results (db/job_store.h, "dispatch", "outcomes",
// "cancel"): leases, what a worker reports on them, and ending them.
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
#include "db/statement.h"
#include "db/transaction.h"

namespace hipq::db {

// ---- dispatch -------------------------------------------------------------------

Result<std::optional<LeasedJob>> JobStore::lease_next(std::string_view worker_id,
                                                      const std::vector<std::string>& loaded_models, double now,
                                                      double lease_seconds, const std::vector<ModelHolding>& held) {
  if (worker_id.empty()) return Status::InvalidArgument("lease_next: empty worker id");
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  int priority = 0;
  {
    // `state = 'queued'` is spelled literally in the dispatch SQL so the
    // partial indexes jobs_queued_fifo / jobs_queued_by_model (schema v2) apply.
    static constexpr char kSelectTopQueuedPriority[] =
        "SELECT priority FROM jobs WHERE state = 'queued' ORDER BY priority DESC LIMIT 1";
    Statement p = db_.prepare_cached(kSelectTopQueuedPriority);
    HIPQ_ASSIGN_OR_RETURN(bool row, p.step());
    if (!row) return std::optional<LeasedJob>();  // nothing queued; txn rolls back
    priority = p.column_int(0);
  }
  // Affinity: the oldest job at this priority whose model and LoRA set the
  // worker holds (no merge at all), else whose model it holds (a LoRA switch,
  // not a load). One indexed probe per held model (a worker holds few).
  std::optional<int64_t> job_id;
  {
    static constexpr char kSelectQueuedForAdapters[] =
        "SELECT id FROM jobs WHERE state = 'queued' AND priority = ? AND model = ? AND lora_key = ? "
        "ORDER BY id LIMIT 1";
    Statement m = db_.prepare_cached(kSelectQueuedForAdapters);
    for (const ModelHolding& h : held) {
      m.reset();
      m.bind_int(0, priority);
      m.bind_text(1, h.model);
      m.bind_text(2, h.lora_key);
      HIPQ_ASSIGN_OR_RETURN(bool row, m.step());
      if (row && (!job_id || m.column_int64(0) < *job_id)) job_id = m.column_int64(0);
    }
  }
  if (!job_id) {
    static constexpr char kSelectQueuedForModel[] =
        "SELECT id FROM jobs WHERE state = 'queued' AND priority = ? AND model = ? ORDER BY id LIMIT 1";
    Statement m = db_.prepare_cached(kSelectQueuedForModel);
    for (const auto& model : loaded_models) {
      m.reset();
      m.bind_int(0, priority);
      m.bind_text(1, model);
      HIPQ_ASSIGN_OR_RETURN(bool row, m.step());
      if (row && (!job_id || m.column_int64(0) < *job_id)) job_id = m.column_int64(0);
    }
  }
  if (!job_id) {
    static constexpr char kSelectQueuedFifo[] =
        "SELECT id FROM jobs WHERE state = 'queued' AND priority = ? ORDER BY id LIMIT 1";
    Statement f = db_.prepare_cached(kSelectQueuedFifo);
    f.bind_int(0, priority);
    HIPQ_ASSIGN_OR_RETURN(bool row, f.step());
    if (!row) return Status::Internal("queued job at priority " + std::to_string(priority) + " vanished");
    job_id = f.column_int64(0);
  }
  double deadline = now + lease_seconds;
  LeasedJob leased;
  {
    // The row comes back from the update itself (RETURNING, as it is after
    // the update): one statement where an UPDATE and a SELECT were.
    static const std::string kLeaseJob =
        std::string("UPDATE jobs SET state = 'leased', attempts = attempts + 1, lease_worker = ?, lease_deadline = ?, "
                    "updated_at = ? WHERE id = ? AND state = 'queued' RETURNING ") +
        kJobColumns;
    Statement u = db_.prepare_cached(kLeaseJob);
    u.bind_text(0, worker_id);
    u.bind_double(1, deadline);
    u.bind_double(2, now);
    u.bind_int64(3, *job_id);
    HIPQ_ASSIGN_OR_RETURN(bool row, u.step());
    if (!row) return Status::Internal("job " + std::to_string(*job_id) + " was not queued");
    HIPQ_ASSIGN_OR_RETURN(leased.job, read_job(u));
  }  // reset here: the statement is done before the next one runs
  {
    Statement b = db_.prepare_cached(std::string("SELECT ") + kBatchColumns + " FROM batches WHERE id = ?");
    b.bind_int64(0, leased.job.batch_id);
    HIPQ_ASSIGN_OR_RETURN(bool row, b.step());
    if (!row) return Status::Internal("batch of job " + std::to_string(*job_id) + " vanished");
    HIPQ_ASSIGN_OR_RETURN(leased.batch, read_batch(b));
  }
  leased.attempt = leased.job.attempts;
  leased.lease_deadline = deadline;
  {
    static constexpr char kInsertAttempt[] =
        "INSERT INTO attempts (job_id, attempt, worker_id, started_at, state) VALUES (?, ?, ?, ?, 'running')";
    Statement a = db_.prepare_cached(kInsertAttempt);
    a.bind_int64(0, *job_id);
    a.bind_int(1, leased.attempt);
    a.bind_text(2, worker_id);
    a.bind_double(3, now);
    HIPQ_RETURN_IF_ERROR(a.run());
    leased.attempt_id = db_.last_insert_rowid();
  }
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return std::optional<LeasedJob>(std::move(leased));
}

Status JobStore::extend_lease(int64_t job_id, int attempt, std::string_view worker_id, double now,
                              double lease_seconds) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  HIPQ_ASSIGN_OR_RETURN(LeaseRow r, read_lease_row(db_, job_id));
  HIPQ_RETURN_IF_ERROR(check_current_lease(db_, job_id, attempt, worker_id, r));
  static constexpr char kExtendLease[] =
      "UPDATE jobs SET lease_deadline = ?, updated_at = ? WHERE id = ? AND state = 'leased' AND attempts = ? "
      "AND lease_worker = ?";
  Statement s = db_.prepare_cached(kExtendLease);
  s.bind_double(0, now + lease_seconds);
  s.bind_double(1, now);
  s.bind_int64(2, job_id);
  s.bind_int(3, attempt);
  s.bind_text(4, worker_id);
  HIPQ_RETURN_IF_ERROR(s.run());
  return txn.commit();
}

Result<int64_t> JobStore::extend_worker_leases(std::string_view worker_id, double now, double lease_seconds) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  static constexpr char kExtendWorkerLeases[] =
      "UPDATE jobs SET lease_deadline = ?, updated_at = ? WHERE state = 'leased' AND lease_worker = ?";
  Statement s = db_.prepare_cached(kExtendWorkerLeases);
  s.bind_double(0, now + lease_seconds);
  s.bind_double(1, now);
  s.bind_text(2, worker_id);
  HIPQ_RETURN_IF_ERROR(s.run());
  int64_t n = db_.changes();
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return n;
}

// ---- outcomes ---------------------------------------------------------------------

Status JobStore::record_result(const NewResult& result, double now) {
  if (result.verdict.empty()) {
    return Status::InvalidArgument("result for job " + std::to_string(result.job_id) + " has no verdict");
  }
  if (result.batch_size < 1) {
    return Status::InvalidArgument("result for job " + std::to_string(result.job_id) + ": batch_size " +
                                   std::to_string(result.batch_size) + " (want 1 or more)");
  }
  std::set<std::string> phases;
  for (const auto& p : result.phases) {
    if (!phases.insert(p.phase).second) {
      return Status::InvalidArgument("result for job " + std::to_string(result.job_id) + ": phase '" + p.phase +
                                     "' appears twice");
    }
  }
  std::set<int> steps;
  for (const auto& st : result.steps) {
    if (!steps.insert(st.step).second) {
      return Status::InvalidArgument("result for job " + std::to_string(result.job_id) + ": step " +
                                     std::to_string(st.step) + " appears twice");
    }
  }

  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  HIPQ_ASSIGN_OR_RETURN(LeaseRow r, read_lease_row(db_, result.job_id));
  HIPQ_RETURN_IF_ERROR(check_current_lease(db_, result.job_id, result.attempt, result.worker_id, r));
  int64_t attempt_id = 0;
  {
    // The attempt ends done and gives its id back in one statement.
    static const std::string kFinishAttemptReturningId = std::string(kFinishAttempt) + " RETURNING id";
    Statement a = db_.prepare_cached(kFinishAttemptReturningId);
    a.bind_text(0, attempt_state_name(AttemptState::kDone));
    a.bind_double(1, now);
    a.bind_null(2);
    a.bind_int64(3, result.job_id);
    a.bind_int(4, result.attempt);
    HIPQ_ASSIGN_OR_RETURN(bool row, a.step());
    if (!row) {
      return Status::Internal("job " + std::to_string(result.job_id) + " is leased at attempt " +
                              std::to_string(result.attempt) + " but has no attempt row");
    }
    attempt_id = a.column_int64(0);
  }
  {
    static constexpr char kInsertResult[] =
        "INSERT INTO results (job_id, attempt_id, worker_id, verdict, cosine, max_abs, rel_l2, psnr, golden_key, "
        "parity_reason, outputs, peak_memory_bytes, warm, recorded_at, batch_size) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    Statement s = db_.prepare_cached(kInsertResult);
    s.bind_int64(0, result.job_id);
    s.bind_int64(1, attempt_id);
    s.bind_text(2, result.worker_id);
    s.bind_text(3, result.verdict);
    s.bind_optional_double(4, result.cosine);
    s.bind_optional_double(5, result.max_abs);
    s.bind_optional_double(6, result.rel_l2);
    s.bind_optional_double(7, result.psnr);
    s.bind_optional_text(8, result.golden_key);
    s.bind_optional_text(9, result.parity_reason);
    s.bind_text(10, outputs_to_json(result.outputs));
    s.bind_optional_int64(11, result.peak_memory_bytes);
    s.bind_bool(12, result.warm);
    s.bind_double(13, now);
    s.bind_int(14, result.batch_size);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  {
    static constexpr char kInsertPhaseTiming[] =
        "INSERT INTO phase_timings (attempt_id, phase, host_ms, gpu_ms) VALUES (?, ?, ?, ?)";
    Statement s = db_.prepare_cached(kInsertPhaseTiming);
    for (const auto& p : result.phases) {
      s.reset();
      s.bind_int64(0, attempt_id);
      s.bind_text(1, p.phase);
      s.bind_double(2, p.host_ms);
      s.bind_optional_double(3, p.gpu_ms);
      HIPQ_RETURN_IF_ERROR(s.run());
    }
  }
  {
    static constexpr char kInsertStepTiming[] =
        "INSERT INTO step_timings (attempt_id, step, host_ms, gpu_ms) VALUES (?, ?, ?, ?)";
    Statement s = db_.prepare_cached(kInsertStepTiming);
    for (const auto& st : result.steps) {
      s.reset();
      s.bind_int64(0, attempt_id);
      s.bind_int(1, st.step);
      s.bind_double(2, st.host_ms);
      s.bind_optional_double(3, st.gpu_ms);
      HIPQ_RETURN_IF_ERROR(s.run());
    }
  }
  {
    static constexpr char kJobDone[] =
        "UPDATE jobs SET state = 'done', verdict = ?, golden_key = COALESCE(?, golden_key), lease_worker = NULL, "
        "lease_deadline = NULL, updated_at = ? WHERE id = ?";
    Statement s = db_.prepare_cached(kJobDone);
    s.bind_text(0, result.verdict);
    s.bind_optional_text(1, result.golden_key);
    s.bind_double(2, now);
    s.bind_int64(3, result.job_id);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  HIPQ_RETURN_IF_ERROR(finish_batch_if_drained(db_, r.batch_id, now));
  return txn.commit();
}

Result<FailureOutcome> JobStore::record_failure(int64_t job_id, int attempt, std::string_view worker_id,
                                                std::string_view error, bool retryable, double now) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  HIPQ_ASSIGN_OR_RETURN(LeaseRow r, read_lease_row(db_, job_id));
  HIPQ_RETURN_IF_ERROR(check_current_lease(db_, job_id, attempt, worker_id, r));
  HIPQ_ASSIGN_OR_RETURN(FailureOutcome out,
                        end_attempt(db_, job_id, r, AttemptState::kFailed, error, retryable, now));
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return out;
}

Status JobStore::return_lease(int64_t job_id, int attempt, std::string_view worker_id, double now) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  HIPQ_ASSIGN_OR_RETURN(LeaseRow r, read_lease_row(db_, job_id));
  HIPQ_RETURN_IF_ERROR(check_current_lease(db_, job_id, attempt, worker_id, r));
  // The attempt never ran: it leaves no row, and the next lease reuses its number.
  {
    static constexpr char kDeleteUnstartedAttempt[] =
        "DELETE FROM attempts WHERE job_id = ? AND attempt = ? AND state = 'running'";
    Statement s = db_.prepare_cached(kDeleteUnstartedAttempt);
    s.bind_int64(0, job_id);
    s.bind_int(1, attempt);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  {
    static constexpr char kRequeueReturned[] =
        "UPDATE jobs SET state = 'queued', attempts = attempts - 1, lease_worker = NULL, lease_deadline = NULL, "
        "updated_at = ? WHERE id = ? AND state = 'leased' AND attempts = ?";
    Statement s = db_.prepare_cached(kRequeueReturned);
    s.bind_double(0, now);
    s.bind_int64(1, job_id);
    s.bind_int(2, attempt);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  return txn.commit();
}

Result<std::vector<FailureOutcome>> JobStore::expire_leases(double now) {
  // Called every poll-loop turn: a plain read first, so the usual "nothing
  // expired" takes no write lock.
  {
    static constexpr char kAnyExpiredLease[] =
        "SELECT 1 FROM jobs WHERE state = 'leased' AND lease_deadline < ? LIMIT 1";
    Statement any = db_.prepare_cached(kAnyExpiredLease);
    any.bind_double(0, now);
    HIPQ_ASSIGN_OR_RETURN(bool row, any.step());
    if (!row) return std::vector<FailureOutcome>();
  }
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  std::vector<LeaseToEnd> leases;
  {
    static constexpr char kSelectExpiredLeases[] =
        "SELECT j.id, j.attempts, j.lease_worker, j.batch_id, b.max_attempts, j.lease_deadline FROM jobs j "
        "JOIN batches b ON b.id = j.batch_id WHERE j.state = 'leased' AND j.lease_deadline < ? ORDER BY j.id";
    Statement s = db_.prepare_cached(kSelectExpiredLeases);
    s.bind_double(0, now);
    HIPQ_ASSIGN_OR_RETURN(leases, collect_leases(s));
  }
  std::vector<FailureOutcome> out;
  for (const auto& e : leases) {
    std::string error = "lease of worker " + e.row.lease_worker.value_or("?") + " expired at " +
                        format_time(e.deadline) + " (no heartbeat or result)";
    HIPQ_ASSIGN_OR_RETURN(FailureOutcome o,
                          end_attempt(db_, e.job_id, e.row, AttemptState::kExpired, error, true, now));
    out.push_back(std::move(o));
  }
  if (out.empty()) return out;  // nothing written; txn rolls back
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return out;
}

Result<std::vector<FailureOutcome>> JobStore::release_worker_leases(std::string_view worker_id,
                                                                    std::string_view reason, double now) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  std::vector<LeaseToEnd> leases;
  {
    static constexpr char kSelectWorkerLeases[] =
        "SELECT j.id, j.attempts, j.lease_worker, j.batch_id, b.max_attempts, j.lease_deadline FROM jobs j "
        "JOIN batches b ON b.id = j.batch_id WHERE j.state = 'leased' AND j.lease_worker = ? ORDER BY j.id";
    Statement s = db_.prepare_cached(kSelectWorkerLeases);
    s.bind_text(0, worker_id);
    HIPQ_ASSIGN_OR_RETURN(leases, collect_leases(s));
  }
  std::vector<FailureOutcome> out;
  for (const auto& e : leases) {
    std::string error = "worker " + std::string(worker_id) + " lost: " + std::string(reason);
    HIPQ_ASSIGN_OR_RETURN(FailureOutcome o,
                          end_attempt(db_, e.job_id, e.row, AttemptState::kExpired, error, true, now));
    out.push_back(std::move(o));
  }
  if (out.empty()) return out;
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return out;
}

// ---- cancel ----------------------------------------------------------------------

Result<CancelOutcome> JobStore::cancel_batch(int64_t batch_id, double now) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  HIPQ_ASSIGN_OR_RETURN(BatchState state, read_batch_state(db_, batch_id));
  if (state != BatchState::kActive) {
    return Status::FailedPrecondition("batch " + std::to_string(batch_id) + " is already " +
                                      std::string(batch_state_name(state)));
  }
  CancelOutcome out;
  {
    static constexpr char kSelectBatchLeases[] =
        "SELECT id, attempts, lease_worker FROM jobs WHERE batch_id = ? AND state = 'leased' ORDER BY id";
    Statement s = db_.prepare_cached(kSelectBatchLeases);
    s.bind_int64(0, batch_id);
    HIPQ_ASSIGN_OR_RETURN(out.leases, collect_cancelled(s));
  }
  static constexpr char kCancelBatchJobs[] =
      "UPDATE jobs SET state = 'cancelled', lease_worker = NULL, lease_deadline = NULL, updated_at = ? "
      "WHERE batch_id = ? AND state IN ('queued', 'leased')";
  const std::string reason = "batch " + std::to_string(batch_id) + " cancelled";
  HIPQ_ASSIGN_OR_RETURN(out.jobs_cancelled,
                        move_batch_jobs(db_, batch_id, kCancelLeasedAttempts, reason, kCancelBatchJobs, now));
  {
    static constexpr char kCancelBatch[] = "UPDATE batches SET state = 'cancelled', finished_at = ? WHERE id = ?";
    Statement s = db_.prepare_cached(kCancelBatch);
    s.bind_double(0, now);
    s.bind_int64(1, batch_id);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return out;
}

Result<CancelOutcome> JobStore::cancel_job(int64_t job_id, double now) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  JobState state;
  int attempts = 0;
  std::optional<std::string> worker;
  int64_t batch_id = 0;
  {
    static constexpr char kSelectJobForCancel[] = "SELECT state, attempts, lease_worker, batch_id FROM jobs WHERE id = ?";
    Statement s = db_.prepare_cached(kSelectJobForCancel);
    s.bind_int64(0, job_id);
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
    HIPQ_ASSIGN_OR_RETURN(state, parse_job_state(s.column_text(0)));
    attempts = s.column_int(1);
    worker = s.column_optional_text(2);
    batch_id = s.column_int64(3);
  }
  if (is_terminal(state)) {
    return Status::FailedPrecondition("job " + std::to_string(job_id) + " is already " +
                                      std::string(job_state_name(state)));
  }
  CancelOutcome out;
  out.jobs_cancelled = 1;
  if (state == JobState::kLeased) {
    out.leases.push_back({job_id, attempts, worker.value_or("")});
    Statement a = db_.prepare_cached(kFinishAttempt);
    a.bind_text(0, attempt_state_name(AttemptState::kCancelled));
    a.bind_double(1, now);
    a.bind_text(2, "job " + std::to_string(job_id) + " cancelled");
    a.bind_int64(3, job_id);
    a.bind_int(4, attempts);
    HIPQ_RETURN_IF_ERROR(a.run());
  }
  {
    Statement s = db_.prepare_cached(kJobEndLease);
    s.bind_text(0, job_state_name(JobState::kCancelled));
    s.bind_double(1, now);
    s.bind_int64(2, job_id);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  HIPQ_RETURN_IF_ERROR(finish_batch_if_drained(db_, batch_id, now));
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return out;
}

}  // namespace hipq::db
