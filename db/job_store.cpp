#include "db/job_store.h"

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
#include "db/statement.h"
#include "db/transaction.h"

namespace hipq::db {
namespace {

// ---- SQL ------------------------------------------------------------------
// Statements used by one function sit beside their binds in it; these are
// shared. Column lists are spelled once; readers below index them in order.

constexpr char kJobColumns[] =
    "id, batch_id, ordinal, model, prompt, negative_prompt, tags, seed, repeat_index, width, height, steps, "
    "guidance, sampler, precision, settings, golden_key, output_dir, priority, state, attempts, lease_worker, "
    "lease_deadline, verdict, created_at, updated_at";
constexpr char kBatchColumns[] =
    "id, manifest_id, name, priority, state, max_attempts, output_root, save, golden_source, parity_gate, "
    "allow_unpinned, job_count, created_at, finished_at";
constexpr char kSelectAttemptState[] = "SELECT id, state FROM attempts WHERE job_id = ? AND attempt = ?";
constexpr char kFinishAttempt[] =
    "UPDATE attempts SET state = ?, finished_at = ?, error = ? WHERE job_id = ? AND attempt = ?";
constexpr char kJobEndLease[] =
    "UPDATE jobs SET state = ?, lease_worker = NULL, lease_deadline = NULL, updated_at = ? WHERE id = ?";
constexpr char kSelectBatchState[] = "SELECT state FROM batches WHERE id = ?";

// ---- helpers ----------------------------------------------------------------

std::string format_time(double t) {
  if (!std::isfinite(t)) return "?";
  std::time_t secs = static_cast<std::time_t>(std::floor(t));
  int millis = static_cast<int>((t - std::floor(t)) * 1000.0);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

std::string to_json_array(const std::vector<std::string>& v) { return nlohmann::json(v).dump(); }

Result<std::vector<std::string>> parse_string_array(const std::string& text, std::string_view what) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return Status::Corruption(std::string(what) + " is not a JSON array: " + text);
  std::vector<std::string> out;
  for (const auto& e : j) {
    if (!e.is_string()) return Status::Corruption(std::string(what) + " holds a non-string: " + text);
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::string outputs_to_json(const std::vector<OutputFile>& outputs) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& o : outputs) {
    arr.push_back({{"kind", o.kind}, {"path", o.path}, {"sha256", o.sha256}, {"bytes", o.bytes}});
  }
  return arr.dump();
}

Result<std::vector<OutputFile>> outputs_from_json(const std::string& text, int64_t job_id) {
  auto bad = [&] {
    return Status::Corruption("results.outputs of job " + std::to_string(job_id) + " is malformed: " + text);
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array()) return bad();
  std::vector<OutputFile> out;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("kind") || !e["kind"].is_string() || !e.contains("path") ||
        !e["path"].is_string())
      return bad();
    OutputFile f;
    f.kind = e["kind"].get<std::string>();
    f.path = e["path"].get<std::string>();
    if (e.contains("sha256") && e["sha256"].is_string()) f.sha256 = e["sha256"].get<std::string>();
    if (e.contains("bytes") && e["bytes"].is_number_integer()) f.bytes = e["bytes"].get<int64_t>();
    out.push_back(std::move(f));
  }
  return out;
}

bool has_dotdot_or_absolute(const std::string& p) {
  std::filesystem::path path(p);
  if (p.empty() || path.is_absolute() || path.has_root_name() || path.has_root_directory()) return true;
  for (const auto& part : path)
    if (part == "..") return true;
  return false;
}

Result<JobRecord> read_job(const Statement& s) {
  JobRecord j;
  j.id = s.column_int64(0);
  j.batch_id = s.column_int64(1);
  j.ordinal = s.column_int64(2);
  j.model = s.column_text(3);
  j.prompt = s.column_text(4);
  j.negative_prompt = s.column_text(5);
  HIPQ_ASSIGN_OR_RETURN(j.tags, parse_string_array(s.column_text(6), "jobs.tags of job " + std::to_string(j.id)));
  j.seed = static_cast<uint64_t>(s.column_int64(7));
  j.repeat_index = s.column_int(8);
  j.width = s.column_int(9);
  j.height = s.column_int(10);
  j.steps = s.column_int(11);
  j.guidance = s.column_double(12);
  j.sampler = s.column_text(13);
  j.precision = s.column_text(14);
  j.settings_json = s.column_text(15);
  j.golden_key = s.column_optional_text(16);
  j.output_dir = s.column_text(17);
  j.priority = s.column_int(18);
  HIPQ_ASSIGN_OR_RETURN(j.state, parse_job_state(s.column_text(19)));
  j.attempts = s.column_int(20);
  j.lease_worker = s.column_optional_text(21);
  j.lease_deadline = s.column_optional_double(22);
  j.verdict = s.column_optional_text(23);
  j.created_at = s.column_double(24);
  j.updated_at = s.column_double(25);
  return j;
}

