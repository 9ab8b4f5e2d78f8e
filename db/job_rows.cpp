#include "db/job_rows.h"

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

std::string loras_to_json(const std::vector<spec::LoraSpec>& loras, const std::vector<std::string>& sha256s) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < loras.size(); ++i)
    list.push_back({{"path", loras[i].path},
                    {"scale", loras[i].scale},
                    {"sha256", i < sha256s.size() ? sha256s[i] : std::string()}});
  return list.dump();
}

Result<std::pair<std::vector<spec::LoraSpec>, std::vector<std::string>>> loras_from_json(const std::string& text,
                                                                                      std::string_view what) {
  std::pair<std::vector<spec::LoraSpec>, std::vector<std::string>> out;
  nlohmann::json j = nlohmann::json::parse(text.empty() ? std::string("[]") : text, nullptr, false);
  if (!j.is_array()) return Status::Corruption(std::string(what) + ": not a JSON array: " + text.substr(0, 80));
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("sha256") || !e.at("sha256").is_string())
      return Status::Corruption(std::string(what) + ": entry " + e.dump() + " is not {path, scale, sha256}");
    nlohmann::json spec_json = e;
    spec_json.erase("sha256");
    auto l = spec::LoraSpec::from_json(spec_json);
    if (!l.ok()) return Status::Corruption(std::string(what) + ": " + l.status().message());
    out.first.push_back(*l);
    out.second.push_back(e.at("sha256").get<std::string>());
  }
  return out;
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
  j.rng = s.column_text(15);
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
  j.timestep_spacing = s.column_text(26);
  j.guidance_rescale = s.column_double(27);
  HIPQ_ASSIGN_OR_RETURN(auto loras, loras_from_json(s.column_text(28), "jobs.loras of job " + std::to_string(j.id)));
  j.loras = std::move(loras.first);
  j.inputs.loras = std::move(loras.second);
  j.init_image = s.column_text(29);
  j.inputs.init_image = s.column_text(30);
  j.strength = s.column_double(31);
  j.refiner = s.column_text(32);
  j.refiner_switch_at = s.column_double(33);
  j.aesthetic_score = s.column_double(34);
  j.negative_aesthetic_score = s.column_double(35);
  j.vae_precision = s.column_text(36);
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
  auto gate = spec::ParityGate::from_json(
      nlohmann::json::parse(s.column_text(9), nullptr, /*allow_exceptions=*/false));
  if (!gate.ok()) {
    return Status::Corruption("batches.parity_gate of batch " + std::to_string(b.id) + ": " +
                              gate.status().message());
  }
  b.parity_gate = *gate;
  b.allow_unpinned = s.column_bool(10);
  b.job_count = s.column_int64(11);
  b.created_at = s.column_double(12);
  b.finished_at = s.column_optional_double(13);
  return b;
}


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

Result<BatchState> read_batch_state(Database& db, int64_t batch_id) {
  static constexpr char kSelectBatchState[] = "SELECT state FROM batches WHERE id = ?";
  Statement s = db.prepare_cached(kSelectBatchState);
  s.bind_int64(0, batch_id);
  HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return Status::NotFound("batch " + std::to_string(batch_id) + " does not exist");
  return parse_batch_state(s.column_text(0));
}

Result<int64_t> move_batch_jobs(Database& db, int64_t batch_id, const char* attempts_sql,
                                std::string_view reason, const char* jobs_sql, double now) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db));
  HIPQ_RETURN_IF_ERROR(read_batch_state(db, batch_id).status());
  if (attempts_sql != nullptr) {
    Statement a = db.prepare_cached(attempts_sql);
    a.bind_double(0, now);
    a.bind_text(1, reason);
    a.bind_int64(2, batch_id);
    HIPQ_RETURN_IF_ERROR(a.run());
  }
  Statement j = db.prepare_cached(jobs_sql);
  j.bind_double(0, now);
  j.bind_int64(1, batch_id);
  HIPQ_RETURN_IF_ERROR(j.run());
  const int64_t moved = db.changes();
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return moved;
}

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

}  // namespace hipq::db
