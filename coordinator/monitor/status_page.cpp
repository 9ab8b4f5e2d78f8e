#include "coordinator/monitor/status_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "base/number_format.h"
#include "coordinator/report/html_report.h"
#include "coordinator/report/svg_charts.h"

namespace hipq::coordinator::monitor {

using nlohmann::json;

namespace {

int64_t count_of(const std::map<std::string, int64_t>& m, const char* k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

std::string esc(const std::string& s) { return report::html_escape(s); }
std::string jesc(const json& v) {
  if (v.is_string()) return esc(v.get<std::string>());
  if (v.is_null()) return "–";
  return esc(v.dump());
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string bytes_text(const json& v) {
  if (!v.is_number() || v.get<double>() <= 0) return "–";
  return fixed(v.get<double>() / (1024.0 * 1024 * 1024), 1) + " GiB";
}

std::string duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "–";
  const int64_t t = static_cast<int64_t>(std::llround(s));
  char buf[64];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh %02lldm", static_cast<long long>(t / 3600),
                  static_cast<long long>(t % 3600 / 60));
  } else if (t >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm %02llds", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(t));
  }
  return buf;
}

std::string utc_text(double unix_s) {
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string shorten(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t cut = n;
  // Never split a UTF-8 sequence.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "…";
}

std::string tile(const std::string& value, const std::string& label) {
  return "<div class=\"tile\"><b>" + esc(value) + "</b><span>" + esc(label) + "</span></div>";
}

constexpr char kExtraStyle[] = R"css(
.bar{background:#e6e9ee;border-radius:3px;height:10px;width:160px;display:inline-block;vertical-align:middle;overflow:hidden}
.bar i{display:block;height:10px;background:#2f7ed8}.bar i.f{background:#b3261e}
.hbar{background:#2f7ed8;height:12px;display:inline-block;vertical-align:middle;border-radius:2px}
.busy{color:#0a5bb5;font-weight:600}.idle{color:#5a6672}.draining{color:#8a6d00}
header code{color:#1d2329}
)css";

}  // namespace

json status_json(const LoopSnapshot& snap, const DbFigures* fig, const Metrics::Distribution& steps,
                 const std::string& db_error, double now) {
  json out;
  out["generated_unix"] = now;
  out["coordinator"] = {{"id", snap.coordinator_id},
                        {"endpoint", snap.endpoint},
                        {"started_unix", snap.started_unix},
                        {"uptime_s", snap.started_unix > 0 ? now - snap.started_unix : 0.0}};
  const LoopCounters& c = snap.counters;
  out["counters"] = {{"messages", c.messages},
                     {"dropped_messages", c.dropped_messages},
                     {"assignments", c.assignments},
                     {"results_recorded", c.results_recorded},
                     {"failures_recorded", c.failures_recorded},
                     {"leases_expired", c.leases_expired},
                     {"leases_returned", c.leases_returned}};
  out["db_error"] = db_error.empty() ? json(nullptr) : json(db_error);
  out["jobs_by_state"] = json::object();
  out["batches"] = json::array();
  out["recent_failures"] = json::array();
  if (fig != nullptr) {
    for (const auto& [k, v] : fig->jobs_by_state) out["jobs_by_state"][k] = v;
    for (const BatchFigures& b : fig->batches) {
      const int64_t finished = count_of(b.by_state, "done") + count_of(b.by_state, "failed") +
                               count_of(b.by_state, "dead") + count_of(b.by_state, "cancelled");
      json j = {{"id", b.id},
                {"name", b.name},
                {"state", b.state},
                {"priority", b.priority},
                {"total", b.total},
                {"by_state", json::object()},
                {"finished", finished},
                {"progress", b.total > 0 ? static_cast<double>(finished) / static_cast<double>(b.total) : 1.0},
                {"finished_per_s", b.finished_per_s},
                {"eta_s", b.eta_s ? json(*b.eta_s) : json(nullptr)},
                {"created_unix", b.created_unix},
                {"finished_unix", b.finished_unix ? json(*b.finished_unix) : json(nullptr)}};
      for (const auto& [k, v] : b.by_state) j["by_state"][k] = v;
      out["batches"].push_back(std::move(j));
    }
    for (const FailureRow& f : fig->recent_failures) {
      out["recent_failures"].push_back({{"job", f.job_id},
                                        {"attempt", f.attempt},
                                        {"batch_id", f.batch_id},
                                        {"worker", f.worker_id},
                                        {"state", f.state},
                                        {"reason", f.reason_class},
                                        {"error", f.error},
                                        {"prompt", f.prompt},
                                        {"finished_unix", f.finished_unix}});
    }
  }
  out["workers"] = json::array();
  for (const WorkerView& w : snap.workers) {
    json job = nullptr;
    if (w.running_job_id != 0) {
      job = {{"id", w.running_job_id}};
      if (w.job_known) {
        job["batch_id"] = w.running_batch_id;
        job["prompt"] = w.running_prompt;
        job["seed"] = w.running_seed;
      } else if (fig != nullptr) {
        if (auto it = fig->leased.find(w.running_job_id); it != fig->leased.end()) {
          job["batch_id"] = it->second.batch_id;
          job["prompt"] = it->second.prompt;
          job["seed"] = it->second.seed;
        }
      }
    }
    out["workers"].push_back({{"worker", w.worker_id},
                              {"host", w.host},
                              {"backend", w.backend},
                              {"device", w.device_name},
                              {"device_index", w.device_index},
                              {"arch", w.arch},
                              {"placement", w.placement},
                              {"state", w.state},
                              {"memory_total_bytes", w.memory_total_bytes},
                              {"memory_free_bytes", w.memory_free_bytes},
                              {"memory_limit_bytes", w.memory_limit_bytes},
                              {"job", job},
                              {"jobs", w.running_job_ids},
                              {"step", w.progress_step},
                              {"steps", w.progress_steps},
                              {"jobs_done", w.jobs_done},
                              {"jobs_failed", w.jobs_failed},
                              {"connected_s", w.connected_s},
                              {"last_seen_s", w.last_seen_age_s}});
  }
  json buckets = json::array();
  uint64_t below = 0;
  for (size_t i = 0; i < steps.upper_bounds.size() && i < steps.cumulative.size(); ++i) {
    const uint64_t n = steps.cumulative[i] - below;
    below = steps.cumulative[i];
    const double ub = steps.upper_bounds[i];
    buckets.push_back({{"le_ms", std::isfinite(ub) ? json(ub * 1000.0) : json("+Inf")}, {"count", n}});
  }
  out["step_time"] = {{"count", steps.count},
                      {"mean_ms", steps.count > 0 ? json(steps.sum * 1000.0 / static_cast<double>(steps.count))
                                                  : json(nullptr)},
                      {"buckets", buckets}};
  return out;
}

std::string render_status_page(const json& s, int refresh_seconds) {
  std::string h;
  h += "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">";
  h += "<meta http-equiv=\"refresh\" content=\"" + std::to_string(refresh_seconds) + "\">";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
  h += "<title>hipq status</title><style>" + std::string(report::report_style()) + kExtraStyle +
       "</style></head><body>";
  const json& coord = s["coordinator"];
  h += "<header><h1>hipq — live status</h1><p>coordinator " + jesc(coord["id"]) + " on " + jesc(coord["endpoint"]) +
       " · up " + duration_text(coord.value("uptime_s", 0.0)) + " · as of " +
       utc_text(s.value("generated_unix", 0.0)) + " · this page reloads every " + std::to_string(refresh_seconds) +
       " s; JSON at <code>/api/status</code>, Prometheus metrics at <code>/metrics</code></p></header><main>";
  if (s["db_error"].is_string()) {
    h += "<section><div class=\"hint\">The database could not be read: " + jesc(s["db_error"]) +
         ". Job counts are missing until it can.</div></section>";
  }
  // Summary tiles.
  const json& jobs = s["jobs_by_state"];
  int64_t busy = 0;
  for (const auto& w : s["workers"]) busy += w["job"].is_null() ? 0 : 1;
  h += "<section><h2>Now</h2><div class=\"tiles\">";
  h += tile(std::to_string(s["workers"].size()), "workers connected");
  h += tile(std::to_string(busy), "workers busy");
  for (const char* st : {"queued", "leased", "done", "failed", "dead"}) {
    h += tile(std::to_string(jobs.value(st, int64_t{0})), std::string("jobs ") + st);
  }
  h += tile(std::to_string(s["counters"].value("dropped_messages", int64_t{0})), "messages dropped");
  h += "</div></section>";

  // Batches.
  h += "<section id=\"batches\"><h2>Batches</h2>";
  if (s["batches"].empty()) {
    h += "<p class=\"note\">No batch yet: submit one with <code>hipq submit MANIFEST</code>.</p>";
  } else {
    h += "<table><thead><tr><th class=\"l\">batch</th><th class=\"l\">name</th><th class=\"l\">state</th>"
         "<th class=\"l\">progress</th><th>done</th><th>running</th><th>queued</th><th>failed</th><th>dead</th>"
         "<th>cancelled</th><th>total</th><th>jobs/s</th><th>ETA</th></tr></thead><tbody>";
    for (const auto& b : s["batches"]) {
      const json& by = b["by_state"];
      const double progress = b.value("progress", 0.0);
      const int64_t bad = by.value("failed", int64_t{0}) + by.value("dead", int64_t{0});
      const int64_t total = b.value("total", int64_t{0});
      const double bad_pct = total > 0 ? 100.0 * static_cast<double>(bad) / static_cast<double>(total) : 0.0;
      h += "<tr data-batch=\"" + std::to_string(b.value("id", int64_t{0})) + "\"><td class=\"l\">" +
           std::to_string(b.value("id", int64_t{0})) + "</td><td class=\"l w\">" + jesc(b["name"]) +
           "</td><td class=\"l\">" + jesc(b["state"]) + "</td><td class=\"l\"><span class=\"bar\"><i style=\"width:" +
           fixed(std::clamp(progress * 100.0 - bad_pct, 0.0, 100.0), 1) + "%;float:left\"></i><i class=\"f\" style=\"width:" +
           fixed(bad_pct, 1) + "%;float:left\"></i></span> " + fixed(progress * 100.0, 1) + "%</td>";
      for (const char* st : {"done", "leased", "queued", "failed", "dead", "cancelled"}) {
        h += "<td>" + std::to_string(by.value(st, int64_t{0})) + "</td>";
      }
      h += "<td>" + std::to_string(total) + "</td><td>" + format_significant(b.value("finished_per_s", 0.0), 3) +
           "</td><td>" + (b["eta_s"].is_number() ? duration_text(b["eta_s"].get<double>()) : std::string("–")) +
           "</td></tr>";
    }
    h += "</tbody></table>";
  }
  h += "</section>";

  // Workers.
  h += "<section id=\"workers\"><h2>Workers</h2>";
  if (s["workers"].empty()) {
    h += "<p class=\"note\">No worker connected: start one with <code>hipq worker --connect ENDPOINT</code>.</p>";
  } else {
    h += "<table><thead><tr><th class=\"l\">worker</th><th class=\"l\">host</th><th class=\"l\">device</th>"
         "<th class=\"l\">placement</th><th class=\"l\">state</th><th class=\"l\">job</th><th class=\"l\">prompt</th>"
         "<th>step</th><th>memory free</th><th>memory total</th><th>limit</th><th>done</th><th>failed</th>"
         "<th>last heard</th></tr></thead><tbody>";
    for (const auto& w : s["workers"]) {
      const json& job = w["job"];
      std::string job_cell = "–", prompt_cell = "–", step_cell = "–";
      std::string attr;
      if (job.is_object()) {
        const std::string id = std::to_string(job.value("id", int64_t{0}));
        attr = " data-running-job=\"" + id + "\"";
        job_cell = "job " + id + (job.contains("batch_id") ? " (batch " + std::to_string(job.value("batch_id", int64_t{0})) + ")" : "");
        if (job["prompt"].is_string()) prompt_cell = esc(shorten(job["prompt"].get<std::string>(), 120));
        step_cell = std::to_string(w.value("step", 0)) + " / " + std::to_string(w.value("steps", 0));
      }
      const std::string state = w.value("state", "");
      h += "<tr" + attr + "><td class=\"l\">" + jesc(w["worker"]) + "</td><td class=\"l\">" + jesc(w["host"]) +
           "</td><td class=\"l\">" + jesc(w["device"]) + " #" + std::to_string(w.value("device_index", 0)) + " (" +
           jesc(w["backend"]) + ")</td><td class=\"l\">" + jesc(w["placement"]) + "</td><td class=\"l " +
           esc(state) + "\">" + esc(state) + "</td><td class=\"l\">" + job_cell + "</td><td class=\"l w\">" +
           prompt_cell + "</td><td>" + step_cell + "</td><td>" + bytes_text(w["memory_free_bytes"]) + "</td><td>" +
           bytes_text(w["memory_total_bytes"]) + "</td><td>" + bytes_text(w["memory_limit_bytes"]) + "</td><td>" +
           std::to_string(w.value("jobs_done", int64_t{0})) + "</td><td>" +
           std::to_string(w.value("jobs_failed", int64_t{0})) + "</td><td>" +
           fixed(w.value("last_seen_s", 0.0), 1) + " s ago</td></tr>";
    }
    h += "</tbody></table><p class=\"note\">Free memory is what the worker reported when it connected.</p>";
  }
  h += "</section>";

  // Step-time distribution.
  const json& st = s["step_time"];
  h += "<section id=\"steps\"><h2>Step time so far</h2>";
  if (st.value("count", uint64_t{0}) == 0) {
    h += "<p class=\"note\">No step timed yet.</p>";
  } else {
    uint64_t peak = 1;
    for (const auto& b : st["buckets"]) peak = std::max(peak, b.value("count", uint64_t{0}));
    h += "<p class=\"note\">" + std::to_string(st.value("count", uint64_t{0})) + " steps, mean " +
         format_significant(st["mean_ms"].is_number() ? st["mean_ms"].get<double>() : 0.0, 4) +
         " ms (host clock)</p><table class=\"dense\"><thead><tr><th class=\"l\">step time</th><th>steps</th>"
         "<th class=\"l\"></th></tr></thead><tbody>";
    std::string lower = "0";
    for (const auto& b : st["buckets"]) {
      const uint64_t n = b.value("count", uint64_t{0});
      const std::string upper = b["le_ms"].is_number() ? format_significant(b["le_ms"].get<double>(), 4) : "∞";
      if (n > 0) {
        h += "<tr><td class=\"l\">" + lower + "–" + upper + " ms</td><td>" + std::to_string(n) +
             "</td><td class=\"l\"><span class=\"hbar\" style=\"width:" +
             fixed(300.0 * static_cast<double>(n) / static_cast<double>(peak), 0) + "px\"></span></td></tr>";
      }
      lower = upper;
    }
    h += "</tbody></table>";
  }
  h += "</section>";

  // Recent failures.
  h += "<section id=\"failures\"><h2>Recent failures</h2>";
  if (s["recent_failures"].empty()) {
    h += "<p class=\"note\">No attempt has failed.</p>";
  } else {
    h += "<table><thead><tr><th class=\"l\">when</th><th class=\"l\">job</th><th class=\"l\">worker</th>"
         "<th class=\"l\">reason</th><th class=\"l\">error</th><th class=\"l\">prompt</th></tr></thead><tbody>";
    for (const auto& f : s["recent_failures"]) {
      h += "<tr><td class=\"l\">" + utc_text(f.value("finished_unix", 0.0)) + "</td><td class=\"l\">job " +
           std::to_string(f.value("job", int64_t{0})) + " attempt " + std::to_string(f.value("attempt", 0)) +
           " (batch " + std::to_string(f.value("batch_id", int64_t{0})) + ")</td><td class=\"l\">" +
           jesc(f["worker"]) + "</td><td class=\"l\">" + jesc(f["reason"]) + "</td><td class=\"l w\">" +
           esc(shorten(f.value("error", ""), 300)) + "</td><td class=\"l w\">" +
           esc(shorten(f.value("prompt", ""), 120)) + "</td></tr>";
    }
    h += "</tbody></table>";
  }
  h += "</section></main></body></html>\n";
  return h;
}

}  // namespace hipq::coordinator::monitor