Result<BatchRecord> read_batch(const Statement& s) {
  BatchRecord b;
  b.id = s.column_int64(0);
  b.manifest_id = s.column_int64(1);
  b.name = s.column_text(2);
  b.priority = s.column_int(3);
  HIPQ_ASSIGN_OR_RETURN(b.state, parse_batch_state(s.column_text(4)));
  b.max_attempts = s.column_int(5);
  b.output_root = s.column_text(6);
  HIPQ_ASSIGN_OR_RETURN(b.save, parse_string_array(s.column_text(7), "batches.save of batch " + std::to_string(b.id)));
  b.golden_source = s.column_text(8);
  b.parity_gate_json = s.column_text(9);
  b.allow_unpinned = s.column_bool(10);
  b.job_count = s.column_int64(11);
  b.created_at = s.column_double(12);
  b.finished_at = s.column_optional_double(13);
  return b;
}

// The lease a report names, read inside the caller's transaction.
struct LeaseRow {
  JobState state = JobState::kQueued;
  int attempts = 0;
  std::optional<std::string> lease_worker;
  int64_t batch_id = 0;
  int max_attempts = 0;
};

Result<LeaseRow> read_lease_row(Database& db, int64_t job_id) {
  static constexpr char kSelectLeaseState[] =
      "SELECT j.state, j.attempts, j.lease_worker, j.batch_id, b.max_attempts FROM jobs j "
      "JOIN batches b ON b.id = j.batch_id WHERE j.id = ?";
  Statement s = db.prepare_cached(kSelectLeaseState);
  s.bind_int64(0, job_id);
  HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return Status::NotFound("job " + std::to_string(job_id) + " does not exist");
  LeaseRow r;
  HIPQ_ASSIGN_OR_RETURN(r.state, parse_job_state(s.column_text(0)));
  r.attempts = s.column_int(1);
  r.lease_worker = s.column_optional_text(2);
  r.batch_id = s.column_int64(3);
  r.max_attempts = s.column_int(4);
  return r;
}

// OK when (job, attempt, worker) is the job's current lease; otherwise
// AlreadyExists (that attempt's result is recorded) or FailedPrecondition.
Status check_current_lease(Database& db, int64_t job_id, int attempt, std::string_view worker_id,
                           const LeaseRow& r) {
  if (r.state == JobState::kLeased && r.attempts == attempt && r.lease_worker && *r.lease_worker == worker_id) {
    return Status::Ok();
  }
  std::string who = "job " + std::to_string(job_id) + " attempt " + std::to_string(attempt) + " (worker " +
                    std::string(worker_id) + ")";
  Statement a = db.prepare_cached(kSelectAttemptState);
  a.bind_int64(0, job_id);
  a.bind_int64(1, attempt);
  HIPQ_ASSIGN_OR_RETURN(bool row, a.step());
  if (row && a.column_text(1) == "done") {
    return Status::AlreadyExists(who + ": a result for this attempt is already recorded");
  }
  std::string now_is = "the job is " + std::string(job_state_name(r.state));
  if (r.state == JobState::kLeased) {
    now_is += " by attempt " + std::to_string(r.attempts) + " of worker " + r.lease_worker.value_or("?");
  }
  std::string attempt_note = row ? " (that attempt ended " + a.column_text(1) + ")" : " (no such attempt)";
  return Status::FailedPrecondition(who + " is not the current lease: " + now_is + attempt_note);
}

// Replaces every "{batch_id}" in a job folder by the batch's id.
std::string resolve_batch_id(std::string dir, int64_t batch_id) {
  static constexpr std::string_view kToken = "{batch_id}";
  const std::string id = std::to_string(batch_id);
  for (size_t at = dir.find(kToken); at != std::string::npos; at = dir.find(kToken, at + id.size())) {
    dir.replace(at, kToken.size(), id);
  }
  return dir;
}

