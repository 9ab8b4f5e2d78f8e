#include "coordinator/query/report_data.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "coordinator/report/thumbnail.h"
#include "coordinator/statistics/descriptive.h"
#include "coordinator/query/run_stats.h"
#include "db/database.h"
#include "db/job_store.h"
#include "db/run_queries.h"

namespace hipq::coordinator::query {

using nlohmann::json;
namespace st = hipq::coordinator::statistics;

namespace {

json compact_run(const db::RunRow& r) {
  double total = 0;
  for (const auto& p : r.phases) total += p.host_ms;
  return json{{"job", r.job_id},
              {"prompt", r.prompt},
              {"seed", r.seed},
              {"repeat", r.repeat_index},
              {"state", r.state},
              {"verdict", r.verdict ? json(*r.verdict) : json(nullptr)},
              {"cosine", r.cosine ? json(*r.cosine) : json(nullptr)},
              {"gpu", r.gpu},
              {"worker", r.worker_id ? json(*r.worker_id) : json(nullptr)},
              {"warm", r.has_result ? json(r.warm) : json(nullptr)},
              {"total_ms", r.phases.empty() ? json(nullptr) : json(total)},
              {"error", r.error ? json(*r.error) : json(nullptr)}};
}

// One point per (batch, build) of the newest kHistoryBatches batches, oldest
// first: the median host ms of each phase over the runs with a result.
constexpr size_t kHistoryBatches = 50;

Result<json> history(db::Database& db, const std::vector<db::BatchRecord>& batches) {
  json out = json::array();
  const size_t first = batches.size() > kHistoryBatches ? batches.size() - kHistoryBatches : 0;
  for (size_t i = first; i < batches.size(); ++i) {
    db::RunFilter f;
    f.batch = batches[i].id;
    f.with_result_only = true;
    HIPQ_ASSIGN_OR_RETURN(auto rows, db::query_runs(db, f));
    std::map<std::string, std::vector<const db::RunRow*>> by_build;
    for (const auto& r : rows) by_build[r.build_sha.empty() ? "?" : r.build_sha].push_back(&r);
    for (const auto& [build, runs] : by_build) {
      std::map<std::string, std::vector<double>> phases;
      std::vector<double> times;
      for (const auto* r : runs) {
        double total = 0;
        for (const auto& p : r->phases) {
          phases[p.phase].push_back(p.host_ms);
          total += p.host_ms;
        }
        if (!r->phases.empty()) phases["total"].push_back(total);
        times.push_back(r->time);
      }
      json medians = json::object();
      for (auto& [phase, v] : phases) {
        std::sort(v.begin(), v.end());
        medians[phase] = st::quantile_sorted(v, 0.5);
      }
      std::sort(times.begin(), times.end());
      out.push_back({{"batch", batches[i].id},
                     {"name", batches[i].name},
                     {"build", build},
                     {"runs", runs.size()},
                     {"time", st::quantile_sorted(times, 0.5)},
                     {"phases", medians}});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const json& a, const json& b) {
    return a["time"].get<double>() < b["time"].get<double>();
  });
  return out;
}

}  // namespace

Result<json> build_report_data(db::Database& db, const json& args) {
  int64_t batch_id = 0;
  int max_thumbs = 24, thumb_px = 160;
  StatsOptions sopt;
  try {
    if (args.contains("batch") && !args["batch"].is_null()) batch_id = args["batch"].get<int64_t>();
    if (args.contains("thumbnails")) max_thumbs = args["thumbnails"].get<int>();
    if (args.contains("thumbnail_px")) thumb_px = args["thumbnail_px"].get<int>();
    if (args.contains("resamples")) sopt.resamples = args["resamples"].get<int>();
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("report-data: batch, thumbnails, thumbnail_px and resamples are "
                                               "integers: ") + e.what());
  }
  if (thumb_px < 16 || thumb_px > 1024) {
    return Status::InvalidArgument("report-data: thumbnail_px " + std::to_string(thumb_px) + " is outside 16..1024");
  }
  db::JobStore store(db);
  HIPQ_ASSIGN_OR_RETURN(auto batches, store.list_batches());
  if (batch_id == 0) {
    if (batches.empty()) return Status::NotFound("report: the database " + db.describe() + " holds no batch yet");
    batch_id = batches.back().id;
  }
  HIPQ_ASSIGN_OR_RETURN(db::BatchRecord batch, store.get_batch(batch_id));
  HIPQ_ASSIGN_OR_RETURN(db::BatchCounts counts, store.batch_counts(batch_id));
  HIPQ_ASSIGN_OR_RETURN(db::ManifestRecord manifest, store.get_manifest(batch.manifest_id));

  db::RunFilter filter;
  filter.batch = batch_id;
  HIPQ_ASSIGN_OR_RETURN(auto rows, db::query_runs(db, filter));
  std::vector<db::RunRow> done;
  for (const auto& r : rows) {
    if (r.has_result) done.push_back(r);
  }

