// EngineJobRunner: runs jobs on the real diffusion pipeline.
//
// Owns one kernels::Backend (cpu, or hip on one device) and a Pipeline per
// model spec, loaded on the first job that needs it and kept for the next
// ones (those report warm = true; `loaded_models()` drives dispatch
// affinity, `held_models()` adds each pipeline's LoRA set). When a load or a
// generation runs out of device memory, the other cached pipelines are
// released and the job is tried once more before the failure is reported.
//
// Per job: runs the job sequence of engine/job.h (output directory proven
// writable BEFORE any GPU work, load, the job's LoRA set switched in when the
// pipeline holds another, the files checked against the assignment's
// digests, golden lookup, generate, write, parity, timings.json) and translates its engine::GenerationRun
// into a proto::JobResult. Outputs, as the batch asks: latent.safetensors, the image (image_file_name:
// BATCH-jJOB-sSEED.png, with the settings as "parameters" text,
// engine/image_parameters.h) and timings.json under output_root/output_dir,
// reported relative to output_root with sha256 and size. The golden is found
// by key in the assignment's golden directory (key = golden_key(weights
// sha256, settings) unless the assignment names one; none found = NO_GOLDEN).
// Phases: load (when loaded), text_encode, denoise, decode, write, parity;
// one timing per denoise step.
// Errors: as JobRunner (worker/job_runner.h).
// Thread safety: run() on one thread (the worker's job thread).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/job.h"
#include "engine/memory_plan.h"
#include "spec/lora_spec.h"
#include "worker/job_runner.h"

namespace hipq::kernels {
class Backend;
}
namespace hipq::engine {
class Pipeline;
}

namespace hipq::worker {

// "<batch name>-j<job id>-s<seed>.png" ("b<batch id>-..." when the
// coordinator sent no batch name, or one that is not a plain file name):
// the image names its job wherever it is copied to.
std::string image_file_name(const JobAssignment& job);

class EngineJobRunner final : public JobRunner {
 public:
  // NotFound for a backend not built in; Unavailable for a missing device.
  // `placement`: every pipeline's (engine::LoadOptions::placement).
  static Result<std::unique_ptr<EngineJobRunner>> create(
      const std::string& backend, int device, engine::Placement placement = engine::Placement::kAuto);
  ~EngineJobRunner() override;

  void describe(proto::WorkerHello& hello) const override;
  std::vector<std::string> loaded_models() const override;
  std::vector<proto::HeldModel> held_models() const override;
  Result<proto::JobResult> run(const JobAssignment& job, ProgressSink& progress,
                               const std::atomic<bool>& cancel) override;
  // Batches (docs/batching.md): the model, engine::batch_key of the settings
  // and the LoRA files' digests; "" for jobs that run alone (img2img, base +
  // refiner, invalid settings). run_batch runs as many at once as the memory
  // plan allows (Pipeline::batch_capacity), the rest in further batches.
  std::string batch_key(const JobAssignment& job) const override;
  int max_batch() const override;
  std::vector<Result<proto::JobResult>> run_batch(
      const std::vector<JobAssignment>& jobs, const std::vector<ProgressSink*>& progress,
      const std::vector<const std::atomic<bool>*>& cancel) override;
  // The most jobs one run_batch() takes.
  static constexpr int kMaxBatch = 16;

 private:
  EngineJobRunner(std::unique_ptr<kernels::Backend> backend, std::string backend_name, int device,
                  engine::Placement placement);
  // The cached pipeline of `model` (whatever LoRA set it holds: the job
  // sequence switches it), else one loaded at `precision` with `loras`.
  // Out of device memory, the other cached models but `keep` (the base a
  // refiner is loaded beside) are released and the load tried once more.
  Result<engine::Pipeline*> pipeline_for(const std::string& model, const std::string& precision,
                                         const std::vector<spec::LoraSpec>& loras, bool* loaded_now,
                                         const std::string& keep = "");

  // The job as engine/job.h runs it (settings, inputs and gate checked).
  Result<engine::GenerationJob> generation_job(const JobAssignment& job, ProgressSink& progress,
                                               const std::atomic<bool>& cancel);
  // The finished run as the worker reports it (or the failed step's Status).
  Result<proto::JobResult> job_result(const JobAssignment& job, const engine::GenerationRun& r,
                                      std::chrono::steady_clock::time_point start) const;

  std::unique_ptr<kernels::Backend> backend_;
  std::string backend_name_;
  int device_;
  engine::Placement placement_;
  std::map<std::string, std::unique_ptr<engine::Pipeline>> pipelines_;
};

}  // namespace hipq::worker