Status finish_batch_if_drained(Database& db, int64_t batch_id, double now) {
  static constexpr char kFinishBatchIfDrained[] =
      "UPDATE batches SET state = 'done', finished_at = ? WHERE id = ? AND state = 'active' AND NOT EXISTS "
      "(SELECT 1 FROM jobs WHERE batch_id = ? AND state IN ('queued', 'leased'))";
  Statement s = db.prepare_cached(kFinishBatchIfDrained);
  s.bind_double(0, now);
  s.bind_int64(1, batch_id);
  s.bind_int64(2, batch_id);
  return s.run();
}

// Ends the current attempt of a leased job and moves the job on: queued while
// attempts remain (and the error is retryable), else dead, or failed at once.
Result<FailureOutcome> end_attempt(Database& db, int64_t job_id, const LeaseRow& r, AttemptState attempt_state,
                                   std::string_view error, bool retryable, double now) {
  Statement a = db.prepare_cached(kFinishAttempt);
  a.bind_text(0, attempt_state_name(attempt_state));
  a.bind_double(1, now);
  a.bind_text(2, error);
  a.bind_int64(3, job_id);
  a.bind_int64(4, r.attempts);
  HIPQ_RETURN_IF_ERROR(a.run());

  FailureOutcome out;
  out.job_id = job_id;
  out.attempt = r.attempts;
  out.worker_id = r.lease_worker.value_or("");
  if (!retryable) {
    out.new_state = JobState::kFailed;
  } else if (r.attempts < r.max_attempts) {
    out.new_state = JobState::kQueued;
  } else {
    out.new_state = JobState::kDead;
  }
  Statement j = db.prepare_cached(kJobEndLease);
  j.bind_text(0, job_state_name(out.new_state));
  j.bind_double(1, now);
  j.bind_int64(2, job_id);
  HIPQ_RETURN_IF_ERROR(j.run());
  if (is_terminal(out.new_state)) HIPQ_RETURN_IF_ERROR(finish_batch_if_drained(db, r.batch_id, now));
  return out;
}

struct LeaseToEnd {
  int64_t job_id;
  LeaseRow row;
  double deadline;
};

Result<std::vector<LeaseToEnd>> collect_leases(Statement& s) {
  std::vector<LeaseToEnd> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    LeaseToEnd e;
    e.job_id = s.column_int64(0);
    e.row.state = JobState::kLeased;
    e.row.attempts = s.column_int(1);
    e.row.lease_worker = s.column_optional_text(2);
    e.row.batch_id = s.column_int64(3);
    e.row.max_attempts = s.column_int(4);
    e.deadline = s.column_double(5);
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<CancelledLease>> collect_cancelled(Statement& s) {
  std::vector<CancelledLease> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back({s.column_int64(0), s.column_int(1), s.column_text(2)});
  }
  return out;
}

}  // namespace

// ---- intake -------------------------------------------------------------------