  json out;
  out["batch"] = {{"id", batch.id},
                  {"name", batch.name},
                  {"state", std::string(db::batch_state_name(batch.state))},
                  {"manifest", manifest.sha256},
                  {"manifest_path", manifest.path},
                  {"output_root", batch.output_root},
                  {"created_at", batch.created_at},
                  {"finished_at", batch.finished_at ? json(*batch.finished_at) : json(nullptr)},
                  {"total", counts.total},
                  {"by_state", counts.by_state},
                  {"by_verdict", counts.by_verdict}};

  std::map<std::string, json> workers;
  for (const auto& r : rows) {
    if (!r.worker_id) continue;
    workers[*r.worker_id] = {{"worker", *r.worker_id}, {"host", r.host},       {"gpu", r.gpu},
                             {"arch", r.arch},         {"build", r.build_sha}, {"backend", r.backend},
                             {"runtime_version", r.runtime_version},           {"driver_version", r.driver_version}};
  }
  out["workers"] = json::array();
  for (auto& [_, w] : workers) out["workers"].push_back(w);

  HIPQ_ASSIGN_OR_RETURN(auto samples, load_samples(db, done, "host"));
  sopt.group_by = {"gpu"};
  HIPQ_ASSIGN_OR_RETURN(out["stats"], compute_stats(samples, sopt));

  // Raw values for the distribution plots, per (gpu, warmth, phase).
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>> by_key;
  std::map<std::pair<std::string, std::string>, std::vector<const RunSample*>> by_gpu;
  for (const auto& s : samples) {
    const std::string gpu = dimension_value(*s.row, "gpu");
    const std::string warmth = s.row->warm ? "warm" : "cold";
    by_gpu[{gpu, warmth}].push_back(&s);
    for (const auto& [phase, v] : s.phases) by_key[{gpu, warmth, phase}].push_back(v);
    auto& steps = by_key[{gpu, warmth, "step"}];
    steps.insert(steps.end(), s.steps.begin(), s.steps.end());
  }
  out["samples"] = json::array();
  for (const auto& ph : known_phases()) {
    for (const auto& [k, v] : by_key) {
      if (std::get<2>(k) != ph || v.empty()) continue;
      out["samples"].push_back({{"gpu", std::get<0>(k)}, {"warmth", std::get<1>(k)}, {"phase", ph}, {"values", v}});
    }
  }
  // Step-time traces: per step index, the median and the 10th/90th percentile
  // across the group's runs.
  out["step_traces"] = json::array();
  for (const auto& [k, members] : by_gpu) {
    size_t max_steps = 0;
    for (const auto* m : members) max_steps = std::max(max_steps, m->steps.size());
    if (max_steps == 0) continue;
    json med = json::array(), lo = json::array(), hi = json::array();
    for (size_t i = 0; i < max_steps; ++i) {
      std::vector<double> at;
      for (const auto* m : members) {
        if (i < m->steps.size()) at.push_back(m->steps[i]);
      }
      std::sort(at.begin(), at.end());
      med.push_back(st::quantile_sorted(at, 0.5));
      lo.push_back(st::quantile_sorted(at, 0.1));
      hi.push_back(st::quantile_sorted(at, 0.9));
    }
    out["step_traces"].push_back({{"gpu", k.first}, {"warmth", k.second}, {"runs", members.size()},
                                  {"median", med}, {"low", lo}, {"high", hi}});
  }
  out["parity"] = parity_table(done);
  out["runs"] = json::array();
  for (const auto& r : rows) out["runs"].push_back(compact_run(r));

  out["thumbnails"] = json::array();
  int thumb_errors = 0;
  for (const auto& r : done) {
    if (static_cast<int>(out["thumbnails"].size()) >= max_thumbs) break;
    json outputs;
    try {
      outputs = json::parse(r.outputs_json);
    } catch (const json::exception&) {
      ++thumb_errors;
      continue;
    }
    for (const auto& o : outputs) {
      if (!o.is_object() || o.value("kind", "") != "png") continue;
      const std::filesystem::path p = std::filesystem::path(r.output_root) / o.value("path", "");
      auto uri = report::png_thumbnail_data_uri(p, thumb_px);
      if (!uri.ok()) {
        ++thumb_errors;
        continue;
      }
      out["thumbnails"].push_back({{"job", r.job_id},
                                   {"prompt", r.prompt},
                                   {"seed", r.seed},
                                   {"repeat", r.repeat_index},
                                   {"verdict", r.verdict ? json(*r.verdict) : json(nullptr)},
                                   {"cosine", r.cosine ? json(*r.cosine) : json(nullptr)},
                                   {"gpu", r.gpu},
                                   {"uri", *uri}});
      break;
    }
  }
  out["thumbnail_errors"] = thumb_errors;
  HIPQ_ASSIGN_OR_RETURN(out["history"], history(db, batches));
  out["generated_at"] = db::wall_clock_seconds();
  return out;
}

}  // namespace hipq::coordinator::query
