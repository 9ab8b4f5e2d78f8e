// The batch cap of the commands that run a coordinator (coordinator, run):
//   --max-batch-jobs N   jobs one manifest may expand to (default 100000, at
//                        most coordinator::kMaxBatchJobsLimit, which
//                        coordinator/manifest.h justifies)
// A manifest past it is refused at submit naming the flag.
// Thread safety: CLI parsing only.
#pragma once

#include <cstdint>

#include <CLI/CLI.hpp>

namespace hipq::cli {

void add_max_batch_jobs_option(CLI::App* cmd, int64_t& max_batch_jobs);

}  // namespace hipq::cli