Result<int64_t> JobStore::insert_batch(const NewBatch& batch, double now) {
  if (batch.jobs.empty()) return Status::InvalidArgument("batch '" + batch.name + "' has no jobs");
  if (batch.max_attempts < 1) {
    return Status::InvalidArgument("batch '" + batch.name + "': max_attempts must be >= 1, got " +
                                   std::to_string(batch.max_attempts));
  }
  if (!std::filesystem::path(batch.output_root).is_absolute()) {
    return Status::InvalidArgument("batch '" + batch.name + "': output root '" + batch.output_root +
                                   "' must be an absolute path");
  }
  std::set<int64_t> ordinals;
  for (const auto& job : batch.jobs) {
    if (has_dotdot_or_absolute(job.output_dir)) {
      return Status::InvalidArgument("batch '" + batch.name + "' job " + std::to_string(job.ordinal) +
                                     ": output dir '" + job.output_dir +
                                     "' must be a relative path inside the output root (no '..')");
    }
    if (!ordinals.insert(job.ordinal).second) {
      return Status::InvalidArgument("batch '" + batch.name + "': job ordinal " + std::to_string(job.ordinal) +
                                     " appears twice");
    }
  }

  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  std::string sha = sha256_hex(batch.manifest_text);
  {
    static constexpr char kInsertManifest[] =
        "INSERT INTO manifests (sha256, path, text, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING";
    Statement m = db_.prepare_cached(kInsertManifest);
    m.bind_text(0, sha);
    m.bind_text(1, batch.manifest_path);
    m.bind_text(2, batch.manifest_text);
    m.bind_double(3, now);
    HIPQ_RETURN_IF_ERROR(m.run());
  }
  int64_t manifest_id = 0;
  {
    static constexpr char kSelectManifestIdBySha[] = "SELECT id FROM manifests WHERE sha256 = ?";
    Statement m = db_.prepare_cached(kSelectManifestIdBySha);
    m.bind_text(0, sha);
    HIPQ_ASSIGN_OR_RETURN(bool row, m.step());
    if (!row) return Status::Internal("manifest " + sha + " vanished inside its own transaction");
    manifest_id = m.column_int64(0);
  }
  int64_t batch_id = 0;
  {
    static constexpr char kInsertBatch[] =
        "INSERT INTO batches (manifest_id, name, priority, state, max_attempts, output_root, save, golden_source, "
        "parity_gate, allow_unpinned, job_count, created_at) VALUES (?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?, ?)";
    Statement b = db_.prepare_cached(kInsertBatch);
    b.bind_int64(0, manifest_id);
    b.bind_text(1, batch.name);
    b.bind_int(2, batch.priority);
    b.bind_int(3, batch.max_attempts);
    b.bind_text(4, batch.output_root);
    b.bind_text(5, to_json_array(batch.save));
    b.bind_text(6, batch.golden_source);
    b.bind_text(7, batch.parity_gate_json.empty() ? "{}" : batch.parity_gate_json);
    b.bind_bool(8, batch.allow_unpinned);
    b.bind_int64(9, static_cast<int64_t>(batch.jobs.size()));
    b.bind_double(10, now);
    HIPQ_RETURN_IF_ERROR(b.run());
    batch_id = db_.last_insert_rowid();
  }
  // Folders with "{batch_id}" resolved.
  std::vector<std::string> dirs;
  dirs.reserve(batch.jobs.size());
  for (const auto& job : batch.jobs) dirs.push_back(resolve_batch_id(job.output_dir, batch_id));
  static constexpr char kInsertJob[] =
      "INSERT INTO jobs (batch_id, ordinal, model, prompt, negative_prompt, tags, seed, repeat_index, width, height, "
      "steps, guidance, sampler, precision, settings, golden_key, output_dir, priority, state, attempts, created_at, "
      "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?)";
  Statement s = db_.prepare_cached(kInsertJob);
  for (size_t i = 0; i < batch.jobs.size(); ++i) {
    const NewJob& job = batch.jobs[i];
    s.reset();
    s.bind_int64(0, batch_id);
    s.bind_int64(1, job.ordinal);
    s.bind_text(2, job.model);
    s.bind_text(3, job.prompt);
    s.bind_text(4, job.negative_prompt);
    s.bind_text(5, to_json_array(job.tags));
    s.bind_int64(6, static_cast<int64_t>(job.seed));
    s.bind_int(7, job.repeat_index);
    s.bind_int(8, job.width);
    s.bind_int(9, job.height);
    s.bind_int(10, job.steps);
    s.bind_double(11, job.guidance);
    s.bind_text(12, job.sampler);
    s.bind_text(13, job.precision);
    s.bind_text(14, job.settings_json);
    s.bind_optional_text(15, job.golden_key);
    s.bind_text(16, dirs[i]);
    s.bind_int(17, batch.priority);
    s.bind_double(18, now);
    s.bind_double(19, now);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return batch_id;
}

Status JobStore::check_folders_free(const NewBatch& batch) {
  static constexpr char kSelectFoldersUnderRoot[] =
      "SELECT j.output_dir, j.batch_id, b.name FROM jobs j JOIN batches b ON b.id = j.batch_id "
      "WHERE b.output_root = ? ORDER BY j.id";
  std::unordered_map<std::string, std::pair<int64_t, std::string>> used;
  Statement u = db_.prepare_cached(kSelectFoldersUnderRoot);
  u.bind_text(0, batch.output_root);
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, u.step());
    if (!row) break;
    used.emplace(u.column_text(0), std::make_pair(u.column_int64(1), u.column_text(2)));
  }
  if (used.empty()) return Status::Ok();
  for (const auto& job : batch.jobs) {
    // A folder with the new batch's id in it is the new batch's own.
    if (job.output_dir.find("{batch_id}") != std::string::npos) continue;
    auto it = used.find(job.output_dir);
    if (it == used.end()) continue;
    return Status::AlreadyExists("batch '" + batch.name + "': job folder '" +
                                 (std::filesystem::path(batch.output_root) / job.output_dir).string() +
                                 "' belongs to batch " + std::to_string(it->second.first) + " \"" +
                                 it->second.second + "\"; its files would be overwritten. Put {batch_id} in "
                                 "outputs.layout (the default layout has it) or choose another outputs.directory");
  }
  return Status::Ok();
}

