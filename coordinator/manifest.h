// Manifest: a YAML batch description, validated whole, expanded into jobs.
//
// Format: docs/manifest.md (examples/ holds runnable ones). In short:
//   batch: parti-sdxl            # name (default: the file's stem)
//   priority: 0                  # higher runs first
//   max_attempts: 3
//   model: synthetic:tiny-sdxl   # or a path (relative to this file)
//   defaults: {width, height, steps, guidance, sampler, precision, rng,
//              seeds: [0, 1] | 7 | {from: 0, count: 8}, repeats, negative_prompt,
//              timestep_spacing: leading | trailing | linspace, guidance_rescale: 0..1,
//              loras: [{path: a.safetensors, scale: 0.8}], init_image: in.png, strength: 0.6,
//              refiner: {model: synthetic:sdxl-refiner, switch_at: 0.8, aesthetic_score: 6,
//                        negative_aesthetic_score: 2.5},
//              vae_precision: fp32 | bf16}   # the decode's dtype; absent = the precision's rule
//   parity: {golden: store | DIR, gate: {cosine_min: 0.999}, allow_unpinned: false}
//   outputs: {directory: out, save: [latent, png, timings], layout: "{batch}-{batch_id}/{prompt:05}-s{seed}-r{repeat}"}
//   prompts: ["a cat", {text: "a dog", negative: "...", tags: [..], seeds: [..], vae_precision: bf16}]
//   prompts_file: prompts.tsv | {path: p.tsv, column: Prompt, offset: 0, limit: 10}
//                 | {path: p.tsv, sample: 48, seed: 0, stratify: Category}  (or a list)
//
// parse_manifest() collects EVERY problem before answering: YAML syntax,
// unknown keys (with a did-you-mean), wrong types, out-of-range values,
// unreadable prompt files (with their own file:line), output directories
// that leave the output root (absolute, "..", or through a symlink, checked
// on the real filesystem) and duplicate output directories. The error is one
// InvalidArgument whose message has one problem per line:
//   "<file>:<line>:<column>: <field>: <message>"
// (line and column 1-based). A Manifest value is only ever returned whole
// and valid, so nothing is queued from a manifest with any problem.
//
// Paths (model when not synthetic:, golden directory, output directory,
// prompt files, LoRA files, the init image, the refiner when not synthetic:)
// are relative to the manifest file's directory and returned absolute and
// normalised. LoRA files and the init image are checked as they are read
// (coordinator/manifest_files.h) and pinned by their sha256 (defaults.inputs).
//
// The accepted samplers, precisions and rngs are spec/generation_settings.h's
// (the engine's own list), the parity-gate keys spec/parity_gate.h's and the
// synthetic model names spec/synthetic_models.h's.
// Thread safety: plain values and pure functions (they read files).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"
#include "db/records.h"
#include "spec/generation_settings.h"
#include "spec/input_digests.h"
#include "spec/parity_gate.h"

