#include "cli/batch_cap_option.h"

#include <string>

#include "coordinator/manifest.h"

namespace hipq::cli {

void add_max_batch_jobs_option(CLI::App* cmd, int64_t& max_batch_jobs) {
  cmd->add_option("--max-batch-jobs", max_batch_jobs,
                  "jobs one manifest may expand to; a larger batch is refused at submit (at most " +
                      std::to_string(coordinator::kMaxBatchJobsLimit) + ")")
      ->check(CLI::Range(int64_t{1}, coordinator::kMaxBatchJobsLimit))
      ->capture_default_str();
}

}  // namespace hipq::cli
