// DbFigures: the monitor's reads of the database — job counts by state and
// batch, attempts, verdicts, failed and dead jobs by reason class, recent
// failures and the jobs workers run — on a read-only connection of its own
// (WAL: readers never block the coordinator's writer, nor it them).
//
// A read is a handful of aggregate queries over indexed columns, all in one
// read transaction so they agree with each other. DbReader caches the last
// read for `min_interval` so a flood of scrapes costs one read per interval.
//
// Ownership: DbReader owns its connection. Thread safety: one thread (the
// monitor's HTTP thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace hipq::db {
class Database;
}

namespace hipq::coordinator::monitor {

struct BatchFigures {
  int64_t id = 0;
  std::string name;
  std::string state;                         // active | done | cancelled ...
  int priority = 0;
  int64_t total = 0;
  std::map<std::string, int64_t> by_state;   // queued, leased, done, failed, dead, cancelled
  double created_unix = 0;
  std::optional<double> finished_unix;
  // Jobs finished (done, failed, dead) per second over the last minute of
  // reads (since its creation at the first read), and the seconds left at
  // that pace; none when nothing finished yet or nothing is left.
  double finished_per_s = 0;
  std::optional<double> eta_s;
};

struct FailureRow {
  int64_t job_id = 0;
  int attempt = 0;
  int64_t batch_id = 0;
  std::string worker_id;
  std::string state;                         // attempt state: failed | expired | cancelled
  std::string error;
  std::string reason_class;
  std::string prompt;
  double finished_unix = 0;
};

struct RunningJob {
  int64_t job_id = 0;
  int64_t batch_id = 0;
  std::string prompt;
  int64_t seed = 0;
  int steps = 0;
};

struct DbFigures {
  double read_unix = 0;
  double read_seconds = 0;                   // how long the read took
  std::map<std::string, int64_t> jobs_by_state;    // every job in the database
  std::vector<BatchFigures> batches;               // active ones and the last finished ones
  std::map<std::string, int64_t> attempts_by_state;
  int64_t retries = 0;                             // attempts numbered 2 or more
  std::map<std::string, int64_t> verdicts;         // results by verdict
  // failed and dead jobs by state, then reason class of their latest attempt
  std::map<std::string, std::map<std::string, int64_t>> ended_by_reason;
  std::vector<FailureRow> recent_failures;         // newest first
  std::map<int64_t, RunningJob> leased;            // leased jobs by id (at most kMaxLeasedRows)
};

// The reason class of a failed/dead job's latest attempt: "lease_expired"
// (attempt state expired), the status code its error starts with
// ("ResourceExhausted: ..."), "batch_configuration" (failed without running
// because a job of its batch hit a configuration error), else "other".
std::string reason_class_of_attempt(const std::string& attempt_state, const std::string& error);

class DbReader {
 public:
  static constexpr int kRecentFinishedBatches = 10;
  static constexpr int kRecentFailures = 20;
  static constexpr int kMaxLeasedRows = 4096;

  // Opens `db_path` read-only (it must exist: the coordinator created it).
  static Result<std::unique_ptr<DbReader>> open(const std::filesystem::path& db_path,
                                                std::chrono::milliseconds min_interval);
  ~DbReader();

  // The cached figures when younger than min_interval, else a fresh read.
  Result<std::shared_ptr<const DbFigures>> read();

 private:
  DbReader(std::unique_ptr<db::Database> db, std::chrono::milliseconds min_interval);
  Result<DbFigures> read_now();

  std::unique_ptr<db::Database> db_;
  std::chrono::milliseconds min_interval_;
  void estimate_pace(DbFigures& f);

  std::shared_ptr<const DbFigures> cached_;
  // Per batch: (wall clock of a read, jobs finished then), the last minute.
  std::map<int64_t, std::vector<std::pair<double, int64_t>>> pace_;
  std::chrono::steady_clock::time_point cached_at_{};
};

}  // namespace hipq::coordinator::monitor