namespace hipq::coordinator {

// Bounds on what a manifest may cost to read (docs/manifest.md, "Limits").
// The manifest travels whole in one SubmitRequest: its limit is the wire's.
inline constexpr int64_t kMaxManifestBytes = 8 * 1024 * 1024;
// The batch cap: jobs one manifest may expand to. A coordinator setting
// (`--max-batch-jobs` of `hipq coordinator` and `hipq run`), this by default.
inline constexpr int64_t kMaxManifestJobs = 100'000;
// The most the cap may be set to. A batch is validated and inserted in one
// turn of the coordinator's loop, which dispatches nothing meanwhile (under
// 30 s a million jobs on the 2-core build machine, docs/benchmarks.md, "A
// million-job batch"), and costs about 0.3 KB a job in the database: ten
// million is a stall of minutes and a 3 GB file, past which splitting a
// batch is the better tool.
inline constexpr int64_t kMaxBatchJobsLimit = 10'000'000;

// Where a value came from, for messages after parsing.
struct SourceLocation {
  std::string file;
  int line = 0;    // 1-based; 0 = unknown
  int column = 0;  // 1-based
};

// The settings' defaults are spec::GenerationSettings' own.
struct ManifestDefaults {
  int width = spec::GenerationSettings{}.width;
  int height = spec::GenerationSettings{}.height;
  int steps = spec::GenerationSettings{}.steps;
  double guidance = spec::GenerationSettings{}.guidance;
  std::string sampler = spec::GenerationSettings{}.sampler;
  std::string precision = spec::GenerationSettings{}.precision;
  std::string rng = spec::GenerationSettings{}.rng;
  std::string timestep_spacing;  // "" = the model's scheduler config
  double guidance_rescale = 0;
  std::vector<uint64_t> seeds{0};
  int repeats = 1;
  std::string negative_prompt;
  // LoRA, img2img and refiner (docs/manifest.md); paths absolute.
  std::vector<spec::LoraSpec> loras;
  std::string init_image;
  double strength = spec::GenerationSettings{}.strength;
  std::string refiner;             // "synthetic:NAME" or an absolute path; "" = none
  double refiner_switch_at = spec::GenerationSettings{}.refiner_switch_at;
  double aesthetic_score = spec::GenerationSettings{}.aesthetic_score;
  double negative_aesthetic_score = spec::GenerationSettings{}.negative_aesthetic_score;
  std::string vae_precision;       // the decode's dtype: "" = the precision's rule, fp32 | bf16
  // The sha256 of each LoRA file and of the init image, as checked.
  spec::InputDigests inputs;
};

struct ParitySpec {
  // "store" (the coordinator's golden store), an absolute directory, or ""
  // when the manifest says `golden: none` (verdicts are NO_GOLDEN).
  std::string golden = "store";
  spec::ParityGate gate;  // the keys the manifest names; the others keep their defaults
  bool allow_unpinned = false;
};

struct OutputSpec {
  std::filesystem::path root;            // absolute
  std::vector<std::string> save{"latent", "png", "timings"};
  // Placeholders: {batch} {batch_id} {prompt} (0-based prompt index;
  // {prompt:05} pads) {seed} {repeat} {job} (0-based job ordinal, padding as
  // {prompt}). {batch_id} is rendered as the token "{batch_id}", which
  // db::JobStore::insert_batch replaces by the new batch's id, so two batches
  // of one manifest never share a folder.
  std::string layout = "{batch}-{batch_id}/{prompt:05}-s{seed}-r{repeat}";
};

struct PromptSpec {
  std::string text;
  std::optional<std::string> negative;     // overrides defaults.negative_prompt
  std::vector<std::string> tags;
  std::optional<std::vector<uint64_t>> seeds;  // overrides defaults.seeds
  std::optional<std::string> vae_precision;    // overrides defaults.vae_precision
  SourceLocation where;                    // manifest entry or prompt-file line
};

// One job: a prompt × seed × repeat with its settings.
struct ManifestJob {
  int64_t ordinal = 0;                     // 0-based in expansion order
  size_t prompt_index = 0;
  std::string prompt;
  std::string negative_prompt;
  std::vector<std::string> tags;
  uint64_t seed = 0;
  int repeat = 0;
  // prompt, negative_prompt, seed, width, height, steps, guidance (as its
  // 6-digit text reads back), sampler, precision, rng.
  spec::GenerationSettings settings;
  std::string output_dir;                  // relative to outputs.root, confined to it
};

struct Manifest {
  std::filesystem::path path;              // absolute path of the manifest file
  std::string text;                        // verbatim
  std::string sha256;                      // of text
  std::string batch_name;
  int priority = 0;
  int max_attempts = 3;
  std::string model;                       // "synthetic:NAME" or an absolute path
  ManifestDefaults defaults;
  ParitySpec parity;
  OutputSpec outputs;
  std::vector<PromptSpec> prompts;

  // prompts × seeds × repeats, in prompt order, then seed, then repeat.
  // Deterministic; validated by parse_manifest (output dirs unique, confined).
  std::vector<ManifestJob> expand_jobs() const;
  // The same jobs one at a time, none kept: memory does not grow with the
  // batch. Stops at, and returns, the first error `visit` returns.
  Status for_each_job(const std::function<Status(ManifestJob&)>& visit) const;
  // Number of jobs expand_jobs() would return.
  int64_t job_count() const;
  // The batch + jobs + verbatim manifest for db::JobStore::insert_batch.
  db::NewBatch to_new_batch() const;
  // The batch without its jobs (to_new_batch's other fields), and its jobs
  // as db::NewJob one at a time.
  db::NewBatch new_batch_header() const;
  Status for_each_new_job(const db::NewJobVisitor& visit) const;
  // The header with a job_stream over for_each_new_job instead of the jobs:
  // what the coordinator inserts, so a batch of millions is never in memory
  // whole. It refers to this Manifest, which must outlive it.
  db::NewBatch to_streamed_batch() const;
};

// Reads, parses and validates the manifest at `path` (see the header comment).
// NotFound / IOError when the file itself cannot be read.
// `max_jobs`: the batch cap (clamped to 1..kMaxBatchJobsLimit); a manifest
// that expands to more jobs is refused naming the cap and its setting.
Result<Manifest> parse_manifest(const std::filesystem::path& path, int64_t max_jobs = kMaxManifestJobs);
// Same, for text already in memory; `path` names it in messages and anchors
// relative paths (it need not exist).
Result<Manifest> parse_manifest_text(std::string_view text, const std::filesystem::path& path,
                                     int64_t max_jobs = kMaxManifestJobs);

// Limits of a path on the filesystems hipq writes to (NAME_MAX, PATH_MAX - 1).
inline constexpr size_t kMaxPathComponentBytes = 255;
inline constexpr size_t kMaxPathBytes = 4095;
// Checks that `path` has no NUL byte, no component longer than
// kMaxPathComponentBytes and is at most kMaxPathBytes long ("{batch_id}"
// counted as the 19 digits it may become). InvalidArgument naming the path.
Status check_path_components(const std::filesystem::path& path);

// Checks that `relative` is a relative path without "." / ".." components
// that stays inside `root` once existing symlinks along root/relative are
// resolved. InvalidArgument naming both paths when it does not.
Status check_confined(const std::filesystem::path& root, std::string_view relative);

}  // namespace hipq::coordinator
