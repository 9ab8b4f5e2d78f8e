#include "coordinator/query/report_data.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "coordinator/report/thumbnail.h"
#include "coordinator/statistics/descriptive.h"
#include "coordinator/query/parity_accumulator.h"
#include "coordinator/query/run_pages.h"
#include "coordinator/query/run_stats.h"
#include "coordinator/query/run_table.h"
#include "coordinator/query/stats_accumulator.h"
#include "coordinator/query/value_reservoir.h"
#include "db/database.h"
#include "db/job_store.h"
#include "db/run_queries.h"

namespace hipq::coordinator::query {

using nlohmann::json;
namespace st = hipq::coordinator::statistics;

namespace {

// One point per (batch, build) of the newest kHistoryBatches batches, oldest
// first: the median host ms of each phase over the runs with a result.
constexpr size_t kHistoryBatches = 50;

Result<json> history(db::Database& db, const std::vector<db::BatchRecord>& batches) {
  json out = json::array();
  const size_t first = batches.size() > kHistoryBatches ? batches.size() - kHistoryBatches : 0;
  struct Build {
    size_t runs = 0;
    std::map<std::string, ValueReservoir> phases;
    ValueReservoir times;
  };
  auto median = [](const ValueReservoir& r) {
    std::vector<double> v = r.values();
    std::sort(v.begin(), v.end());
    return st::quantile_sorted(v, 0.5);
  };
  for (size_t i = first; i < batches.size(); ++i) {
    db::RunFilter f;
    f.batch = batches[i].id;
    f.with_result_only = true;
    std::map<std::string, Build> by_build;
    HIPQ_RETURN_IF_ERROR(for_each_run_page(db, f, [&](std::vector<db::RunRow>& page) -> Status {
      for (const auto& r : page) {
        Build& b = by_build[r.build_sha.empty() ? "?" : r.build_sha];
        ++b.runs;
        double total = 0;
        for (const auto& p : r.phases) {
          b.phases[p.phase].add(p.host_ms);
          total += p.host_ms;
        }
        if (!r.phases.empty()) b.phases["total"].add(total);
        b.times.add(r.time);
      }
      return Status::Ok();
    }));
    for (const auto& [build, b] : by_build) {
      json medians = json::object();
      for (const auto& [phase, v] : b.phases) medians[phase] = median(v);
      out.push_back({{"batch", batches[i].id},
                     {"name", batches[i].name},
                     {"build", build},
                     {"runs", b.runs},
                     {"time", median(b.times)},
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
  int64_t runs_table = static_cast<int64_t>(kRunTableCap);
  StatsOptions sopt;
  try {
    if (args.contains("batch") && !args["batch"].is_null()) batch_id = args["batch"].get<int64_t>();
    if (args.contains("thumbnails")) max_thumbs = args["thumbnails"].get<int>();
    if (args.contains("thumbnail_px")) thumb_px = args["thumbnail_px"].get<int>();
    if (args.contains("resamples")) sopt.resamples = args["resamples"].get<int>();
    if (args.contains("runs_table")) runs_table = args["runs_table"].get<int64_t>();
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("report-data: batch, thumbnails, thumbnail_px, resamples and "
                                               "runs_table are integers: ") + e.what());
  }
  if (thumb_px < 16 || thumb_px > 1024) {
    return Status::InvalidArgument("report-data: thumbnail_px " + std::to_string(thumb_px) + " is outside 16..1024");
  }
  if (runs_table < 2 || runs_table > 1000000) {
    return Status::InvalidArgument("report-data: runs_table " + std::to_string(runs_table) +
                                   " is outside 2..1000000 (the most runs the report's table lists in full)");
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

  // One pass over the batch, a page of runs at a time; everything below is
  // bounded by the number of workers, GPUs, phases, steps and parity groups,
  // not by the number of runs (value reservoirs past kReservoirCap values).
  std::map<std::string, json> workers;
  sopt.group_by = {"gpu"};
  StatsAccumulator stats(sopt);
  // Values for the distribution plots, per (gpu, warmth, phase).
  std::map<std::tuple<std::string, std::string, std::string>, ValueReservoir> by_key;
  // Step-time traces: per (gpu, warmth), the runs and a reservoir per step index.
  struct Trace {
    size_t runs = 0;
    std::vector<ValueReservoir> at;
  };
  std::map<std::pair<std::string, std::string>, Trace> traces;
  std::map<ParityKey, ParityAccumulator> parity;
  const auto table_cap = static_cast<size_t>(runs_table);
  RunTable table(table_cap, table_cap / 2, table_cap - table_cap / 2);
  json thumbnails = json::array();
  int thumb_errors = 0;

  db::RunFilter filter;
  filter.batch = batch_id;
  HIPQ_RETURN_IF_ERROR(for_each_run_page(db, filter, [&](std::vector<db::RunRow>& page) -> Status {
    std::vector<db::RunRow> done;
    for (auto& r : page) {
      table.add(r);
      if (r.worker_id) {
        workers[*r.worker_id] = {{"worker", *r.worker_id}, {"host", r.host},       {"gpu", r.gpu},
                                 {"arch", r.arch},         {"build", r.build_sha}, {"backend", r.backend},
                                 {"runtime_version", r.runtime_version},           {"driver_version", r.driver_version}};
      }
      if (r.has_result) done.push_back(std::move(r));
    }
    HIPQ_ASSIGN_OR_RETURN(auto samples, load_samples(db, done, "host"));
    for (const auto& s : samples) {
      stats.add(s);
      const std::string gpu = dimension_value(*s.row, "gpu");
      const std::string warmth = s.row->warm ? "warm" : "cold";
      for (const auto& [phase, v] : s.phases) by_key[{gpu, warmth, phase}].add(v);
      auto& steps = by_key[{gpu, warmth, "step"}];
      for (double v : s.steps) steps.add(v);
      Trace& t = traces[{gpu, warmth}];
      ++t.runs;
      if (t.at.size() < s.steps.size()) t.at.resize(s.steps.size());
      for (size_t i = 0; i < s.steps.size(); ++i) t.at[i].add(s.steps[i]);
    }
    for (const auto& r : done) {
      parity[parity_key(r)].add(r);
      if (static_cast<int>(thumbnails.size()) >= max_thumbs) continue;
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
        thumbnails.push_back({{"job", r.job_id},
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
    return Status::Ok();
  }));

  out["workers"] = json::array();
  for (auto& [_, w] : workers) out["workers"].push_back(w);
  HIPQ_ASSIGN_OR_RETURN(out["stats"], stats.to_json());

  out["samples"] = json::array();
  for (const auto& ph : known_phases()) {
    for (const auto& [k, v] : by_key) {
      if (std::get<2>(k) != ph || v.count() == 0) continue;
      json sample{{"gpu", std::get<0>(k)}, {"warmth", std::get<1>(k)}, {"phase", ph}, {"values", v.values()}};
      if (!v.exact()) sample["of"] = v.count();  // values is a uniform sample of this many
      out["samples"].push_back(std::move(sample));
    }
  }
  // Step-time traces: per step index, the median and the 10th/90th percentile
  // across the group's runs.
  out["step_traces"] = json::array();
  for (const auto& [k, t] : traces) {
    if (t.at.empty()) continue;
    json med = json::array(), lo = json::array(), hi = json::array();
    for (const auto& r : t.at) {
      std::vector<double> at = r.values();
      std::sort(at.begin(), at.end());
      med.push_back(st::quantile_sorted(at, 0.5));
      lo.push_back(st::quantile_sorted(at, 0.1));
      hi.push_back(st::quantile_sorted(at, 0.9));
    }
    out["step_traces"].push_back({{"gpu", k.first}, {"warmth", k.second}, {"runs", t.runs},
                                  {"median", med}, {"low", lo}, {"high", hi}});
  }
  out["parity"] = parity_rows(parity);
  out["runs"] = table.runs();
  if (table.capped()) out["runs_table"] = table.summary();
  out["thumbnails"] = std::move(thumbnails);
  out["thumbnail_errors"] = thumb_errors;
  HIPQ_ASSIGN_OR_RETURN(out["history"], history(db, batches));
  out["generated_at"] = db::wall_clock_seconds();
  return out;
}

}  // namespace hipq::coordinator::query
