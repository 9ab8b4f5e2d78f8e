// Metrics: the coordinator's Prometheus metrics that come from its events
// (results, failures, group commits), kept in a prometheus-cpp registry, and
// the box the poll loop publishes its snapshot to (loop_snapshot.h).
//
// The loop calls the record_* methods as events happen; prometheus-cpp's
// counters and histograms are thread-safe, so the monitor's HTTP thread
// collects them while the loop writes, without a lock the loop would wait on
// for long. Figures that are the database's (jobs by state, verdicts,
// attempts) are not counted here: the monitor reads them from the database
// itself (db_figures.h), so they always match it. Every metric is written
// down in docs/metrics.md.
//
// Ownership: owns its registry and families; the server borrows it (it must
// outlive the server). Thread safety: record_* and publish from the loop,
// everything else from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coordinator/monitor/loop_snapshot.h"

namespace prometheus {
class Registry;
class Counter;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace hipq::coordinator::monitor {

// Bucket upper bounds (seconds). Steps: 5 ms wide from 10 to 60 ms, so 30–40 ms
// steps (an SDXL step on an H200) are resolved; phases: 1 ms to 10 min; commits: 50 µs to 5 s.
const std::vector<double>& step_buckets();
const std::vector<double>& phase_buckets();
const std::vector<double>& commit_buckets();

// A failure's class for the `reason` label: the status code name a worker
// reported ("ResourceExhausted"), "lease_expired", "batch_configuration", or
// "other" — never free text, so the label's values stay few.
std::string reason_class_of_code(const std::string& code);

// One timing of a result, in the units the wire carries (milliseconds).
struct TimingMs {
  std::string phase;
  double host_ms = 0;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // A result was recorded (not a duplicate): per-worker images, the
  // verdict, the phase and step histograms.
  void record_result(const std::string& worker_id, const std::string& device, const std::string& verdict,
                     const std::vector<TimingMs>& phases, const std::vector<double>& step_ms);
  // A worker reported a failed attempt with status code `code`.
  void record_failure(const std::string& code);
  // A turn's group commit took `seconds` (ok or not).
  void record_commit(double seconds);

  SnapshotBox& snapshot() { return snapshot_; }
  const SnapshotBox& snapshot() const { return snapshot_; }
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // The step-time histogram so far, summed over devices: cumulative counts
  // per upper bound (the last is +Inf), for the status page.
  struct Distribution {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;
    uint64_t count = 0;
    double sum = 0;
  };
  Distribution step_distribution() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* results_ = nullptr;
  prometheus::Family<prometheus::Counter>* worker_images_ = nullptr;
  prometheus::Family<prometheus::Counter>* failures_ = nullptr;
  prometheus::Family<prometheus::Histogram>* steps_ = nullptr;
  prometheus::Family<prometheus::Histogram>* phases_ = nullptr;
  prometheus::Histogram* commit_ = nullptr;
  SnapshotBox snapshot_;
};

}  // namespace hipq::coordinator::monitor