// ---- dispatch -------------------------------------------------------------------

Result<std::optional<LeasedJob>> JobStore::lease_next(std::string_view worker_id,
                                                      const std::vector<std::string>& loaded_models, double now,
                                                      double lease_seconds) {
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
  // Affinity: the oldest job at this priority whose model the worker holds.
  // One indexed probe per loaded model (a worker holds few).
  std::optional<int64_t> job_id;
  {
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
  {
    static constexpr char kLeaseJob[] =
        "UPDATE jobs SET state = 'leased', attempts = attempts + 1, lease_worker = ?, lease_deadline = ?, "
        "updated_at = ? WHERE id = ? AND state = 'queued'";
    Statement u = db_.prepare_cached(kLeaseJob);
    u.bind_text(0, worker_id);
    u.bind_double(1, deadline);
    u.bind_double(2, now);
    u.bind_int64(3, *job_id);
    HIPQ_RETURN_IF_ERROR(u.run());
    if (db_.changes() != 1) return Status::Internal("job " + std::to_string(*job_id) + " was not queued");
  }
  LeasedJob leased;
  {
    Statement j = db_.prepare_cached(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?");
    j.bind_int64(0, *job_id);
    HIPQ_ASSIGN_OR_RETURN(bool row, j.step());
    if (!row) return Status::Internal("leased job " + std::to_string(*job_id) + " vanished");
    HIPQ_ASSIGN_OR_RETURN(leased.job, read_job(j));
  }
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

Status JobStore::record_result(const JobResult& result, double now) {
  if (result.verdict.empty()) {
    return Status::InvalidArgument("result for job " + std::to_string(result.job_id) + " has no verdict");
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
    Statement a = db_.prepare_cached(kSelectAttemptState);
    a.bind_int64(0, result.job_id);
    a.bind_int(1, result.attempt);
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
        "parity_reason, outputs, peak_memory_bytes, warm, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
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
    Statement s = db_.prepare_cached(kFinishAttempt);
    s.bind_text(0, attempt_state_name(AttemptState::kDone));
    s.bind_double(1, now);
    s.bind_null(2);
    s.bind_int64(3, result.job_id);
    s.bind_int(4, result.attempt);
    HIPQ_RETURN_IF_ERROR(s.run());
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
  {
    Statement s = db_.prepare_cached(kSelectBatchState);
    s.bind_int64(0, batch_id);
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) return Status::NotFound("batch " + std::to_string(batch_id) + " does not exist");
    if (s.column_text(0) != "active") {
      return Status::FailedPrecondition("batch " + std::to_string(batch_id) + " is already " + s.column_text(0));
    }
  }
  CancelOutcome out;
  {
    static constexpr char kSelectBatchLeases[] =
        "SELECT id, attempts, lease_worker FROM jobs WHERE batch_id = ? AND state = 'leased' ORDER BY id";
    Statement s = db_.prepare_cached(kSelectBatchLeases);
    s.bind_int64(0, batch_id);
    HIPQ_ASSIGN_OR_RETURN(out.leases, collect_cancelled(s));
  }
  {
    static constexpr char kCancelBatchAttempts[] =
        "UPDATE attempts SET state = 'cancelled', finished_at = ?, error = ? WHERE state = 'running' AND job_id IN "
        "(SELECT id FROM jobs WHERE batch_id = ? AND state = 'leased')";
    Statement s = db_.prepare_cached(kCancelBatchAttempts);
    s.bind_double(0, now);
    s.bind_text(1, "batch " + std::to_string(batch_id) + " cancelled");
    s.bind_int64(2, batch_id);
    HIPQ_RETURN_IF_ERROR(s.run());
  }
  {
    static constexpr char kCancelBatchJobs[] =
        "UPDATE jobs SET state = 'cancelled', lease_worker = NULL, lease_deadline = NULL, updated_at = ? "
        "WHERE batch_id = ? AND state IN ('queued', 'leased')";
    Statement s = db_.prepare_cached(kCancelBatchJobs);
    s.bind_double(0, now);
    s.bind_int64(1, batch_id);
    HIPQ_RETURN_IF_ERROR(s.run());
    out.jobs_cancelled = db_.changes();
  }
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
      "peak_memory_bytes, warm, golden_key, parity_reason, recorded_at FROM results WHERE job_id = ?";
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
  return r;
}

Result<std::vector<PhaseTimingRecord>> JobStore::list_phase_timings(int64_t attempt_id) {
  // In the one phase order (sort_phase_timings), not the key's.
  static constexpr char kSelectPhaseTimings[] = "SELECT phase, host_ms, gpu_ms FROM phase_timings WHERE attempt_id = ?";
  Statement s = db_.prepare_cached(kSelectPhaseTimings);
  s.bind_int64(0, attempt_id);
  std::vector<PhaseTimingRecord> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back({s.column_text(0), s.column_double(1), s.column_optional_double(2)});
  }
  sort_phase_timings(out);
  return out;
}

Result<std::vector<StepTimingRecord>> JobStore::list_step_timings(int64_t attempt_id) {
  static constexpr char kSelectStepTimings[] =
      "SELECT step, host_ms, gpu_ms FROM step_timings WHERE attempt_id = ? ORDER BY step";
  Statement s = db_.prepare_cached(kSelectStepTimings);
  s.bind_int64(0, attempt_id);
  std::vector<StepTimingRecord> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back({s.column_int(0), s.column_double(1), s.column_optional_double(2)});
  }
  return out;
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
  {
    Statement s = db_.prepare_cached(kSelectBatchState);
    s.bind_int64(0, batch_id);
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) return Status::NotFound("batch " + std::to_string(batch_id) + " does not exist");
    HIPQ_ASSIGN_OR_RETURN(c.state, parse_batch_state(s.column_text(0)));
  }
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

// ---- workers -------------------------------------------------------------------------

Status JobStore::upsert_worker(const WorkerRecord& w, double now) {
  if (w.id.empty()) return Status::InvalidArgument("upsert_worker: empty worker id");
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  static constexpr char kUpsertWorker[] =
      "INSERT INTO workers (id, host, device_index, device_name, arch, memory_bytes, runtime_version, "
      "driver_version, build_sha, backend, first_seen, last_seen, state) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET host = excluded.host, "
      "device_index = excluded.device_index, device_name = excluded.device_name, arch = excluded.arch, "
      "memory_bytes = excluded.memory_bytes, runtime_version = excluded.runtime_version, "
      "driver_version = excluded.driver_version, build_sha = excluded.build_sha, backend = excluded.backend, "
      "last_seen = excluded.last_seen, state = excluded.state";
  Statement s = db_.prepare_cached(kUpsertWorker);
  s.bind_text(0, w.id);
  s.bind_text(1, w.host);
  s.bind_int(2, w.device_index);
  s.bind_text(3, w.device_name);
  s.bind_text(4, w.arch);
  s.bind_int64(5, w.memory_bytes);
  s.bind_text(6, w.runtime_version);
  s.bind_text(7, w.driver_version);
  s.bind_text(8, w.build_sha);
  s.bind_text(9, w.backend);
  s.bind_double(10, now);
  s.bind_double(11, now);
  s.bind_text(12, w.state);
  HIPQ_RETURN_IF_ERROR(s.run());
  return txn.commit();
}

Status JobStore::set_worker_state(std::string_view worker_id, std::string_view state, double now) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  static constexpr char kSetWorkerState[] = "UPDATE workers SET state = ?, last_seen = ? WHERE id = ?";
  Statement s = db_.prepare_cached(kSetWorkerState);
  s.bind_text(0, state);
  s.bind_double(1, now);
  s.bind_text(2, worker_id);
  HIPQ_RETURN_IF_ERROR(s.run());
  if (db_.changes() == 0) return Status::NotFound("worker " + std::string(worker_id) + " is not known");
  return txn.commit();
}

Result<std::vector<WorkerRecord>> JobStore::list_workers() {
  static constexpr char kSelectWorkers[] =
      "SELECT id, host, device_index, device_name, arch, memory_bytes, runtime_version, driver_version, build_sha, "
      "backend, first_seen, last_seen, state FROM workers ORDER BY id";
  Statement s = db_.prepare_cached(kSelectWorkers);
  std::vector<WorkerRecord> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    WorkerRecord w;
    w.id = s.column_text(0);
    w.host = s.column_text(1);
    w.device_index = s.column_int(2);
    w.device_name = s.column_text(3);
    w.arch = s.column_text(4);
    w.memory_bytes = s.column_int64(5);
    w.runtime_version = s.column_text(6);
    w.driver_version = s.column_text(7);
    w.build_sha = s.column_text(8);
    w.backend = s.column_text(9);
    w.first_seen = s.column_double(10);
    w.last_seen = s.column_double(11);
    w.state = s.column_text(12);
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace hipq::db
