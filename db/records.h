// Records: plain structs for the rows of hipq's database (docs/schema.md).
//
// Values only; no SQL here. Times are seconds since the Unix epoch (REAL).
// Seeds are uint64 in C++ and stored bit-for-bit in SQLite's signed INTEGER
// (a seed >= 2^63 reads back unchanged through these structs; raw SQL sees
// it negative). A job's generation settings are its columns (prompt ...
// rng; generation_settings() assembles spec::GenerationSettings); other JSON
// columns travel as their text (std::string) so db/ does not interpret
// parity gates.
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "spec/generation_settings.h"
#include "spec/input_digests.h"
#include "spec/parity_gate.h"

namespace hipq::db {

// ---- states -------------------------------------------------------------

enum class BatchState { kActive, kDone, kCancelled };
// queued → leased → done (a result, any verdict) | failed (non-retryable
// error) | dead (max_attempts used up) | cancelled; leased → queued on a
// retryable failure or an expired lease while attempts remain.
enum class JobState { kQueued, kLeased, kDone, kFailed, kDead, kCancelled };
enum class AttemptState { kRunning, kDone, kFailed, kExpired, kCancelled };

std::string_view batch_state_name(BatchState s);  // "active" | "done" | "cancelled"
std::string_view job_state_name(JobState s);      // "queued" | "leased" | "done" | "failed" | "dead" | "cancelled"
std::string_view attempt_state_name(AttemptState s);  // "running" | "done" | "failed" | "expired" | "cancelled"
Result<BatchState> parse_batch_state(std::string_view name);
Result<JobState> parse_job_state(std::string_view name);
Result<AttemptState> parse_attempt_state(std::string_view name);
// True for done, failed, dead, cancelled.
bool is_terminal(JobState s);

// ---- input records (what JobStore::insert_batch takes) ---------------------

struct NewJob {
  int64_t ordinal = 0;              // position in the batch, 0-based, unique per batch
  std::string model;                // model spec as the worker loads it
  std::string prompt;
  std::string negative_prompt;
  std::vector<std::string> tags;    // stored as a JSON array
  uint64_t seed = 0;
  int repeat_index = 0;
  int width = 0;
  int height = 0;
  int steps = 0;
  double guidance = 0;
  std::string sampler;
  std::string precision;
  std::string rng = "torch-cpu";
  std::string timestep_spacing;     // "" = the model's scheduler config
  double guidance_rescale = 0;
  // img2img, LoRA and refiner settings (schema 6); `inputs` holds the
  // sha256 of each LoRA file and of the init image as submitted (the
  // refiner's weights digest stays "" until a worker reports it).
  std::vector<spec::LoraSpec> loras;
  std::string init_image;           // absolute path; "" = text-to-image
  double strength = 1;
  std::string refiner;              // model spec; "" = none
  double refiner_switch_at = 0.8;
  double aesthetic_score = 6;
  double negative_aesthetic_score = 2.5;
  std::string vae_precision;        // the decode's dtype; "" = the precision's rule (schema 9)
  spec::InputDigests inputs;
  std::optional<std::string> golden_key;  // when the submitter knows it
  std::string output_dir;           // relative to the batch's output_root
};

// A batch's jobs handed over one at a time, so a batch of millions is never in
// memory whole: a NewJobStream calls `visit` for each job in ordinal order and
// stops at, and returns, the first error it returns. It may be run more than
// once (each run visits the same jobs).
using NewJobVisitor = std::function<Status(const NewJob&)>;
using NewJobStream = std::function<Status(const NewJobVisitor&)>;

struct NewBatch {
  std::string name;
  int priority = 0;                 // higher runs first
  int max_attempts = 3;
  std::string output_root;          // absolute directory
  std::vector<std::string> save;    // what to write: "latent", "png"; JSON array
  std::string golden_source;        // "store" | absolute directory | "" (no parity)
  spec::ParityGate parity_gate;     // stored as its JSON form (spec/parity_gate.h)
  bool allow_unpinned = false;      // accept goldens without provenance
  // The manifest, stored verbatim; sha256 is computed by insert_batch.
  std::string manifest_path;
  std::string manifest_text;
  // The jobs: `jobs`, or, when job_stream is set, the jobs it visits (then
  // `jobs` is ignored).
  std::vector<NewJob> jobs;
  NewJobStream job_stream;
};

// Visits the jobs of `batch` (its job_stream, or else its jobs) in order.
Status for_each_new_job(const NewBatch& batch, const NewJobVisitor& visit);

// A model a worker holds in memory with the LoRA set merged into it
// (spec::lora_set_key; "" = the base): dispatch affinity (JobStore::lease_next).
struct ModelHolding {
  std::string model;
  std::string lora_key;
  bool operator==(const ModelHolding&) const = default;
};

// ---- rows ----------------------------------------------------------------

struct ManifestRecord {
  int64_t id = 0;
  std::string sha256;
  std::string path;
  std::string text;
  double created_at = 0;
};

struct BatchRecord {
  int64_t id = 0;
  int64_t manifest_id = 0;
  std::string name;
  int priority = 0;
  BatchState state = BatchState::kActive;
  int max_attempts = 3;
  std::string output_root;
  std::vector<std::string> save;
  std::string golden_source;
  spec::ParityGate parity_gate;
  bool allow_unpinned = false;
  int64_t job_count = 0;
  double created_at = 0;
  std::optional<double> finished_at;
};

struct JobRecord {
  int64_t id = 0;
  int64_t batch_id = 0;
  int64_t ordinal = 0;
  std::string model;
  std::string prompt;
  std::string negative_prompt;
  std::vector<std::string> tags;
  uint64_t seed = 0;
  int repeat_index = 0;
  int width = 0;
  int height = 0;
  int steps = 0;
  double guidance = 0;
  std::string sampler;
  std::string precision;
  std::string rng = "torch-cpu";
  std::string timestep_spacing;
  double guidance_rescale = 0;
  // img2img, LoRA and refiner settings (schema 6); `inputs` holds the
  // sha256 of each LoRA file and of the init image as submitted (the
  // refiner's weights digest stays "" until a worker reports it).
  std::vector<spec::LoraSpec> loras;
  std::string init_image;           // absolute path; "" = text-to-image
  double strength = 1;
  std::string refiner;              // model spec; "" = none
  double refiner_switch_at = 0.8;
  double aesthetic_score = 6;
  double negative_aesthetic_score = 2.5;
  std::string vae_precision;        // "" = the precision's rule (schema 9)
  spec::InputDigests inputs;
  std::optional<std::string> golden_key;
  std::string output_dir;
  int priority = 0;
  JobState state = JobState::kQueued;
  int attempts = 0;                       // attempts started so far
  std::optional<std::string> lease_worker;
  std::optional<double> lease_deadline;
  std::optional<std::string> verdict;     // "PASS" | "FAIL" | "NO_GOLDEN" | "NON_FINITE" once done
  double created_at = 0;
  double updated_at = 0;

