// The rows the job store's files share (db/job_store.h is the API; its
// methods live in job_store_intake.cpp, job_store_dispatch.cpp,
// job_store_reads.cpp, job_store_workers.cpp and job_store_recovery.cpp):
// the column lists and the statements more than one of them runs, the row
// readers, and the lease rules every report goes through. Internal to db/.
// Thread safety: as the Database each function is given.
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
class Statement;

// Column lists are spelled once; readers below index them in order.
inline constexpr char kJobColumns[] =
    "id, batch_id, ordinal, model, prompt, negative_prompt, tags, seed, repeat_index, width, height, steps, "
    "guidance, sampler, precision, rng, golden_key, output_dir, priority, state, attempts, lease_worker, "
    "lease_deadline, verdict, created_at, updated_at, timestep_spacing, guidance_rescale, loras, init_image, "
    "init_image_sha256, strength, refiner, refiner_switch_at, aesthetic_score, negative_aesthetic_score, "
    "vae_precision";
inline constexpr char kBatchColumns[] =
    "id, manifest_id, name, priority, state, max_attempts, output_root, save, golden_source, parity_gate, "
    "allow_unpinned, job_count, created_at, finished_at";
inline constexpr char kSelectAttemptState[] = "SELECT id, state FROM attempts WHERE job_id = ? AND attempt = ?";
inline constexpr char kFinishAttempt[] =
    "UPDATE attempts SET state = ?, finished_at = ?, error = ? WHERE job_id = ? AND attempt = ?";
inline constexpr char kJobEndLease[] =
    "UPDATE jobs SET state = ?, lease_worker = NULL, lease_deadline = NULL, updated_at = ? WHERE id = ?";
// The running attempts of a batch's leased jobs end cancelled; binds (now, reason, batch id).
inline constexpr char kCancelLeasedAttempts[] =
    "UPDATE attempts SET state = 'cancelled', finished_at = ?, error = ? WHERE state = 'running' "
    "AND job_id IN (SELECT id FROM jobs WHERE batch_id = ? AND state = 'leased')";

// A job's lease as the checks of a report see it.
struct LeaseRow {
  JobState state = JobState::kQueued;
  int attempts = 0;
  std::optional<std::string> lease_worker;
  int64_t batch_id = 0;
  int max_attempts = 0;
};

// A lease expire_leases / release_worker_leases end.
struct LeaseToEnd {
  int64_t job_id;
  LeaseRow row;
  double deadline;
};

// "2026-01-01T00:00:00.000Z" for messages ("?" when not finite).
std::string format_time(double t);
std::string to_json_array(const std::vector<std::string>& v);
// Corruption naming `what` when `text` is no JSON array of strings.
Result<std::vector<std::string>> parse_string_array(const std::string& text, std::string_view what);
std::string outputs_to_json(const std::vector<OutputFile>& outputs);
Result<std::vector<OutputFile>> outputs_from_json(const std::string& text, int64_t job_id);
bool has_dotdot_or_absolute(const std::string& p);
// A row of kJobColumns / kBatchColumns.
// jobs.loras: [{"path","scale","sha256"}], the LoRAs with their submitted digests.
std::string loras_to_json(const std::vector<spec::LoraSpec>& loras, const std::vector<std::string>& sha256s);
// Corruption naming `what` for text that is not that array.
Result<std::pair<std::vector<spec::LoraSpec>, std::vector<std::string>>> loras_from_json(const std::string& text,
                                                                                      std::string_view what);
Result<JobRecord> read_job(const Statement& s);
Result<BatchRecord> read_batch(const Statement& s);
// The lease a report names, read inside the caller's transaction.
Result<LeaseRow> read_lease_row(Database& db, int64_t job_id);
// OK when (job, attempt, worker) is the job's current lease; otherwise
// AlreadyExists (that attempt's result is recorded) or FailedPrecondition.
Status check_current_lease(Database& db, int64_t job_id, int attempt, std::string_view worker_id,
                           const LeaseRow& r);
// Replaces every "{batch_id}" in a job folder by the batch's id.
std::string resolve_batch_id(std::string dir, int64_t batch_id);
Status finish_batch_if_drained(Database& db, int64_t batch_id, double now);
// The batch's state; NotFound for an unknown batch.
Result<BatchState> read_batch_state(Database& db, int64_t batch_id);
// One batch-wide move in one write transaction (a savepoint inside the
// caller's): `attempts_sql` (binds: now, reason, batch id; nullptr for none)
// writes the attempts of the jobs about to move, then `jobs_sql` (binds: now,
// batch id) moves them. Returns how many jobs moved; NotFound for an unknown
// batch (nothing written).
Result<int64_t> move_batch_jobs(Database& db, int64_t batch_id, const char* attempts_sql,
                                std::string_view reason, const char* jobs_sql, double now);
// Ends the current attempt of a leased job and moves the job on: queued while
// attempts remain (and the error is retryable), else dead, or failed at once.
Result<FailureOutcome> end_attempt(Database& db, int64_t job_id, const LeaseRow& r, AttemptState attempt_state,
                                   std::string_view error, bool retryable, double now);
// Rows of (job id, attempts, lease_worker, batch id, max_attempts, deadline).
Result<std::vector<LeaseToEnd>> collect_leases(Statement& s);
// Rows of (job id, attempt, worker).
Result<std::vector<CancelledLease>> collect_cancelled(Statement& s);

}  // namespace hipq::db
