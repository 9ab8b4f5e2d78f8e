// JobStore: the typed job-state operations the coordinator runs on the DB.
//
// Every state change is one BEGIN IMMEDIATE transaction, so a crash leaves
// each job either before or after an operation, never between, and a
// coordinator restarted on the same file recovers everything (leases that
// ran out meanwhile are requeued by the next expire_leases).
//
// Group commit: a caller may open Transaction::begin_immediate() around
// several calls (e.g. everything one coordinator poll-loop turn records); each
// call then runs in a savepoint (still all-or-nothing on its own) and the
// caller's COMMIT makes them durable together: one fsync instead of one per
// call. Nothing is durable, or visible to other connections, before that
// COMMIT, so send replies that depend on a write only after it.
//
// Time is injected: every operation that stamps or compares time takes `now`
// (seconds since the Unix epoch; callers use wall_clock_seconds()); no SQL
// reads the clock, so tests control it.
//
// Dispatch (lease_next) is pull-based: among queued jobs, the highest batch
// priority first; within it, a job whose model and LoRA set the worker holds
// (`held`), else a job whose model it has loaded (affinity); then the oldest
// (lowest job id). Two connections (threads or
// processes) leasing from one file never get the same job: the select and the
// update share one IMMEDIATE transaction.
//
// Attempts are 1-based. A lease is (job, attempt, worker); extend_lease,
// record_result and record_failure must name the current one:
//   - the job's current attempt, leased to that worker  → applied;
//   - a result for an attempt already recorded            → AlreadyExists;
//   - any other attempt/worker, or a job no longer leased → FailedPrecondition
//     (a late report from an expired or cancelled lease);
// in both error cases nothing changes. An unknown job → NotFound.
// A retryable failure or an expired lease requeues the job (its next lease is
// attempt + 1) while attempts < max_attempts, else the job is `dead`; every
// attempt row keeps its error. A batch becomes `done` (finished_at = now) in
// the same transaction that leaves it with no queued or leased job.
//
// Ownership: borrows the Database (must outlive the store). Stateless besides.
// Thread safety: as the Database (one thread at a time per connection).
// SQLite errors come back as mapped in db/statement.h (Unavailable when the
// write lock stays busy past the timeout).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "db/records.h"

namespace hipq::db {

class Database;

class JobStore {
 public:
  explicit JobStore(Database& db) : db_(db) {}

  // ---- intake ----------------------------------------------------------------
  // Stores the manifest (verbatim text + sha256; reused when the same text
  // was stored before), the batch (state active) and its jobs (queued) in one
  // transaction; returns the batch id. The token "{batch_id}" in a job's
  // output_dir is replaced by the new batch's id. The jobs are read one at a
  // time from batch.job_stream when set (a batch of millions is never held
  // whole). InvalidArgument for an empty job list, max_attempts < 1, a
  // relative output_root, a repeated ordinal, or a job's output_dir that is
  // absolute or has a ".." component (nothing is written then).
  Result<int64_t> insert_batch(const NewBatch& batch, double now);
  // AlreadyExists (naming the folder and its batch) when a job folder of
  // `batch` (output_root/output_dir, compared as stored) is already the folder
  // of a job of a batch in the database, so two batches never write over
  // each other's files; folders with "{batch_id}" are the new batch's own.
  // The coordinator calls it before insert_batch (one thread: no race).
  Status check_folders_free(const NewBatch& batch);

  // ---- dispatch --------------------------------------------------------------
  // Leases the next job for `worker_id` (see the header comment for the order)
  // until now + lease_seconds, starting attempt job.attempts + 1 (an attempts
  // row in state running). nullopt when nothing is queued.
  Result<std::optional<LeasedJob>> lease_next(std::string_view worker_id,
                                              const std::vector<std::string>& loaded_models,
                                              double now, double lease_seconds,
                                              const std::vector<ModelHolding>& held = {});

  // Moves the lease deadline of (job, attempt, worker) to now + lease_seconds.
  Status extend_lease(int64_t job_id, int attempt, std::string_view worker_id, double now,
                      double lease_seconds);
  // Heartbeat form: extends every lease `worker_id` holds; returns how many.
  Result<int64_t> extend_worker_leases(std::string_view worker_id, double now, double lease_seconds);

  // ---- outcomes ----------------------------------------------------------------
  // Records a finished attempt: the results row, its phase and step timings,
  // the attempt (done), the job (done, verdict) and possibly the batch (done),
  // all in one transaction. Errors as in the header comment; InvalidArgument
  // for an empty verdict.
  Status record_result(const NewResult& result, double now);

  // Records that an attempt failed with `error`. retryable: requeue while
  // attempts remain, else dead; not retryable (bad settings, missing model
  // files): the job ends `failed` at once. Same lease checks as record_result.
  Result<FailureOutcome> record_failure(int64_t job_id, int attempt, std::string_view worker_id,
                                        std::string_view error, bool retryable, double now);

  // Gives back a lease whose job never started (the worker refused it as
  // busy or draining, or held it without any progress): the job is queued
  // again and the attempt is undone — no attempts row, attempts - 1 — so it
  // does not count against max_attempts. Same lease checks as record_result.
  Status return_lease(int64_t job_id, int attempt, std::string_view worker_id, double now);

