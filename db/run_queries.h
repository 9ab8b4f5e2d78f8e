// Run history queries: the SQL behind `hipq runs`, `hipq stats`,
// `hipq compare` and the HTML report (read-only; never writes).
//
// A "run" is one job as it stands: its settings, state and verdict, and the
// attempt that explains its numbers — the attempt whose result was recorded,
// else the latest attempt — with that attempt's worker (host, GPU, build),
// result (parity metrics, warm/cold, peak memory, outputs) and phase timings.
// Context that explains a number (GPU, host, build) comes from the workers
// table as the worker last reported it.
//
// Filters (RunFilter, all optional, combined with AND):
//   batch     jobs.batch_id =
//   manifest  manifest sha256 prefix, or the manifest path as stored
//   model     substring of jobs.model
//   prompt    case-insensitive substring of the prompt, or an exact tag
//   seed      jobs.seed =
//   gpu       case-insensitive substring of the worker's device name, or its arch
//   host      worker host =
//   build     prefix of the worker's build sha
//   verdict   jobs.verdict = (PASS, FAIL, NO_GOLDEN, NON_FINITE)
//   state     jobs.state =
//   since/until  run time in [since, until): the result's recorded_at, else
//             the attempt's started_at, else the job's created_at
//   warm      results.warm = (only runs with a result match)
//   with_result_only  only runs that have a result (timings exist only there)
// Rows come ordered by job id; limit 0 = no limit; after_job pages.
//
// Errors: SQLite errors as mapped in db/statement.h; Corruption when a
// stored JSON column (tags) does not parse.
// Thread safety: as the Database.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "db/records.h"

namespace hipq::db {

class Database;

struct RunFilter {
  std::optional<int64_t> batch;
  std::optional<std::string> manifest;
  std::optional<std::string> model;
  std::optional<std::string> prompt;
  std::optional<uint64_t> seed;
  std::optional<std::string> gpu;
  std::optional<std::string> host;
  std::optional<std::string> build;
  std::optional<std::string> verdict;
  std::optional<std::string> state;
  std::optional<double> since;
  std::optional<double> until;
  std::optional<bool> warm;
  bool with_result_only = false;
  int64_t limit = 0;
  // Only jobs with a greater id: the next page after a page whose last job
  // this was (keyset paging, so a million runs are read a page at a time).
  std::optional<int64_t> after_job;
};

struct RunRow {
  // job
  int64_t job_id = 0;
  int64_t batch_id = 0;
  std::string batch_name;
  std::string manifest_sha256;
  std::string manifest_path;
  int64_t ordinal = 0;
  std::string model;
  std::string prompt;
  std::vector<std::string> tags;
  uint64_t seed = 0;
  int repeat_index = 0;
  int width = 0, height = 0, steps = 0;
  double guidance = 0;
  std::string sampler, precision;
  std::string timestep_spacing;  // "" = the model's scheduler config
  double guidance_rescale = 0;
  std::string loras_json = "[]";  // jobs.loras: [{"path","scale","sha256"}]
  std::string init_image;         // "" = text-to-image
  double strength = 1;
  std::string refiner;            // "" = none
  std::string vae_precision;      // the decode's dtype; "" = the precision's rule
  std::string state;
  std::optional<std::string> verdict;
  int attempts = 0;
  std::string output_root;  // the batch's
  std::string output_dir;   // the job's, relative to output_root
  double created_at = 0;
  // the attempt shown (none when the job never started)
  std::optional<int64_t> attempt_id;
  std::optional<int> attempt;
  std::optional<std::string> worker_id;
  std::optional<double> started_at, finished_at;
  std::optional<std::string> error;
  // the worker of that attempt (empty when unknown)
  std::string host, gpu, arch, build_sha, backend, runtime_version, driver_version;
  // the result (has_result false: none recorded)
  bool has_result = false;
  bool warm = false;
  std::optional<double> cosine, max_abs, rel_l2, psnr;
  std::optional<int64_t> peak_memory_bytes;
  std::string outputs_json = "[]";
  std::optional<int64_t> batch_size;  // jobs that shared its UNet batch (1 = alone); none without a result
  double time = 0;  // the run time filters compare (see header)
  std::vector<PhaseTimingRecord> phases;  // of the attempt shown, in the one phase order (spec/phases.h)
};

Result<std::vector<RunRow>> query_runs(Database& db, const RunFilter& filter);

// While one lives, a query_runs call on this thread that returns more than
// `max_rows` runs fails (ResourceExhausted, naming both counts) instead:
// for tests that check a reader walks the runs a page at a time
// (coordinator/query/run_pages.h) and never loads them all. One at a time
// per thread; the previous cap comes back when it ends.
class RunRowCap {
 public:
  explicit RunRowCap(int64_t max_rows);
  ~RunRowCap();
  RunRowCap(const RunRowCap&) = delete;
  RunRowCap& operator=(const RunRowCap&) = delete;

 private:
  int64_t previous_;
};

// Phase timings of one attempt, in the one phase order (spec/phases.h).
Result<std::vector<PhaseTimingRecord>> query_phase_timings(Database& db, int64_t attempt_id);
// Step timings of one attempt, ordered by step.
Result<std::vector<StepTimingRecord>> query_step_timings(Database& db, int64_t attempt_id);

}  // namespace hipq::db
