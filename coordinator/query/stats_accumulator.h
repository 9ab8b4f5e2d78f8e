// Stats accumulator: the statistics of `hipq stats` and the report
// (run_stats.h compute_stats, docs/statistics.md) built one run at a time, in
// memory bounded by the number of groups, not of runs.
//
// Per group (the group_by key and warm/cold): the run count, the workers, a
// ValueReservoir per phase (every value while a group's phase has at most
// kReservoirCap of them, else a fixed-seed uniform sample of that many), one
// for device memory peaks, and a ParityAccumulator. Below the cap the JSON is
// the one computed from every value; past it, count, mean, sd, min, max and
// throughput stay exact and the quantiles, median interval and outlier counts
// come from the sample (the phase's summary then carries "sample").
//
// Errors: to_json passes on summary_json's (statistics over empty/NaN input).
// Thread safety: none.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "coordinator/query/parity_accumulator.h"
#include "coordinator/query/run_pages.h"
#include "coordinator/query/run_stats.h"
#include "coordinator/query/value_reservoir.h"

namespace hipq::coordinator::query {

class StatsAccumulator {
 public:
  explicit StatsAccumulator(StatsOptions options, size_t cap = kReservoirCap);

  // The sample's row is read during the call only.
  void add(const RunSample& s);
  // {"group_by","clock",…,"groups":[…]} as compute_stats documents.
  Result<nlohmann::json> to_json() const;

 private:
  struct Group {
    size_t runs = 0;
    std::set<std::string> workers;
    std::map<std::string, ValueReservoir> phases;  // phase → values (ms)
    ValueReservoir peaks;
    ParityAccumulator parity;
  };
  StatsOptions options_;
  size_t cap_;
  // Ordered: groups print sorted by key, warm before cold.
  std::map<std::pair<std::vector<std::string>, int>, Group> groups_;
};

// compute_stats over the runs a filter selects, read a page at a time
// (run_pages.h): the "stats" query.
Result<nlohmann::json> stream_stats(db::Database& db, const db::RunFilter& filter, const StatsOptions& options);

// `hipq parity`'s rows ({"rows": parity_rows}) over the runs with a result
// that `filter` selects, read `page_size` runs at a time (run_pages.h): memory
// bounded by the groups (model, prompt, settings), not the runs.
Result<nlohmann::json> stream_parity(db::Database& db, const db::RunFilter& filter,
                                     int64_t page_size = kRunPageSize);

// One side of `hipq compare`: the values of `phase` ("step" pools every step)
// on `clock` over the runs with a result that `filter` selects, read a page at
// a time into a reservoir (value_reservoir.h: every value up to its cap, a
// uniform sample past it; count, mean, min, max exact).
struct PhaseValues {
  size_t runs = 0;
  ValueReservoir values;
};
Result<PhaseValues> stream_phase_values(db::Database& db, const db::RunFilter& filter, const std::string& clock,
                                        const std::string& phase, int64_t page_size = kRunPageSize);

}  // namespace hipq::coordinator::query
