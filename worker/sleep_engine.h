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
//
// Batching (docs/protocol.md "Batching"): batch_key() is the model and the
// settings a real engine must share to run UNet steps together (width,
// height, steps, sampler, precision, timestep spacing, guidance, guidance
// rescale, LoRAs, init image and strength, refiner), so jobs of one manifest
// entry batch and jobs of another model or size never do. max_batch() is
// proto::kMaxBatch. run_batch() sleeps `duration` ONCE for the whole batch
// (in slices of the longest job's steps, each job's cancel flag read between
// slices: a cancelled job ends Cancelled alone, the others sleep on) and sets
// batch_size on each result to the jobs given; a job whose prompt carries a
// failure marker fails alone, before the sleep, as run() fails it.
// Thread safety: run() and run_batch() on one thread; the rest is immutable.
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
  std::string batch_key(const JobAssignment& job) const override;
  int max_batch() const override;
  // InvalidArgument for every job when `jobs` is empty of more than
  // max_batch(), the vectors differ in length or the jobs' keys differ (a
  // caller bug, said so rather than run).
  std::vector<Result<proto::JobResult>> run_batch(const std::vector<JobAssignment>& jobs,
                                                  const std::vector<ProgressSink*>& progress,
                                                  const std::vector<const std::atomic<bool>*>& cancel) override;

 private:
  std::chrono::microseconds duration_;
  int device_index_;
  std::string last_model_;
};

}  // namespace hipq::worker
