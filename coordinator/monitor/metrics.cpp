#include "coordinator/monitor/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <algorithm>
#include <limits>

#include "spec/phases.h"

namespace hipq::coordinator::monitor {

const std::vector<double>& step_buckets() {
  static const std::vector<double> b = {0.001, 0.002, 0.005, 0.01,  0.015, 0.02, 0.025, 0.03, 0.035, 0.04,
                                        0.045, 0.05,  0.055, 0.06,  0.075, 0.08, 0.1,   0.15, 0.2,   0.3,
                                        0.5,   1,     2,     5,     10};
  return b;
}

const std::vector<double>& phase_buckets() {
  static const std::vector<double> b = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                        2.5,   5,      10,    25,   60,    120,  300, 600};
  return b;
}

const std::vector<double>& commit_buckets() {
  static const std::vector<double> b = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                        0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1,      5};
  return b;
}

std::string reason_class_of_code(const std::string& code) {
  // base/status.h's code names: a worker reports one of these.
  static const std::array<const char*, 13> kCodes = {
      "InvalidArgument", "NotFound",          "AlreadyExists",    "IOError",     "Corruption",
      "FailedPrecondition", "Unavailable",    "ResourceExhausted", "DeadlineExceeded", "Cancelled",
      "PermissionDenied", "Unimplemented",    "Internal"};
  for (const char* c : kCodes) {
    if (code == c) return code;
  }
  return "other";
}

namespace {

// Label values that come from workers are kept to known words, so a worker
// (buggy or hostile) cannot make a series per message.
std::string verdict_label(const std::string& v) {
  for (const char* known : {"PASS", "FAIL", "NO_GOLDEN", "NON_FINITE"}) {
    if (v == known) return v;
  }
  return v.empty() ? "none" : "other";
}

std::string phase_label(const std::string& p) {
  const auto& known = spec::statistics_phases();
  return std::find(known.begin(), known.end(), p) != known.end() ? p : "other";
}

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  results_ = &prometheus::BuildCounter()
                  .Name("hipq_results_total")
                  .Help("Results recorded by this coordinator, by parity verdict")
                  .Register(*registry_);
  worker_images_ = &prometheus::BuildCounter()
                        .Name("hipq_worker_images_total")
                        .Help("Results (images) recorded by this coordinator, by worker and device")
                        .Register(*registry_);
  failures_ = &prometheus::BuildCounter()
                   .Name("hipq_attempt_failures_total")
                   .Help("Failed attempts reported by workers, by reason class (status code name)")
                   .Register(*registry_);
  steps_ = &prometheus::BuildHistogram()
                .Name("hipq_step_duration_seconds")
                .Help("Host time of each denoising step of recorded results, by device")
                .Register(*registry_);
  phases_ = &prometheus::BuildHistogram()
                 .Name("hipq_phase_duration_seconds")
                 .Help("Host time of each job phase of recorded results, by phase")
                 .Register(*registry_);
  commit_ = &prometheus::BuildHistogram()
                 .Name("hipq_db_commit_duration_seconds")
                 .Help("Time of each poll-loop turn's group commit (one SQLite transaction)")
                 .Register(*registry_)
                 .Add({}, commit_buckets());
}

Metrics::~Metrics() = default;

void Metrics::record_result(const std::string& worker_id, const std::string& device, const std::string& verdict,
                            const std::vector<TimingMs>& phases, const std::vector<double>& step_ms) {
  results_->Add({{"verdict", verdict_label(verdict)}}).Increment();
  worker_images_->Add({{"worker", worker_id}, {"device", device}}).Increment();
  for (const auto& p : phases) {
    if (p.host_ms >= 0) phases_->Add({{"phase", phase_label(p.phase)}}, phase_buckets()).Observe(p.host_ms / 1000.0);
  }
  if (!step_ms.empty()) {
    auto& h = steps_->Add({{"device", device}}, step_buckets());
    for (double ms : step_ms) h.Observe(ms / 1000.0);
  }
}

void Metrics::record_failure(const std::string& code) {
  failures_->Add({{"reason", reason_class_of_code(code)}}).Increment();
}

void Metrics::record_commit(double seconds) { commit_->Observe(seconds); }

Metrics::Distribution Metrics::step_distribution() const {
  Distribution d;
  d.upper_bounds = step_buckets();
  d.upper_bounds.push_back(std::numeric_limits<double>::infinity());
  d.cumulative.assign(d.upper_bounds.size(), 0);
  for (const auto& family : steps_->Collect()) {
    for (const auto& m : family.metric) {
      const auto& h = m.histogram;
      for (size_t i = 0; i < h.bucket.size() && i < d.cumulative.size(); ++i) {
        d.cumulative[i] += h.bucket[i].cumulative_count;
      }
      d.count += h.sample_count;
      d.sum += h.sample_sum;
    }
  }
  return d;
}

}  // namespace hipq::coordinator::monitor
