#include "worker/job_handoff.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/check.h"

namespace hipq::worker {

Result<std::unique_ptr<JobHandoff>> JobHandoff::create() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return Status::Internal(std::string("job hand-off: eventfd: ") + std::strerror(errno));
  return std::unique_ptr<JobHandoff>(new JobHandoff(fd));
}

JobHandoff::~JobHandoff() { ::close(fd_); }

void JobHandoff::give(JobBatch batch) {
  HIPQ_CHECK(!batch.jobs.empty() && batch.jobs.size() == batch.cancel.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(batch);
  }
  cv_.notify_one();
}

void JobHandoff::give(proto::JobAssignment job) {
  JobBatch batch;
  batch.jobs.push_back(std::move(job));
  batch.cancel.push_back(std::make_shared<std::atomic<bool>>(false));
  give(std::move(batch));
}

void JobHandoff::quit() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_one();
}

std::vector<proto::Envelope> JobHandoff::take() {
  // Reset the eventfd before taking: a post after this read finds the list
  // empty or not yet taken, and either writes the eventfd again or is taken
  // now; none is left without a wake-up.
  uint64_t count = 0;
  (void)!::read(fd_, &count, sizeof count);
  std::vector<proto::Envelope> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.swap(posted_);
  return out;
}

std::optional<JobBatch> JobHandoff::wait_for_job() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return quit_ || job_.has_value(); });
  if (quit_) return std::nullopt;
  std::optional<JobBatch> job = std::move(job_);
  job_.reset();
  return job;
}

void JobHandoff::post(proto::Envelope message) {
  bool was_empty = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_empty = posted_.empty();
    posted_.push_back(std::move(message));
  }
  if (was_empty) {
    const uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);
  }
}

}  // namespace hipq::worker
