#include "coordinator/query/stats_accumulator.h"

#include "coordinator/statistics/descriptive.h"

namespace hipq::coordinator::query {

using nlohmann::json;

StatsAccumulator::StatsAccumulator(StatsOptions options, size_t cap) : options_(std::move(options)), cap_(cap) {}

void StatsAccumulator::add(const RunSample& s) {
  std::vector<std::string> key;
  for (const auto& d : options_.group_by) key.push_back(dimension_value(*s.row, d));
  auto [it, fresh] = groups_.try_emplace({key, s.row->warm ? 0 : 1});
  Group& g = it->second;
  if (fresh) g.peaks = ValueReservoir(cap_);
  auto reservoir = [&](const std::string& phase) -> ValueReservoir& {
    return g.phases.try_emplace(phase, cap_).first->second;
  };
  ++g.runs;
  for (const auto& [phase, v] : s.phases) reservoir(phase).add(v);
  if (!s.steps.empty()) {
    auto& steps = reservoir("step");
    for (double v : s.steps) steps.add(v);
  }
  if (s.row->worker_id) g.workers.insert(*s.row->worker_id);
  if (s.row->peak_memory_bytes) g.peaks.add(static_cast<double>(*s.row->peak_memory_bytes));
  g.parity.add(*s.row);
}

Result<json> StatsAccumulator::to_json() const {
  json out_groups = json::array();
  for (const auto& [gk, g] : groups_) {
    json key = json::object();
    for (size_t i = 0; i < options_.group_by.size(); ++i) key[options_.group_by[i]] = gk.first[i];
    json phases = json::array();
    for (const auto& ph : known_phases()) {
      auto it = g.phases.find(ph);
      if (it == g.phases.end() || it->second.count() == 0) continue;
      HIPQ_ASSIGN_OR_RETURN(json sj, summary_json(it->second, options_));
      sj["phase"] = ph;
      phases.push_back(std::move(sj));
    }
    json throughput = json::object();
    auto rate = [&g](const char* phase, double scale) -> json {
      auto it = g.phases.find(phase);
      if (it == g.phases.end() || it->second.count() == 0) return nullptr;
      return scale * static_cast<double>(it->second.count()) / it->second.sum();
    };
    throughput["steps_per_s"] = rate("step", 1000.0);
    throughput["images_per_hour"] = rate("total", 3.6e6);
    // Device memory a job of the group needed (the backend's peak, resident weights included).
    json memory = {{"runs", g.peaks.count()}, {"peak_bytes_max", nullptr}, {"peak_bytes_p50", nullptr}};
    if (g.peaks.count() > 0) {
      HIPQ_ASSIGN_OR_RETURN(statistics::Summary ps, statistics::summarize(g.peaks.values()));
      memory["peak_bytes_max"] = static_cast<int64_t>(g.peaks.max());
      memory["peak_bytes_p50"] = ps.p50;
    }
    out_groups.push_back(json{{"key", key},
                              {"warmth", gk.second == 0 ? "warm" : "cold"},
                              {"runs", g.runs},
                              {"workers", g.workers.size()},
                              {"phases", phases},
                              {"throughput", throughput},
                              {"memory", memory},
                              {"parity", g.parity.to_json()}});
  }
  return json{{"group_by", options_.group_by},
              {"clock", options_.clock},
              {"unit", "ms"},
              {"quantiles", "linear interpolation (numpy default, Hyndman-Fan type 7)"},
              {"median_ci", "bootstrap percentile, 95%"},
              {"resamples", options_.resamples},
              {"seed", options_.seed},
              {"groups", out_groups}};
}

Result<json> stream_stats(db::Database& db, const db::RunFilter& filter, const StatsOptions& options) {
  db::RunFilter f = filter;
  f.with_result_only = true;
  StatsAccumulator acc(options);
  HIPQ_RETURN_IF_ERROR(for_each_run_page(db, f, [&](std::vector<db::RunRow>& page) -> Status {
    HIPQ_ASSIGN_OR_RETURN(auto samples, load_samples(db, page, options.clock));
    for (const auto& s : samples) acc.add(s);
    return Status::Ok();
  }));
  return acc.to_json();
}

Result<json> stream_parity(db::Database& db, const db::RunFilter& filter, int64_t page_size) {
  db::RunFilter f = filter;
  f.with_result_only = true;
  std::map<ParityKey, ParityAccumulator> groups;
  HIPQ_RETURN_IF_ERROR(for_each_run_page(
      db, f,
      [&](std::vector<db::RunRow>& page) -> Status {
        for (const auto& r : page) groups[parity_key(r)].add(r);
        return Status::Ok();
      },
      page_size));
  return json{{"rows", parity_rows(groups)}};
}

Result<PhaseValues> stream_phase_values(db::Database& db, const db::RunFilter& filter, const std::string& clock,
                                        const std::string& phase, int64_t page_size) {
  db::RunFilter f = filter;
  f.with_result_only = true;
  PhaseValues out;
  HIPQ_RETURN_IF_ERROR(for_each_run_page(
      db, f,
      [&](std::vector<db::RunRow>& page) -> Status {
        HIPQ_ASSIGN_OR_RETURN(auto samples, load_samples(db, page, clock));
        for (double v : phase_values(samples, phase)) out.values.add(v);
        out.runs += page.size();
        return Status::Ok();
      },
      page_size));
  return out;
}

}  // namespace hipq::coordinator::query