  // prompt, negative_prompt, seed, width, height, steps, guidance, sampler,
  // precision, rng, timestep_spacing, guidance_rescale, loras, init_image,
  // strength, the refiner's and vae_precision as one value (what the wire carries to the worker).
  spec::GenerationSettings generation_settings() const;
};

struct AttemptRecord {
  int64_t id = 0;
  int64_t job_id = 0;
  int attempt = 0;                        // 1-based
  std::string worker_id;
  double started_at = 0;
  std::optional<double> finished_at;
  AttemptState state = AttemptState::kRunning;
  std::optional<std::string> error;
};

struct PhaseTimingRecord {
  std::string phase;                      // load, text_encode, denoise, decode, write, parity
  double host_ms = 0;
  std::optional<double> gpu_ms;           // null where no GPU events were taken
};

// Sorts phase rows into the one phase order (spec/phases.h: pipeline order,
// then any other name alphabetically); every reader of phase_timings uses it.
void sort_phase_timings(std::vector<PhaseTimingRecord>& phases);

struct StepTimingRecord {
  int step = 0;                           // 0-based denoising step
  double host_ms = 0;
  std::optional<double> gpu_ms;
};

// One output file of a job: {"kind","path","sha256","bytes"} in results.outputs.
struct OutputFile {
  std::string kind;                       // "latent" | "png"
  std::string path;                       // relative to the batch's output_root
  std::string sha256;
  int64_t bytes = 0;
};

struct ResultRecord {
  int64_t id = 0;
  int64_t job_id = 0;
  int64_t attempt_id = 0;
  std::string worker_id;
  std::string verdict;
  std::optional<double> cosine;
  std::optional<double> max_abs;
  std::optional<double> rel_l2;
  std::optional<double> psnr;
  std::vector<OutputFile> outputs;
  std::optional<int64_t> peak_memory_bytes;
  bool warm = false;
  std::optional<std::string> golden_key;
  std::optional<std::string> parity_reason;
  int batch_size = 1;                     // jobs that shared its UNet batch (1 = alone)
  double recorded_at = 0;
};

// What a worker reports for one finished attempt (JobStore::record_result).
struct NewResult {
  int64_t job_id = 0;
  int attempt = 0;                        // the attempt the lease was given
  std::string worker_id;
  std::string verdict;                    // "PASS" | "FAIL" | "NO_GOLDEN" | "NON_FINITE"
  std::optional<double> cosine;
  std::optional<double> max_abs;
  std::optional<double> rel_l2;
  std::optional<double> psnr;
  std::optional<std::string> golden_key;
  std::optional<std::string> parity_reason;  // "cosine 0.98 < 0.999"
  std::vector<OutputFile> outputs;
  std::optional<int64_t> peak_memory_bytes;
  bool warm = false;
  std::vector<PhaseTimingRecord> phases;
  std::vector<StepTimingRecord> steps;
  // Jobs that shared this job's UNet batch (JobResult.batch_size, protocol
  // 7; the wire bounds it by proto::kMaxBatch): 1 = it ran alone.
  // record_result refuses one below 1.
  int batch_size = 1;
};

struct WorkerRecord {
  std::string id;                         // stable worker identity (e.g. host/device)
  std::string host;
  int device_index = 0;
  std::string device_name;
  std::string arch;
  int64_t memory_bytes = 0;
  std::string runtime_version;
  std::string driver_version;
  std::string build_sha;
  std::string backend;                    // "hip" | "cpu"
  double first_seen = 0;                  // set by upsert_worker
  double last_seen = 0;                   // set by upsert_worker
  std::string state;                      // free text owned by the coordinator: "idle", "busy", "draining", "gone"
  // The CURVE public key (Z85) the id is bound to: the first one that
  // registered it. nullopt without CURVE (no identity to bind).
  std::optional<std::string> curve_key;
};

// ---- outcomes of JobStore operations -----------------------------------------

// A job handed to a worker by lease_next.
struct LeasedJob {
  JobRecord job;                          // state leased, attempts = attempt
  BatchRecord batch;                      // output_root, save, parity settings
  int attempt = 0;                        // 1-based, = job.attempts
  int64_t attempt_id = 0;
  double lease_deadline = 0;
};

// Where a failed or expired attempt left its job.
struct FailureOutcome {
  int64_t job_id = 0;
  int attempt = 0;                        // the attempt that ended
  std::string worker_id;                  // who held it
  JobState new_state = JobState::kQueued; // queued (will retry), failed or dead
};

// A job whose lease was taken away by cancel: tell this worker to stop.
struct CancelledLease {
  int64_t job_id = 0;
  int attempt = 0;
  std::string worker_id;
};

struct CancelOutcome {
  int64_t jobs_cancelled = 0;             // queued or leased jobs now cancelled
  std::vector<CancelledLease> leases;     // of those, the ones a worker held
};

struct BatchCounts {
  int64_t batch_id = 0;
  BatchState state = BatchState::kActive;
  int64_t total = 0;
  std::map<std::string, int64_t> by_state;    // every JobState name, 0 when none
  std::map<std::string, int64_t> by_verdict;  // verdicts present among done jobs
  // Why the batch's first failed or dead job (lowest id) failed, as
  // "job ID: ERROR" (its last attempt's error); "" when none failed.
  std::string reason;
};

}  // namespace hipq::db
