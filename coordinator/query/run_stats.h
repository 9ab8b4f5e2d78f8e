// Run statistics: turns run history rows (db/run_queries.h) into the numbers
// `hipq stats`, `hipq compare` and the report show — grouping, per-phase
// descriptive statistics with bootstrap median intervals and outlier counts,
// throughput, and parity across seeds. Used by coordinator/query_service.cpp;
// the JSON shapes are those of docs/statistics.md.
//
// Part of the query layer (coordinator/query/, hipq_query): it reads the
// database (step timings) and applies the pure math of coordinator/statistics/.
//
// Errors: InvalidArgument naming the bad arg, dimension or phase; database
// errors as db/ maps them.
// Thread safety: as the Database.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "base/result.h"
#include "coordinator/statistics/bootstrap.h"
#include "coordinator/query/parity_accumulator.h"
#include "coordinator/query/value_reservoir.h"
#include "db/run_queries.h"

namespace hipq::db {
class Database;
}

namespace hipq::coordinator::query {

// Phases in display order; "step" is each denoising step, "total" the sum of
// a run's phases.
const std::vector<std::string>& known_phases();
Status check_phase_name(const std::string& phase);
// Group dimensions accepted by group_by, besides "tag:NAME".
const std::vector<std::string>& known_dimensions();
// "tag:NAME" groups by the VALUE of a run's tags "NAME:VALUE" (NAME compared
// case-insensitively; several values joined with '+', sorted); runs without
// such a tag form the group kNoTag.
inline const std::string kTagDimension = "tag:";
inline const std::string kNoTag = "(none)";

struct StatsOptions {
  std::vector<std::string> group_by;  // known_dimensions(); empty = one group (per warmth)
  std::string clock = "host";         // "host" | "gpu"
  int resamples = statistics::kDefaultResamples;
  uint64_t seed = statistics::kDefaultSeed;
};

// The run filter keys of query args (query_service.h); InvalidArgument on a
// wrong type or an unparsable time.
Result<db::RunFilter> parse_run_filter(const nlohmann::json& args);
Result<StatsOptions> parse_stats_options(const nlohmann::json& args);
// "since"/"until" values: epoch seconds, "YYYY-MM-DD[THH:MM[:SS]][Z]" (UTC), or "<N>h" / "<N>d" ago.
Result<double> parse_time(const nlohmann::json& value, const char* what, double now);

nlohmann::json run_to_json(const db::RunRow& row);

// One run's timing values on one clock, in milliseconds.
struct RunSample {
  const db::RunRow* row = nullptr;   // borrowed from the caller's rows
  std::map<std::string, double> phases;  // phase → ms ("total" included on the host clock)
  std::vector<double> steps;             // per step, by step index
};
Result<std::vector<RunSample>> load_samples(db::Database& db, const std::vector<db::RunRow>& rows,
                                            const std::string& clock);
// The values of `phase` over samples ("step" pools every step of every run).
std::vector<double> phase_values(std::span<const RunSample> samples, const std::string& phase);

// {"n","mean","sd","min","p50","p90","p95","p99","max","median_ci":[lo,hi],
//  "outliers":{"low_severe","low_mild","high_mild","high_severe"}}; sd null when n < 2.
Result<nlohmann::json> summary_json(std::span<const double> values, const StatsOptions& options);
// The same over a reservoir: exactly the above while it holds every value; past
// its cap, n/mean/sd/min/max are exact, p50…p99, median_ci and the outlier
// counts (scaled to n) come from its sample, and "sample": {"values": kept,
// "of": n} says so.
Result<nlohmann::json> summary_json(const ValueReservoir& values, const StatsOptions& options);

// The value of one group dimension for a run ("resolution" → "1024x1024").
std::string dimension_value(const db::RunRow& row, const std::string& dimension);

// {"group_by","clock","quantiles","resamples","seed","groups":[…]} (docs/statistics.md),
// through a StatsAccumulator (stats_accumulator.h: bounded per group and phase).
Result<nlohmann::json> compute_stats(const std::vector<RunSample>& samples, const StatsOptions& options);

// Parity across seeds: one row per (model, prompt, size, steps, sampler,
// precision, guidance) with cosine min/mean/max, pass rate and the worst job.
nlohmann::json parity_table(const std::vector<db::RunRow>& rows);
// The same a run at a time: the key of a run's row, and the rows of the
// accumulated groups.
using ParityKey = std::tuple<std::string, std::string, int, int, int, std::string, std::string, double, std::string,
                             double, std::string, std::string, std::string>;
ParityKey parity_key(const db::RunRow& row);
nlohmann::json parity_rows(const std::map<ParityKey, ParityAccumulator>& groups);
// The parity block of one set of runs (min/mean/max cosine, pass rate, worst job).
nlohmann::json parity_summary(const std::vector<const db::RunRow*>& rows);

}  // namespace hipq::coordinator::query
