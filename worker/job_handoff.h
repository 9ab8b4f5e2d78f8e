// JobHandoff: the mailbox between a worker's two threads (worker/worker.h).
//
// The connection thread gives the job thread one job at a time; the job
// thread posts back its progress and its report (a JobResult or JobError
// envelope) and wakes the connection thread's poll through an eventfd
// (wake_fd(), polled beside the coordinator's socket). Messages are handed
// over as objects, never serialised: the hand-off is two queue operations
// and at most one wake-up each way (docs/benchmarks.md, "Queue throughput").
// Ownership: owns the eventfd. Thread safety: give(), quit() and take() on
// the connection thread, wait_for_job() and post() on the job thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/result.h"
#include "proto/hipq.pb.h"

namespace hipq::worker {

class JobHandoff {
 public:
  // Internal when no eventfd can be made (out of file descriptors).
  static Result<std::unique_ptr<JobHandoff>> create();
  ~JobHandoff();
  JobHandoff(const JobHandoff&) = delete;
  JobHandoff& operator=(const JobHandoff&) = delete;

  // Readable while posted messages wait to be taken.
  int wake_fd() const { return fd_; }

  // Connection thread. The job thread runs one job at a time: give() only
  // after the report of the previous one was taken.
  void give(proto::JobAssignment job);
  // Ends wait_for_job(): the job thread leaves after its current job.
  void quit();
  // What the job thread posted since the last call, in order.
  std::vector<proto::Envelope> take();

  // Job thread: the next job, or nullopt once quit() was called.
  std::optional<proto::JobAssignment> wait_for_job();
  void post(proto::Envelope message);

 private:
  explicit JobHandoff(int fd) : fd_(fd) {}

  int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<proto::JobAssignment> job_;
  bool quit_ = false;
  std::vector<proto::Envelope> posted_;
};

}  // namespace hipq::worker
