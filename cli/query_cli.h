// Shared pieces of the history commands (`hipq runs`, `stats`, `compare`,
// `report`): where the query goes (--db FILE locally, --connect ENDPOINT
// through a coordinator; the same coordinator/query_service.h code answers),
// the run filter flags, and table/CSV output.
// Thread safety: single-threaded CLI code.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "coordinator/query_service.h"

namespace hipq::cli {

struct QueryFlags {
  std::string db;          // default: $HIPQ_DB, else ./hipq.db (when --connect is not given)
  std::string connect;     // tcp://host:port of a coordinator
  std::string key;         // CURVE client key pair file (hipq keygen)
  std::string server_key;  // the coordinator's public key (file or Z85)
  double timeout_s = 120;
};
void add_query_flags(CLI::App* cmd, QueryFlags& flags);
Result<coordinator::QueryTarget> make_query_target(const QueryFlags& flags);

// Run filters (db/run_queries.h); `prefix` names them for selectors.
struct FilterFlags {
  std::optional<int64_t> batch;
  std::string manifest, model, prompt, gpu, host, build, verdict, state, since, until;
  std::optional<uint64_t> seed;
  std::string warmth;  // "", warm, cold
};
void add_filter_flags(CLI::App* cmd, FilterFlags& flags);
nlohmann::json filter_args(const FilterFlags& flags);

// Prints the error to stderr and returns the exit code for it
// (kExitUsage for InvalidArgument, kExitFailure otherwise).
int report_failure(const Status& status, const char* command);

// Column-aligned text table; columns listed in `right` are right-aligned.
std::string format_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                         const std::vector<bool>& right);
// RFC 4180 CSV line (quotes fields holding comma, quote or newline).
std::string csv_line(const std::vector<std::string>& fields);

// Number formatting for tables: %.4g, "-" for null.
std::string fmt_num(const nlohmann::json& v, int precision = 4);
std::string fmt_fixed(const nlohmann::json& v, int decimals);
// A byte count as GiB with two decimals; "-" when not a number.
std::string fmt_gib(const nlohmann::json& bytes);
std::string fmt_text(const nlohmann::json& v);
std::string fmt_time(const nlohmann::json& epoch_seconds);

}  // namespace hipq::cli
