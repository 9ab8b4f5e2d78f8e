#include "coordinator/query_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/client.h"
#include "coordinator/query/report_data.h"
#include "coordinator/query/run_stats.h"
#include "coordinator/query/stats_accumulator.h"
#include "coordinator/statistics/comparison.h"
#include "db/database.h"
#include "db/run_queries.h"
#include "db/schema.h"

namespace hipq::coordinator {
namespace {

using nlohmann::json;
using namespace query;  // run_stats helpers

Result<json> query_runs_json(db::Database& db, const json& args) {
  HIPQ_ASSIGN_OR_RETURN(db::RunFilter filter, parse_run_filter(args));
  HIPQ_ASSIGN_OR_RETURN(auto rows, db::query_runs(db, filter));
  json runs = json::array();
  for (const auto& r : rows) runs.push_back(run_to_json(r));
  return json{{"runs", std::move(runs)}};
}

Result<json> query_stats_json(db::Database& db, const json& args) {
  HIPQ_ASSIGN_OR_RETURN(db::RunFilter filter, parse_run_filter(args));
  HIPQ_ASSIGN_OR_RETURN(StatsOptions options, parse_stats_options(args));
  return stream_stats(db, filter, options);  // a page of runs at a time
}

Result<json> query_parity_json(db::Database& db, const json& args) {
  HIPQ_ASSIGN_OR_RETURN(db::RunFilter filter, parse_run_filter(args));
  return stream_parity(db, filter);  // a page of runs at a time
}

Result<json> query_compare_json(db::Database& db, const json& args) {
  if (!args.contains("a") || !args.contains("b") || !args["a"].is_object() || !args["b"].is_object()) {
    return Status::InvalidArgument(
        "compare: args need \"a\" and \"b\", each an object of run filters, e.g. {\"build\": \"abc123\"}");
  }
  HIPQ_ASSIGN_OR_RETURN(StatsOptions options, parse_stats_options(args));
  std::string phase = "total";
  std::string warmth = "warm";
  statistics::CompareOptions copt;
  copt.bootstrap.resamples = options.resamples;
  copt.bootstrap.seed = options.seed;
  try {
    if (args.contains("phase")) phase = args["phase"].get<std::string>();
    if (args.contains("warmth")) warmth = args["warmth"].get<std::string>();
    if (args.contains("threshold")) copt.noise_threshold = args["threshold"].get<double>();
    if (args.contains("alpha")) copt.alpha = args["alpha"].get<double>();
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("compare: phase/warmth must be strings and threshold/alpha numbers: ") +
                                   e.what());
  }
  HIPQ_RETURN_IF_ERROR(check_phase_name(phase));
  if (warmth != "warm" && warmth != "cold" && warmth != "all") {
    return Status::InvalidArgument("compare: warmth \"" + warmth + "\" is not one of warm, cold, all");
  }
  json result;
  // Each side a page of runs at a time into a reservoir: a million runs a side
  // cost its cap of values, not every run (past the cap the test and the
  // ratio's interval use its uniform sample; its summary says so).
  std::optional<PhaseValues> values[2];
  const char* sides[2] = {"a", "b"};
  for (int s = 0; s < 2; ++s) {
    // The side's selector narrows the common filter (args' own filter keys).
    json merged = args;
    for (const auto& [k, v] : args[sides[s]].items()) merged[k] = v;
    HIPQ_ASSIGN_OR_RETURN(db::RunFilter filter, parse_run_filter(merged));
    filter.with_result_only = true;
    if (warmth != "all") filter.warm = (warmth == "warm");
    HIPQ_ASSIGN_OR_RETURN(values[s], stream_phase_values(db, filter, options.clock, phase));
    const ValueReservoir& v = values[s]->values;
    json side{{"selector", args[sides[s]]}, {"runs", values[s]->runs}, {"n", v.count()}};
    if (v.count() > 0) {
      HIPQ_ASSIGN_OR_RETURN(side["summary"], summary_json(v, options));
    }
    result[sides[s]] = std::move(side);
  }
  auto cmp = statistics::compare_samples(values[0]->values.values(), values[1]->values.values(), copt);
  if (!cmp.ok()) {
    return cmp.status().WithContext("compare " + phase + " (" + warmth + " runs, A = " + args["a"].dump() +
                                    ", B = " + args["b"].dump() + ")");
  }
  result["phase"] = phase;
  result["warmth"] = warmth;
  result["clock"] = options.clock;
  result["median_a"] = cmp->median_a;
  result["median_b"] = cmp->median_b;
  result["ratio"] = cmp->ratio.estimate;
  result["ratio_ci"] = json::array({cmp->ratio.low, cmp->ratio.high});
  result["confidence"] = copt.bootstrap.level;
  result["u"] = cmp->test.u;
  result["p"] = cmp->test.p;
  result["test"] = std::string("Mann-Whitney U, ") + std::string(cmp->test.method());
  result["effect"] = cmp->test.effect;
  result["alpha"] = copt.alpha;
  result["threshold"] = copt.noise_threshold;
  result["resamples"] = copt.bootstrap.resamples;
  result["seed"] = copt.bootstrap.seed;
  result["verdict"] = std::string(statistics::verdict_name(cmp->verdict));
  result["reason"] = cmp->reason;
  return result;
}

}  // namespace

Result<json> run_query(db::Database& db, std::string_view kind, const json& args) {
  const json& a = args.is_null() ? json::object() : args;
  if (!a.is_object()) {
    return Status::InvalidArgument("query \"" + std::string(kind) + "\": args must be a JSON object");
  }
  if (kind == "runs") return query_runs_json(db, a);
  if (kind == "stats") return query_stats_json(db, a);
  if (kind == "compare") return query_compare_json(db, a);
  if (kind == "parity") return query_parity_json(db, a);
  if (kind == "report-data") return query::build_report_data(db, a);
  return Status::InvalidArgument("unknown query kind \"" + std::string(kind) +
                                 "\"; known: runs, stats, compare, parity, report-data");
}

Result<json> run_query_at(const QueryTarget& target, std::string_view kind, const json& args) {
  const bool local = !target.db_path.empty(), remote = !target.endpoint.empty();
  if (local == remote) {
    return Status::InvalidArgument("give either a database file (--db) or a coordinator endpoint (--connect)");
  }
  if (remote) {
    zmq::context_t context;
    ClientOptions options;
    options.endpoint = target.endpoint;
    options.curve = target.curve;
    options.timeout = target.timeout;
    HIPQ_ASSIGN_OR_RETURN(auto client, Client::connect(context, options));
    auto r = client->query(std::string(kind), args);
    client.reset();  // closes the socket before the context goes
    return r;
  }
  db::Database::Options options;
  options.must_exist = true;
  auto opened = db::Database::open(target.db_path, options);
  if (!opened.ok()) return opened.status();
  auto& database = *opened.value();
  HIPQ_ASSIGN_OR_RETURN(int version, db::schema_version(database));
  if (version != db::kLatestSchemaVersion) {
    return Status::FailedPrecondition("database " + target.db_path.string() + " is at schema version " +
                                      std::to_string(version) + ", this hipq reads version " +
                                      std::to_string(db::kLatestSchemaVersion) +
                                      "; start `hipq coordinator` on it once to migrate (queries never write)");
  }
  return run_query(database, kind, args);
}

}  // namespace hipq::coordinator
