// LoopSnapshot: what the coordinator's poll loop publishes for the monitor
// (coordinator/monitor/monitor.h): its counters and the workers it holds,
// copied out of the loop's own state. The loop never waits on the monitor:
// publishing is one short critical section (a swap of a prepared value),
// and readers copy the latest value out under the same mutex.
// Ownership: SnapshotBox owns its value. Thread safety: publish() from the
// loop, latest() from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <utility>
#include <string>
#include <vector>

namespace hipq::coordinator::monitor {

// One connected worker as the loop sees it. Device figures are the ones its
// last WorkerHello carried (docs/protocol.md); nothing else is asked of it.
struct WorkerView {
  std::string worker_id;
  std::string host;
  std::string backend;               // "hip" | "cpu" | "sleep"
  std::string device_name;           // "NVIDIA H200", "host CPU"
  int device_index = 0;
  std::string arch;
  std::string placement;             // "auto" | "standard" | "low" | ""
  int64_t memory_total_bytes = 0;    // WorkerHello.memory_bytes
  int64_t memory_free_bytes = 0;     // WorkerHello.memory_free_bytes (at hello)
  int64_t memory_limit_bytes = 0;    // WorkerHello.memory_limit_bytes (0 = no cap)
  std::string state;                 // "idle" | "busy" | "draining"
  int64_t running_job_id = 0;                 // the first of running_job_ids (0 = idle)
  std::vector<int64_t> running_job_ids;       // every job it runs (a batch runs several)
  // Its batch, seed and prompt when the loop handed it the job (false for a
  // job it resumed after a coordinator restart: the database says then).
  bool job_known = false;
  int64_t running_batch_id = 0;
  uint64_t running_seed = 0;
  std::string running_prompt;
  int progress_step = 0;
  int progress_steps = 0;
  int64_t jobs_done = 0;             // since it connected to this coordinator
  int64_t jobs_failed = 0;
  double connected_s = 0;            // seconds since its hello
  double last_seen_age_s = 0;
};

// The loop's counters (coordinator/server.h, ServerCounters), as of one turn.
struct LoopCounters {
  int64_t messages = 0;
  int64_t dropped_messages = 0;
  int64_t assignments = 0;
  int64_t results_recorded = 0;
  int64_t results_duplicate = 0;
  int64_t failures_recorded = 0;
  int64_t leases_expired = 0;
  int64_t leases_returned = 0;
  int64_t turns = 0;
  int64_t group_commits = 0;
  int64_t group_commit_failures = 0;
};

struct LoopSnapshot {
  bool published = false;            // false until the loop's first publish
  double published_unix = 0;         // wall clock of the publish
  double started_unix = 0;           // when the coordinator started
  std::string coordinator_id;
  std::string endpoint;
  LoopCounters counters;
  std::vector<WorkerView> workers;
};

class SnapshotBox {
 public:
  void publish(LoopSnapshot snapshot) {
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(value_, snapshot);
    // `snapshot` (the old value) is freed outside the lock.
  }
  LoopSnapshot latest() const {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }

 private:
  mutable std::mutex mu_;
  LoopSnapshot value_;
};

}  // namespace hipq::coordinator::monitor