  // Ends every lease with deadline < now as expired ("lease expired at T"),
  // requeueing or killing each job by the rules above. Returns what changed,
  // ordered by job id.
  Result<std::vector<FailureOutcome>> expire_leases(double now);

  // The worker is gone (missed heartbeats, disconnected): every lease it holds
  // ends now as an expired attempt with `reason`, same rules. Ordered by job id.
  Result<std::vector<FailureOutcome>> release_worker_leases(std::string_view worker_id,
                                                            std::string_view reason, double now);

  // ---- cancel ------------------------------------------------------------------
  // Cancels every queued or leased job of the batch and marks the batch
  // cancelled (finished_at = now). NotFound for an unknown batch;
  // FailedPrecondition when the batch is already done or cancelled.
  Result<CancelOutcome> cancel_batch(int64_t batch_id, double now);
  // Cancels one queued or leased job (its batch may become done).
  // NotFound for an unknown job; FailedPrecondition when already terminal.
  Result<CancelOutcome> cancel_job(int64_t job_id, double now);

  // ---- stop, resume, fail (db/job_store_recovery.cpp) --------------------------
  // The newest batch queued from the manifest text with this sha256 (any
  // state); nullopt when there is none. For `hipq run` to resume it.
  Result<std::optional<BatchRecord>> latest_batch_of_manifest(std::string_view manifest_sha256);
  // Resuming a batch: its failed and dead jobs go back to queued (their
  // attempts rows stay; the next lease is attempt + 1) and a done batch is
  // active again (finished_at cleared). Returns how many jobs were requeued.
  // NotFound for an unknown batch; FailedPrecondition for a cancelled one.
  Result<int64_t> reopen_batch(int64_t batch_id, double now);
  // Interrupted run: every leased job of the batch goes back to queued, its
  // running attempt ends `cancelled` with `reason` (no attempt is used up for
  // good: a job leased again only counts the attempt number on). Returns how
  // many jobs were released.
  Result<int64_t> release_batch_leases(int64_t batch_id, std::string_view reason, double now);
  // A configuration error (unwritable output root, missing model) makes every
  // job of the batch fail the same way: every queued job ends `failed` at
  // once, with an attempts row (worker "coordinator", state failed) holding
  // `reason`, so the job's failure reason reads as any other. Leased jobs
  // finish or fail on their own. The batch is done once none is leased.
  // Returns how many jobs were failed.
  Result<int64_t> fail_queued_jobs(int64_t batch_id, std::string_view reason, double now);

  // ---- reads -------------------------------------------------------------------
  Result<BatchRecord> get_batch(int64_t batch_id);
  Result<JobRecord> get_job(int64_t job_id);
  Result<ManifestRecord> get_manifest(int64_t manifest_id);
  // Batches ordered by id; state filter optional; limit 0 = all.
  Result<std::vector<BatchRecord>> list_batches(std::optional<BatchState> state = std::nullopt,
                                                int64_t limit = 0);
  // Jobs of a batch ordered by ordinal.
  Result<std::vector<JobRecord>> list_jobs(int64_t batch_id);
  // Attempts of a job ordered by attempt.
  Result<std::vector<AttemptRecord>> list_attempts(int64_t job_id);
  // NotFound when the job has no result.
  Result<ResultRecord> get_result(int64_t job_id);
  Result<std::vector<PhaseTimingRecord>> list_phase_timings(int64_t attempt_id);
  Result<std::vector<StepTimingRecord>> list_step_timings(int64_t attempt_id);
  // Leases held now (state leased), ordered by job id: for a coordinator
  // restarting, to know which worker held what.
  Result<std::vector<CancelledLease>> list_leases();
  Result<BatchCounts> batch_counts(int64_t batch_id);
  // Counts for every batch (or every batch in `state`), ordered by id.
  Result<std::vector<BatchCounts>> all_batch_counts(std::optional<BatchState> state = std::nullopt);
  // Number of queued jobs (all batches).
  Result<int64_t> queued_count();

  // ---- workers -------------------------------------------------------------------
  // Inserts or updates the worker row: first_seen kept from the first call,
  // last_seen = now; the record's first_seen/last_seen fields are ignored.
  // The row keeps the first curve_key it was given (a record without one
  // leaves it as it is); PermissionDenied, changing nothing, when the row is
  // bound to another key than the record's.
  Status upsert_worker(const WorkerRecord& worker, double now);
  // The CURVE key `worker_id` is bound to; nullopt when it has none or the
  // id is not known.
  Result<std::optional<std::string>> worker_curve_key(std::string_view worker_id);
  // Unbinds `worker_id` from its key (an operator re-keying a worker); the
  // next CURVE hello under the id binds its own key. NotFound for an
  // unknown id.
  Status forget_worker_key(std::string_view worker_id);
  Status set_worker_state(std::string_view worker_id, std::string_view state, double now);
  Result<std::vector<WorkerRecord>> list_workers();  // ordered by id

 private:
  Database& db_;
};

}  // namespace hipq::db
