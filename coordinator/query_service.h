// Query service: answers history and statistics questions from the
// database, for `hipq runs/stats/compare/report` on a local .db file and for
// remote users through the coordinator's QueryRequest (the same function
// answers both, so local and remote output are identical).
//
//   Result<nlohmann::json> run_query(db, kind, args)
//
// kinds and their args (every kind accepts the run filter keys below):
//   "runs"        → {"runs": [run…]}                       (+ "limit", "after": a job id, for pages)
//   "stats"       → {"groups": [group…], …}  args "group_by": [dims], "clock": "host"|"gpu",
//                   "resamples", "seed"
//   "compare"     → {"a": side, "b": side, "ratio", "ratio_ci", "p", "verdict", …}
//                   args "a", "b": selector objects (filter keys), "phase" (default "total"),
//                   "warmth": "warm"|"cold"|"all" (default "warm"), "threshold", "alpha",
//                   "clock", "resamples", "seed"
//   "parity"      → {"rows": [one per prompt+settings across seeds]}
//   "report-data" → everything the HTML report draws, for one batch
//                   args "batch" (default: the newest), "thumbnails" (max count, default 24),
//                   "thumbnail_px" (default 160)
// Run filter keys: batch, manifest, model, prompt (or "tag"), seed, gpu, host, build,
// verdict, state, since, until (epoch seconds, "YYYY-MM-DD[THH:MM[:SS]]" UTC, or
// "<N>h"/"<N>d" ago), warm (bool). Meanings in db/run_queries.h.
// Group dimensions: model, resolution, steps, precision, sampler, gpu, host, build,
// batch, day (UTC date of the run). Warm and cold runs are always separate groups.
// Phases: load, text_encode, denoise, step (each denoising step, pooled), decode,
// write, parity, total (sum of the run's recorded phases, host clock only).
// The JSON shapes are documented in docs/statistics.md.
//
// Errors: InvalidArgument for an unknown kind, dimension, phase or arg of the
// wrong type (naming it); NotFound for an unknown batch; FailedPrecondition
// when a comparison side has too few runs; database errors as db/ maps them.
// Thread safety: as the Database (the coordinator calls it from its loop).
#pragma once

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "proto/transport.h"

namespace hipq::db {
class Database;
}

namespace hipq::coordinator {

Result<nlohmann::json> run_query(db::Database& db, std::string_view kind, const nlohmann::json& args);

// Where a CLI query goes: a local database file (opened, must exist, at the
// latest schema; never migrated by a query) or a coordinator endpoint (the
// QueryRequest call, answered by run_query there). Exactly one is set.
struct QueryTarget {
  std::filesystem::path db_path;
  std::string endpoint;
  std::optional<proto::CurveClientKeys> curve;
  std::chrono::milliseconds timeout{120000};
};

// run_query on the target. Errors: InvalidArgument when neither or both are
// set; NotFound when the database file does not exist; FailedPrecondition
// when its schema is older than this hipq (start the coordinator once to
// migrate it); Unavailable when the coordinator does not answer.
Result<nlohmann::json> run_query_at(const QueryTarget& target, std::string_view kind, const nlohmann::json& args);

}  // namespace hipq::coordinator
