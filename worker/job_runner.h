// JobRunner: what a worker runs a job with.
//
// Implementations: EngineJobRunner (worker/engine_job_runner.h: the real
// diffusion pipeline, outputs and parity) and SleepEngine
// (worker/sleep_engine.h: a test double that only waits, for queue tests and
// benchmarks). The worker's connection loop (worker/worker.h) owns one
// runner and calls run() on its job thread, one job at a time; describe()
// and loaded_models() are called on the connection thread only while no job
// runs (the job thread hands each outcome over through the JobHandoff's
// mutex, which orders the two).
//
// run() returns the finished job (a parity FAIL is a finished job) or the
// Status that says why it failed, named so an operator can act on it:
// ResourceExhausted (out of device memory), NotFound/Corruption (model files),
// FailedPrecondition (a configuration error: output root not writable, model
// not loadable; see is_configuration_error), InvalidArgument (settings),
// Cancelled (the cancel flag turned true). The worker reports it and carries
// on with the next job.
#pragma once

#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "proto/hipq.pb.h"

namespace hipq::worker {

using JobAssignment = proto::JobAssignment;

// Receives progress from inside run(); called on the job thread.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  virtual void progress(int step, int steps, std::string_view phase) = 0;
};

class JobRunner {
 public:
  virtual ~JobRunner() = default;
  // Fills the device facts of the hello (device_index, device_name, arch,
  // memory_bytes, runtime/driver versions, backend).
  virtual void describe(proto::WorkerHello& hello) const = 0;
  // Model specs held in memory now (dispatch affinity).
  virtual std::vector<std::string> loaded_models() const = 0;
  // Each model held in memory with the LoRA set merged into it
  // (spec::lora_set_key; "" = the base): dispatch prefers jobs that need no
  // LoRA switch. Default: none reported (affinity by model alone).
  virtual std::vector<proto::HeldModel> held_models() const { return {}; }
  virtual Result<proto::JobResult> run(const JobAssignment& job, ProgressSink& progress,
                                         const std::atomic<bool>& cancel) = 0;

  // ---- batching across jobs (docs/batching.md) ----------------------------
  // Jobs whose batch keys are equal and non-empty may run together through
  // run_batch(), and each then gives the same outputs, byte for byte, as run
  // alone through run(). "" = this job never shares a batch. Cheap, no device
  // work; called on the connection thread (also while a job runs).
  virtual std::string batch_key(const JobAssignment& job) const {
    (void)job;
    return {};
  }
  // The most jobs run_batch() takes at once on this runner (1 = no batching).
  // Called on the connection thread only while no job runs.
  virtual int max_batch() const { return 1; }
  // Runs `jobs` (1..max_batch(), all of one non-empty batch_key) as one
  // batch: one outcome per job, in the order given (a job's failure is its
  // own; Status as run()). progress[i] and cancel[i] are job i's: a job whose
  // flag turns true ends Cancelled on its own while the others run on.
  // Default: each job in turn through run().
  virtual std::vector<Result<proto::JobResult>> run_batch(const std::vector<JobAssignment>& jobs,
                                                          const std::vector<ProgressSink*>& progress,
                                                          const std::vector<const std::atomic<bool>*>& cancel);
};

// Whether retrying the job elsewhere could help, by the failure's code:
// resource and I/O trouble may be local to this worker; bad input is not.
bool is_retryable(const Status& status);
// A configuration error: the batch's set-up is wrong (its output root cannot
// be created or written, its model cannot be loaded), so every job of the
// batch would fail the same way. Runners say so with FailedPrecondition; the
// worker reports it as JobError.configuration and it is never retried.
bool is_configuration_error(const Status& status);

}  // namespace hipq::worker
