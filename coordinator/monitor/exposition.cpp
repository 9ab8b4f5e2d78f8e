#include "coordinator/monitor/exposition.h"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sstream>

namespace hipq::coordinator::monitor {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

MetricFamily family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void add(MetricFamily& f, Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f.type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

MetricFamily counter(std::string name, std::string help, double value) {
  MetricFamily f = family(std::move(name), std::move(help), MetricType::Counter);
  add(f, {}, value);
  return f;
}

// The job states of db/schema.cpp, every one present (0 when none) so a
// dashboard's series do not appear and vanish.
const std::vector<std::string>& job_states() {
  static const std::vector<std::string> s = {"queued", "leased", "done", "failed", "dead", "cancelled"};
  return s;
}

int64_t at(const std::map<std::string, int64_t>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

}  // namespace

std::vector<MetricFamily> snapshot_families(const LoopSnapshot& snap, const DbFigures* fig, int64_t db_read_errors) {
  std::vector<MetricFamily> out;
  const LoopCounters& c = snap.counters;
  out.push_back(counter("hipq_messages_total", "Messages received by the coordinator's ROUTER socket",
                        static_cast<double>(c.messages)));
  out.push_back(counter("hipq_dropped_messages_total",
                        "Messages dropped: unparseable, invalid, unauthorised or of an unknown peer",
                        static_cast<double>(c.dropped_messages)));
  out.push_back(counter("hipq_assignments_total", "Jobs handed to workers (attempts started) by this coordinator",
                        static_cast<double>(c.assignments)));
  out.push_back(counter("hipq_results_duplicate_total", "Late or repeated results dropped",
                        static_cast<double>(c.results_duplicate)));
  out.push_back(counter("hipq_attempt_failures_recorded_total", "Failed attempts recorded by this coordinator",
                        static_cast<double>(c.failures_recorded)));
  out.push_back(counter("hipq_lease_expirations_total",
                        "Leases that ended expired (worker silent, or lease deadline passed)",
                        static_cast<double>(c.leases_expired)));
  out.push_back(counter("hipq_leases_returned_total",
                        "Leases given back unstarted or taken back stalled (no attempt counted)",
                        static_cast<double>(c.leases_returned)));
  out.push_back(counter("hipq_loop_turns_total", "Turns of the coordinator's poll loop", static_cast<double>(c.turns)));
  out.push_back(counter("hipq_db_commits_total", "Group commits (one per turn that could write)",
                        static_cast<double>(c.group_commits)));
  out.push_back(counter("hipq_db_commit_failures_total", "Group commits that failed (their replies withheld)",
                        static_cast<double>(c.group_commit_failures)));
  {
    MetricFamily f = family("hipq_coordinator_start_time_seconds", "When this coordinator started (Unix time)",
                            MetricType::Gauge);
    add(f, {{"coordinator_id", snap.coordinator_id}}, snap.started_unix);
    out.push_back(std::move(f));
  }

  // Workers: one series per connected worker, labelled by its id only; the
  // device and placement are in hipq_worker_info (join on `worker`).
  MetricFamily connected = family("hipq_workers_connected", "Workers connected now, by state", MetricType::Gauge);
  std::map<std::string, int64_t> by_state = {{"idle", 0}, {"busy", 0}, {"draining", 0}};
  MetricFamily info = family("hipq_worker_info",
                             "1 per connected worker; its host, device, backend and placement as labels",
                             MetricType::Gauge);
  MetricFamily total = family("hipq_worker_memory_total_bytes", "Device memory of the worker's device",
                              MetricType::Gauge);
  MetricFamily free = family("hipq_worker_memory_free_bytes",
                             "Free device memory the worker reported in its last hello", MetricType::Gauge);
  MetricFamily limit = family("hipq_worker_memory_limit_bytes",
                              "Device memory cap the worker runs under (0 = none)", MetricType::Gauge);
  MetricFamily busy = family("hipq_worker_busy", "1 while the worker holds a job", MetricType::Gauge);
  MetricFamily job = family("hipq_worker_running_job", "Id of the job the worker runs (0 = none)", MetricType::Gauge);
  MetricFamily step = family("hipq_worker_step", "Step of the running job the worker last reported",
                             MetricType::Gauge);
  MetricFamily steps = family("hipq_worker_steps", "Steps of the running job", MetricType::Gauge);
  MetricFamily seen = family("hipq_worker_last_seen_seconds", "Seconds since the worker was last heard",
                             MetricType::Gauge);
  for (const WorkerView& w : snap.workers) {
    ++by_state[w.state];
    Labels id = {{"worker", w.worker_id}};
    add(info,
        {{"arch", w.arch},
         {"backend", w.backend},
         {"device", w.device_name},
         {"device_index", std::to_string(w.device_index)},
         {"host", w.host},
         {"placement", w.placement},
         {"worker", w.worker_id}},
        1);
    add(total, id, static_cast<double>(w.memory_total_bytes));
    add(free, id, static_cast<double>(w.memory_free_bytes));
    add(limit, id, static_cast<double>(w.memory_limit_bytes));
    add(busy, id, w.running_job_id != 0 ? 1 : 0);
    add(job, id, static_cast<double>(w.running_job_id));
    add(step, id, w.progress_step);
    add(steps, id, w.progress_steps);
    add(seen, id, w.last_seen_age_s);
  }
  for (const auto& [state, n] : by_state) add(connected, {{"state", state}}, static_cast<double>(n));
  for (auto* f : {&connected, &info, &total, &free, &limit, &busy, &job, &step, &steps, &seen}) {
    out.push_back(std::move(*f));
  }

  out.push_back(counter("hipq_db_read_errors_total", "Monitor reads of the database that failed",
                        static_cast<double>(db_read_errors)));
  if (fig == nullptr) return out;

  MetricFamily jobs = family("hipq_jobs", "Jobs in the database, by state", MetricType::Gauge);
  for (const auto& s : job_states()) add(jobs, {{"state", s}}, static_cast<double>(at(fig->jobs_by_state, s)));
  out.push_back(std::move(jobs));
  MetricFamily depth = family("hipq_queue_depth", "Jobs queued (waiting for a worker)", MetricType::Gauge);
  add(depth, {}, static_cast<double>(at(fig->jobs_by_state, "queued")));
  out.push_back(std::move(depth));

  MetricFamily batch_jobs = family("hipq_batch_jobs",
                                   "Jobs of each active batch and of the last 10 finished ones, by state",
                                   MetricType::Gauge);
  MetricFamily batch_total = family("hipq_batch_jobs_planned", "Jobs of the batch (all states)",
                                    MetricType::Gauge);
  MetricFamily batch_active = family("hipq_batch_active", "1 while the batch is active, 0 once finished",
                                     MetricType::Gauge);
  MetricFamily batch_eta = family("hipq_batch_eta_seconds",
                                  "Seconds until the batch is finished at its pace of the last minute",
                                  MetricType::Gauge);
  for (const BatchFigures& b : fig->batches) {
    const std::string id = std::to_string(b.id);
    for (const auto& s : job_states()) {
      add(batch_jobs, {{"batch", b.name}, {"batch_id", id}, {"state", s}}, static_cast<double>(at(b.by_state, s)));
    }
    add(batch_total, {{"batch", b.name}, {"batch_id", id}}, static_cast<double>(b.total));
    add(batch_active, {{"batch", b.name}, {"batch_id", id}}, b.state == "active" ? 1 : 0);
    if (b.eta_s) add(batch_eta, {{"batch", b.name}, {"batch_id", id}}, *b.eta_s);
  }
  out.push_back(std::move(batch_jobs));
  out.push_back(std::move(batch_total));
  out.push_back(std::move(batch_active));
  out.push_back(std::move(batch_eta));

  MetricFamily attempts = family("hipq_attempts", "Attempts in the database, by state", MetricType::Gauge);
  for (const char* s : {"running", "done", "failed", "expired", "cancelled"}) {
    add(attempts, {{"state", s}}, static_cast<double>(at(fig->attempts_by_state, s)));
  }
  out.push_back(std::move(attempts));
  MetricFamily retries = family("hipq_retries", "Attempts in the database that were retries (attempt 2 or later)",
                                MetricType::Gauge);
  add(retries, {}, static_cast<double>(fig->retries));
  out.push_back(std::move(retries));

  MetricFamily verdicts = family("hipq_parity_verdicts", "Results in the database, by parity verdict",
                                 MetricType::Gauge);
  for (const char* v : {"PASS", "FAIL", "NO_GOLDEN", "NON_FINITE"}) {
    add(verdicts, {{"verdict", v}}, static_cast<double>(at(fig->verdicts, v)));
  }
  for (const auto& [v, n] : fig->verdicts) {
    if (v != "PASS" && v != "FAIL" && v != "NO_GOLDEN" && v != "NON_FINITE") {
      add(verdicts, {{"verdict", v}}, static_cast<double>(n));
    }
  }
  out.push_back(std::move(verdicts));

  MetricFamily ended = family("hipq_jobs_ended_unsuccessfully",
                              "Failed and dead jobs in the database, by state and reason class of their last attempt",
                              MetricType::Gauge);
  for (const auto& [state, reasons] : fig->ended_by_reason) {
    for (const auto& [reason, n] : reasons) add(ended, {{"reason", reason}, {"state", state}}, static_cast<double>(n));
  }
  out.push_back(std::move(ended));

  MetricFamily read = family("hipq_db_read_duration_seconds", "How long the monitor's last database read took",
                             MetricType::Gauge);
  add(read, {}, fig->read_seconds);
  out.push_back(std::move(read));
  return out;
}

std::string render_metrics_text(const Metrics& metrics, const LoopSnapshot& snapshot, const DbFigures* figures,
                                int64_t db_read_errors) {
  std::vector<MetricFamily> all = metrics.registry()->Collect();
  for (auto& f : snapshot_families(snapshot, figures, db_read_errors)) all.push_back(std::move(f));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, all);
  return out.str();
}

}  // namespace hipq::coordinator::monitor
