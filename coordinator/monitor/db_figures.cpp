#include "coordinator/monitor/db_figures.h"

#include <algorithm>
#include <set>

#include "coordinator/monitor/metrics.h"
#include "db/database.h"
#include "db/statement.h"
#include "db/transaction.h"

namespace hipq::coordinator::monitor {

std::string reason_class_of_attempt(const std::string& attempt_state, const std::string& error) {
  if (attempt_state == "expired") return "lease_expired";
  if (error.rfind("not run:", 0) == 0) return "batch_configuration";
  const size_t colon = error.find(':');
  if (colon != std::string::npos) {
    std::string cls = reason_class_of_code(error.substr(0, colon));
    if (cls != "other") return cls;
  }
  return "other";
}

DbReader::DbReader(std::unique_ptr<db::Database> db, std::chrono::milliseconds min_interval)
    : db_(std::move(db)), min_interval_(min_interval) {}

DbReader::~DbReader() = default;

Result<std::unique_ptr<DbReader>> DbReader::open(const std::filesystem::path& db_path,
                                                  std::chrono::milliseconds min_interval) {
  db::Database::Options o;
  o.must_exist = true;
  o.read_only = true;
  o.busy_timeout = std::chrono::milliseconds(2000);
  HIPQ_ASSIGN_OR_RETURN(auto db, db::Database::open(db_path, o));
  return std::unique_ptr<DbReader>(new DbReader(std::move(db), min_interval));
}

Result<std::shared_ptr<const DbFigures>> DbReader::read() {
  const auto now = std::chrono::steady_clock::now();
  if (cached_ && now - cached_at_ < min_interval_) return cached_;
  HIPQ_ASSIGN_OR_RETURN(DbFigures f, read_now());
  cached_ = std::make_shared<const DbFigures>(std::move(f));
  cached_at_ = now;
  return cached_;
}

namespace {

// Runs `sql` (with `binds` as int64 parameters) and calls `row` per row.
template <typename RowFn>
Status each_row(db::Database& db, const char* sql, const std::vector<int64_t>& binds, RowFn row) {
  db::Statement s = db.prepare_cached(sql);
  for (size_t i = 0; i < binds.size(); ++i) s.bind_int64(static_cast<int>(i), binds[i]);
  for (;;) {
    HIPQ_ASSIGN_OR_RETURN(bool more, s.step());
    if (!more) return Status::Ok();
    row(s);
  }
}

int64_t finished_of(const BatchFigures& b) {
  auto at = [&](const char* k) {
    auto it = b.by_state.find(k);
    return it == b.by_state.end() ? int64_t{0} : it->second;
  };
  return at("done") + at("failed") + at("dead");
}

}  // namespace

void DbReader::estimate_pace(DbFigures& f) {
  constexpr double kWindowS = 60;
  std::set<int64_t> seen;
  for (auto& b : f.batches) {
    seen.insert(b.id);
    const int64_t finished = finished_of(b);
    auto& samples = pace_[b.id];
    samples.emplace_back(f.read_unix, finished);
    while (samples.size() > 2 && samples[1].first < f.read_unix - kWindowS) samples.erase(samples.begin());
    double rate = 0;
    if (samples.size() >= 2 && samples.back().first - samples.front().first > 0.5) {
      rate = static_cast<double>(samples.back().second - samples.front().second) /
             (samples.back().first - samples.front().first);
    } else if (f.read_unix > b.created_unix) {
      rate = static_cast<double>(finished) / (f.read_unix - b.created_unix);
    }
    b.finished_per_s = std::max(0.0, rate);
    const int64_t left = b.total - finished - (b.by_state.count("cancelled") ? b.by_state.at("cancelled") : 0);
    if (b.state == "active" && left > 0 && b.finished_per_s > 0) b.eta_s = static_cast<double>(left) / b.finished_per_s;
  }
  for (auto it = pace_.begin(); it != pace_.end();) it = seen.count(it->first) ? std::next(it) : pace_.erase(it);
}

Result<DbFigures> DbReader::read_now() {
  const auto t0 = std::chrono::steady_clock::now();
  DbFigures f;
  f.read_unix = db::wall_clock_seconds();
  // One read transaction: every figure below is of the same committed state.
  HIPQ_ASSIGN_OR_RETURN(auto txn, db::Transaction::begin_deferred(*db_));

  // Every job, by state (the index jobs_by_batch_state covers it).
  static constexpr char kJobsByState[] = "SELECT state, COUNT(*) FROM jobs GROUP BY state";
  HIPQ_RETURN_IF_ERROR(each_row(*db_, kJobsByState, {}, [&](db::Statement& s) {
    f.jobs_by_state[s.column_text(0)] = s.column_int64(1);
  }));

  // Active batches and the last finished ones.
  static constexpr char kBatches[] =
      "SELECT id, name, state, priority, job_count, created_at, finished_at FROM batches "
      "WHERE state = 'active' OR id IN (SELECT id FROM batches WHERE state <> 'active' ORDER BY id DESC LIMIT ?) "
      "ORDER BY id";
  HIPQ_RETURN_IF_ERROR(each_row(*db_, kBatches, {kRecentFinishedBatches}, [&](db::Statement& s) {
    BatchFigures b;
    b.id = s.column_int64(0);
    b.name = s.column_text(1);
    b.state = s.column_text(2);
    b.priority = s.column_int(3);
    b.total = s.column_int64(4);
    b.created_unix = s.column_double(5);
    b.finished_unix = s.column_optional_double(6);
    f.batches.push_back(std::move(b));
  }));
  for (auto& b : f.batches) {
    static constexpr char kBatchStates[] = "SELECT state, COUNT(*) FROM jobs WHERE batch_id = ? GROUP BY state";
    HIPQ_RETURN_IF_ERROR(each_row(*db_, kBatchStates, {b.id}, [&](db::Statement& s) {
      b.by_state[s.column_text(0)] = s.column_int64(1);
    }));
  }

  // Attempts by state, and how many were retries (attempt 2 or later).
  static constexpr char kAttempts[] = "SELECT state, attempt > 1, COUNT(*) FROM attempts GROUP BY 1, 2";
  HIPQ_RETURN_IF_ERROR(each_row(*db_, kAttempts, {}, [&](db::Statement& s) {
    f.attempts_by_state[s.column_text(0)] += s.column_int64(2);
    if (s.column_bool(1)) f.retries += s.column_int64(2);
  }));

  static constexpr char kVerdicts[] = "SELECT verdict, COUNT(*) FROM results GROUP BY verdict";
  HIPQ_RETURN_IF_ERROR(each_row(*db_, kVerdicts, {}, [&](db::Statement& s) {
    f.verdicts[s.column_text(0)] = s.column_int64(1);
  }));

  // Failed and dead jobs by the reason class of their latest attempt. The
  // batch_id IN (...) lets SQLite seek jobs_by_batch_state per batch and
  // state instead of reading every job.
  static constexpr char kEnded[] =
      "SELECT j.state, a.state, a.error FROM jobs j "
      "JOIN attempts a ON a.job_id = j.id AND a.attempt = j.attempts "
      "WHERE j.batch_id IN (SELECT id FROM batches) AND j.state IN ('failed', 'dead')";
  for (const char* st : {"failed", "dead"}) f.ended_by_reason[st];
  HIPQ_RETURN_IF_ERROR(each_row(*db_, kEnded, {}, [&](db::Statement& s) {
    ++f.ended_by_reason[s.column_text(0)][reason_class_of_attempt(s.column_text(1),
                                                                  s.column_optional_text(2).value_or(""))];
  }));

  // The newest attempts that ended without a result.
  static constexpr char kRecentFailuresSql[] =
      "SELECT a.job_id, a.attempt, j.batch_id, a.worker_id, a.state, a.error, j.prompt, "
      "COALESCE(a.finished_at, a.started_at) FROM attempts a JOIN jobs j ON j.id = a.job_id "
      "WHERE a.state IN ('failed', 'expired') ORDER BY a.id DESC LIMIT ?";
  HIPQ_RETURN_IF_ERROR(each_row(*db_, kRecentFailuresSql, {kRecentFailures}, [&](db::Statement& s) {
    FailureRow r;
    r.job_id = s.column_int64(0);
    r.attempt = s.column_int(1);
    r.batch_id = s.column_int64(2);
    r.worker_id = s.column_text(3);
    r.state = s.column_text(4);
    r.error = s.column_optional_text(5).value_or("");
    r.reason_class = reason_class_of_attempt(r.state, r.error);
    r.prompt = s.column_text(6);
    r.finished_unix = s.column_double(7);
    f.recent_failures.push_back(std::move(r));
  }));

  // The leased jobs (a small partial index: one per busy worker).
  static constexpr char kLeased[] =
      "SELECT id, batch_id, prompt, seed, steps FROM jobs WHERE state = 'leased' ORDER BY id LIMIT ?";
  HIPQ_RETURN_IF_ERROR(each_row(*db_, kLeased, {kMaxLeasedRows}, [&](db::Statement& s) {
    RunningJob j;
    j.job_id = s.column_int64(0);
    j.batch_id = s.column_int64(1);
    j.prompt = s.column_text(2);
    j.seed = s.column_int64(3);
    j.steps = s.column_int(4);
    f.leased[j.job_id] = std::move(j);
  }));
  HIPQ_RETURN_IF_ERROR(txn.commit());
  estimate_pace(f);
  f.read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return f;
}

}  // namespace hipq::coordinator::monitor
