// SleepEngine: a TEST DOUBLE JobRunner that does no diffusion at all.
//
// It waits `duration` per job (in `steps` slices, reporting progress and
// honouring cancel between them), writes nothing, and reports verdict
// NO_GOLDEN with one "denoise" phase timing equal to the time slept and one
// "step" timing per slice (as the engine times its steps). With a
// zero duration it measures the queue's own overhead (the throughput
// benchmark). Selected with `hipq worker --engine sleep:20ms`; never the
// default. A job whose prompt contains "[fail]" fails with InvalidArgument
// (not retryable) and one containing "[oom]" with ResourceExhausted
// (retryable), and one containing "[config]" with FailedPrecondition (a
// configuration error), so tests can drive the failure paths through real
// processes.
// Thread safety: run() on one thread; the rest is immutable.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/result.h"
#include "worker/job_runner.h"

namespace hipq::worker {

class SleepEngine final : public JobRunner {
 public:
  explicit SleepEngine(std::chrono::microseconds duration, int device_index = 0)
      : duration_(duration), device_index_(device_index) {}
  // "sleep", "sleep:20ms", "sleep:1.5s", "sleep:0". InvalidArgument otherwise.
  static Result<std::chrono::microseconds> parse_spec(std::string_view spec);

  void describe(proto::WorkerHello& hello) const override;
  std::vector<std::string> loaded_models() const override;
  Result<proto::JobResult> run(const JobAssignment& job, ProgressSink& progress,
                               const std::atomic<bool>& cancel) override;

 private:
  std::chrono::microseconds duration_;
  int device_index_;
  std::string last_model_;
};

}  // namespace hipq::worker
