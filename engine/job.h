// Job: one generation from settings to files on disk and a parity verdict —
// the sequence the worker (worker/engine_job_runner.h) and `hipq generate`
// (cli/generate_command.cpp) both run, written once:
//
//   1. output directory: proven writable (created when missing) before any
//      device work, so a missing or read-only directory fails in
//      milliseconds, not after the run, and no file is written;
//   2. load: the caller's loader hands over the pipeline (cached or loaded
//      now), then the job's LoRA set when the pipeline holds another
//      (Pipeline::set_loras, from the retained base) with each file checked
//      against the submitted digest (GenerationJob::inputs), and for a base +
//      refiner job (settings.refiner) the refiner loader's pipeline; a load or
//      switch that happened now is timed as phase "load" unless the
//      pipeline reports one itself;
//   3. golden lookup: the golden of this run's key (golden_key(weights
//      sha256, settings, input digests), or the key the job names) in a directory of
//      <key>.safetensors, or a golden file; a directory without one means
//      NO_GOLDEN, not an error;
//   4. generate, with progress and cancellation; on running out of device
//      memory the job's release_memory hook may free memory once and the
//      generation is tried again;
//   5. write: latent.safetensors and the PNG (settings and provenance as
//      metadata, engine/image_parameters.h), each atomically, as the job asks;
//   6. parity: the output against the golden and the gate (engine/parity.h);
//   7. timings.json (docs/pipeline.md): every phase above, the steps, and the
//      parity block with the golden key and the gate.
//
// Phases reported (GenerationRun::phases): load (when loaded now or the LoRA set switched, and the pipeline
// gave none), the pipeline's own (load, text_encode, denoise, decode), write,
// parity (golden lookup and comparison; absent when parity is off).
//
// Errors: GenerationRun::status with the step that failed; nothing after that
// step ran. kOutputDir: FailedPrecondition "output directory: ..." (a
// configuration error); kLoad: the loader's Status unchanged (callers name
// the model); kGolden: find_golden_file / read_golden errors; kGenerate: the
// pipeline's (ResourceExhausted, Cancelled, InvalidArgument, ...); kWrite:
// IOError naming the path; kParity: check_parity's.
// Thread safety: run_job is reentrant; one pipeline runs one job at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/golden.h"
#include "engine/image_parameters.h"
#include "engine/parity.h"
#include "engine/phase_timer.h"
#include "engine/pipeline.h"
#include "spec/generation_settings.h"
#include "spec/input_digests.h"
#include "spec/parity_gate.h"

namespace hipq::engine {

// Where the golden of a run comes from.
struct GoldenRequest {
  std::filesystem::path file;  // a golden file, compared whatever its key; or
  std::filesystem::path dir;   // a directory searched for <key>.safetensors (spec::find_golden_file)
  std::string key;             // the run's key; "" = golden_key(weights sha256, settings)
  bool allow_unpinned = false; // accept a golden with incomplete provenance
};

// What the lookup found.
struct GoldenLookup {
  std::string key;                  // the run's golden key
  std::optional<Golden> golden;     // none: NO_GOLDEN
  std::filesystem::path path;       // the file read ("" when none)
  bool missing_in_dir = false;      // request.dir held no golden for key
};

// Step 3 on its own, for callers that read the golden before any device work
// (`hipq generate`) and hand it to run_job through GenerationJob::golden_found.
// Errors: NotFound when request.file does not exist; find_golden_file errors
// other than NotFound; read_golden errors.
// `inputs`: the digests of the files the settings name (LoRAs, init image),
// which the key hashes instead of their paths.
Result<GoldenLookup> look_up_golden(const GoldenRequest& request, std::string_view weights_sha256,
                                    const spec::GenerationSettings& settings, const spec::InputDigests& inputs = {});

// Hands over the pipeline to run on; sets *loaded_now when it loaded the
// model for this job (cached: false).
using PipelineLoader = std::function<Result<Pipeline*>(bool* loaded_now)>;

// What to run: one generation's settings, outputs, golden and gate. (The
// manifest's expansion is coordinator::ManifestJob, the wire's
// proto::JobAssignment.)
struct GenerationJob {
  spec::GenerationSettings settings;  // validated by the caller
  // The sha256 of the LoRA files and the init image as submitted (empty:
  // not pinned, whatever the files hold now is used). A file whose content
  // differs fails the job with InvalidArgument naming it and both digests.
  spec::InputDigests inputs;
  // The model as its outputs name it (latent and timings metadata, PNG
  // provenance); "" = the pipeline's model_spec().
  std::string model_spec;

