// JobHandoff: the mailbox between a worker's two threads (worker/worker.h).
//
// The connection thread gives the job thread one batch at a time (one job,
// or several run together: docs/protocol.md "Batching"), each job with its
// own cancel flag; the job thread posts back its progress and its report (a JobResult or JobError
// envelope) and wakes the connection thread's poll through an eventfd
// (wake_fd(), polled beside the coordinator's socket). Messages are handed
// over as objects, never serialised: the hand-off is two queue operations
// and at most one wake-up each way (docs/benchmarks.md, "Queue throughput").
// Ownership: owns the eventfd. Thread safety: give(), quit() and take() on
// the connection thread, wait_for_job() and post() on the job thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/result.h"
#include "proto/hipq.pb.h"

namespace hipq::worker {

// Jobs run together, each with the flag that cancels it alone. The
// connection thread keeps its own reference to each flag (to set it on a
// Cancel); the job thread reads them.
struct JobBatch {
  std::vector<proto::JobAssignment> jobs;
  std::vector<std::shared_ptr<std::atomic<bool>>> cancel;  // one per job, same order
};

class JobHandoff {
 public:
  // Internal when no eventfd can be made (out of file descriptors).
  static Result<std::unique_ptr<JobHandoff>> create();
  ~JobHandoff();
  JobHandoff(const JobHandoff&) = delete;
  JobHandoff& operator=(const JobHandoff&) = delete;

  // Readable while posted messages wait to be taken.
  int wake_fd() const { return fd_; }

  // Connection thread. The job thread runs one batch at a time: give() only
  // after the reports of the previous one were taken. A batch has at least
  // one job and one cancel flag per job (checked: a bug otherwise).
  void give(JobBatch batch);
  // One job alone, with a flag of its own.
  void give(proto::JobAssignment job);
  // Ends wait_for_job(): the job thread leaves after its current job.
  void quit();
  // What the job thread posted since the last call, in order.
  std::vector<proto::Envelope> take();

  // Job thread: the next batch, or nullopt once quit() was called.
  std::optional<JobBatch> wait_for_job();
  void post(proto::Envelope message);

 private:
  explicit JobHandoff(int fd) : fd_(fd) {}

  int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<JobBatch> job_;
  bool quit_ = false;
  std::vector<proto::Envelope> posted_;
};

}  // namespace hipq::worker
