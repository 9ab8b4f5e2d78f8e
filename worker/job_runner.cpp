#include "worker/job_runner.h"

namespace hipq::worker {

bool is_configuration_error(const Status& s) { return s.code() == StatusCode::kFailedPrecondition; }

bool is_retryable(const Status& s) {
  switch (s.code()) {
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kIOError:
    case StatusCode::kInternal:
      return true;
    default:
      return false;
  }
}

std::vector<Result<proto::JobResult>> JobRunner::run_batch(const std::vector<JobAssignment>& jobs,
                                                           const std::vector<ProgressSink*>& progress,
                                                           const std::vector<const std::atomic<bool>*>& cancel) {
  std::vector<Result<proto::JobResult>> out;
  out.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) out.push_back(run(jobs[i], *progress[i], *cancel[i]));
  return out;
}

}  // namespace hipq::worker