  // ---- outputs
  std::filesystem::path output_dir;  // created when missing
  bool save_latent = true;           // output_dir/latent.safetensors
  bool save_png = true;              // output_dir/png_name (when the pipeline decoded an image)
  bool save_timings = true;          // output_dir/timings.json
  std::string png_name = "image.png";
  // Batch, job and attempt for the PNG metadata; model spec and weights
  // sha256 are the pipeline's.
  ImageProvenance provenance;

  // ---- parity
  bool check_parity = true;  // false: no golden lookup, no parity phase, no verdict
  GoldenRequest golden;      // neither file nor dir: NO_GOLDEN
  // Already looked up (look_up_golden): step 3 is skipped.
  std::optional<GoldenLookup> golden_found;
  spec::ParityGate gate;

  // ---- host side
  ProgressFn progress;                       // may be empty
  const std::atomic<bool>* cancel = nullptr; // may be null
  // Called once when generation runs out of device memory; true when it
  // freed something, and the generation is tried once more.
  std::function<bool()> release_memory;
  // Base + refiner jobs (settings.refiner set): hands over the refiner's
  // pipeline (settings.refiner loaded on the base's backend, cached or now).
  // Empty: such a job fails at kLoad with FailedPrecondition.
  PipelineLoader load_refiner;
};


enum class JobStep { kOutputDir, kLoad, kGolden, kGenerate, kWrite, kParity };
std::string_view job_step_name(JobStep step);  // "output_dir", "load", "golden", ...

struct JobFile {
  std::string kind;             // "latent" | "png" | "timings"
  std::filesystem::path path;   // output_dir / name
  std::string sha256;           // of the bytes written
  int64_t bytes = 0;
};

// What run_job did: the status and failed step, the output, phases, files
// and parity. The worker translates it into a proto::JobResult, which the
// coordinator records as a db::NewResult.
struct GenerationRun {
  Status status;                     // Ok, or the error of failed_step
  JobStep failed_step = JobStep::kOutputDir;  // meaningful when !status.ok()

  Pipeline* pipeline = nullptr;      // what the loader handed over (null before kLoad)
  Pipeline* refiner = nullptr;       // what load_refiner handed over (base + refiner jobs)
  bool loaded_now = false;
  GenerationOutput output;           // tensors, the pipeline's phases and steps, peak memory, warm
  std::vector<PhaseTiming> phases;   // in order: see the header comment
  std::vector<JobFile> files;        // in the order written: latent, png, timings
  // The digests of what ran: the LoRAs the pipeline held, the init image
  // read, the refiner's as the job gave it (the golden key's `inputs`).
  spec::InputDigests inputs;
  GoldenLookup golden;               // key always set once loaded; golden when one was read
  std::optional<ParityResult> parity;  // empty when check_parity is off
  double wall_ms = 0;                // host time of the whole job
};

GenerationRun run_job(const GenerationJob& job, const PipelineLoader& load);

// Jobs of one batch key (engine::batch_key; docs/batching.md) run as one
// batch: steps 1-3 for each job in order (each failure its own), step 4 as
// one Pipeline::generate_batch of the jobs whose pipeline is the first
// prepared job's (the others, if any, run alone through run_job), steps 5-7
// for each. One run per job, in order; each job's outputs equal its run_job's
// byte for byte, its timings say it shared the steps (batch_jobs). A batch
// that fails as a whole for want of memory (FailedPrecondition: its plan
// does not fit; ResourceExhausted after release_memory of the first job)
// runs its jobs alone instead; another error of the whole batch fails every
// job of it at kGenerate.
std::vector<GenerationRun> run_job_batch(const std::vector<GenerationJob>& jobs, const PipelineLoader& load);

}  // namespace hipq::engine
