#include "engine/job.h"

#include <algorithm>
#include <chrono>
#include <system_error>
#include <thread>
#include <utility>

#include "base/fs.h"
#include "spec/golden_format.h"
#include "spec/init_image.h"
#include "spec/phases.h"
#include "spec/png.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// A file that vanished after it was written (someone deleting the output
// tree) is an I/O error, retried, not bad input.
Status removed_after_writing(const fs::path& path) {
  std::string m = path.string();
  m += " was removed after it was written (is something deleting the output directory?); the job runs again";
  return Status::IOError(std::move(m));
}

// A file the job names changed since it was submitted: the job fails with
// both digests instead of drawing another image than asked for.
Status changed_since_submitted(const std::string& what, const std::string& path, const std::string& submitted,
                               const std::string& now) {
  return Status::InvalidArgument(what + " " + path + " changed since the job was submitted (sha256 " +
                                 submitted + " then, " + now +
                                 " now); resubmit the batch to use the file as it is now");
}

// Whether the pipeline holds exactly `specs` (and, when given, files of those digests).
bool holds_loras(const Pipeline& pipeline, const std::vector<spec::LoraSpec>& specs,
                 const std::vector<std::string>& digests) {
  const auto& held = pipeline.loras();
  if (held.size() != specs.size()) return false;
  for (size_t i = 0; i < held.size(); ++i) {
    if (!(held[i].spec == specs[i])) return false;
    if (!digests.empty() && held[i].sha256 != digests[i]) return false;
  }
  return true;
}

Result<JobFile> describe_file(const fs::path& path, std::string kind) {
  auto hashed = sha256_file(path);
  if (!hashed.ok() && hashed.status().code() == StatusCode::kNotFound) return removed_after_writing(path);
  HIPQ_ASSIGN_OR_RETURN(std::string sha, std::move(hashed));
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return Status::IOError(path.string() + ": " + ec.message());
  return JobFile{std::move(kind), path, std::move(sha), static_cast<int64_t>(size)};
}

// Step 5: latent and image, as the job asks.
Status write_images(const GenerationJob& job, const Pipeline& pipeline, const GenerationOutput& out,
                    const OutputInfo& info, std::vector<JobFile>& files) {
  if (job.save_latent) {
    const fs::path path = job.output_dir / "latent.safetensors";
    HIPQ_RETURN_IF_ERROR(write_latent_file(path, out, job.settings, info));
    HIPQ_ASSIGN_OR_RETURN(JobFile f, describe_file(path, "latent"));
    files.push_back(std::move(f));
  }
  if (job.save_png && !out.rgb.empty()) {
    const fs::path path = job.output_dir / job.png_name;
    ImageProvenance provenance = job.provenance;
    provenance.model_spec = info.model_spec;
    provenance.weights_sha256 = pipeline.weights_sha256();
    for (const lora::AppliedLora& l : pipeline.loras())
      provenance.loras.push_back({l.name, l.a1111_hash, l.sha256, l.spec.scale});
    HIPQ_RETURN_IF_ERROR(spec::write_png(path, spec::RgbImage{out.width, out.height, out.rgb},
                                         png_metadata(job.settings, provenance)));
    HIPQ_ASSIGN_OR_RETURN(JobFile f, describe_file(path, "png"));
    files.push_back(std::move(f));
  }
  return Status::Ok();
}

// Step 7: timings.json.
Status write_timings(const GenerationJob& job, const GenerationRun& r, const OutputInfo& info,
                     std::vector<JobFile>& files) {
  GenerationOutput timed;  // timings_json reads only the timing members
  timed.phases = r.phases;
  timed.steps = r.output.steps;
  timed.step_models = r.output.step_models;
  timed.model_phases = r.output.model_phases;
  timed.refiner = r.output.refiner;
  timed.peak_memory_bytes = r.output.peak_memory_bytes;
  timed.phase_peaks = r.output.phase_peaks;
  timed.decode_fallback = r.output.decode_fallback;
  timed.warm = r.output.warm;
  timed.memory_plan = r.output.memory_plan;
  timed.unet_batch = r.output.unet_batch;
  timed.model_calls = r.output.model_calls;
  timed.batch_jobs = r.output.batch_jobs;
  nlohmann::json timings = timings_json(timed, job.settings, info);
  if (r.parity) {
    timings["parity"] = r.parity->to_json();
    timings["parity"]["golden"] =
        r.golden.golden ? nlohmann::json(r.golden.golden->key) : nlohmann::json(nullptr);
    timings["parity"]["gate"] = job.gate.to_json();
  }
  const fs::path path = job.output_dir / "timings.json";
  HIPQ_RETURN_IF_ERROR(write_file_atomic(path, timings.dump(2) + "\n"));
  HIPQ_ASSIGN_OR_RETURN(JobFile f, describe_file(path, "timings"));
  files.push_back(std::move(f));
  return Status::Ok();
}

}  // namespace

std::string_view job_step_name(JobStep step) {
  switch (step) {
    case JobStep::kOutputDir:
      return "output_dir";
    case JobStep::kLoad:
      return "load";
    case JobStep::kGolden:
      return "golden";
    case JobStep::kGenerate:
      return "generate";
    case JobStep::kWrite:
      return "write";
    case JobStep::kParity:
      return "parity";
  }
  return "?";
}

Result<GoldenLookup> look_up_golden(const GoldenRequest& request, std::string_view weights_sha256,
                                    const spec::GenerationSettings& settings,
                                    const spec::InputDigests& inputs) {
  GoldenLookup found;
  found.key = request.key.empty() ? spec::golden_key(weights_sha256, settings, inputs) : request.key;
  fs::path path = request.file;
  if (path.empty() && !request.dir.empty()) {
    auto in_dir = spec::find_golden_file(request.dir, found.key);
    if (!in_dir.ok()) {
      if (in_dir.status().code() != StatusCode::kNotFound) return in_dir.status();
      found.missing_in_dir = true;
      return found;
    }
    path = *in_dir;
  }
  if (path.empty()) return found;
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound(path.string() + ": no such file or directory");
  GoldenReadOptions options;
  options.allow_unpinned = request.allow_unpinned;
  HIPQ_ASSIGN_OR_RETURN(Golden golden, read_golden(path, options));
  found.golden = std::move(golden);
  found.path = path;
  return found;
}

namespace {

// What a job's first steps leave for its last ones.
struct JobStage {
  Clock::time_point start;
  double load_ms = 0;
  double lookup_ms = 0;
  bool switched = false;
};

// Steps 1-3 (output directory, load, golden lookup); false when one failed (r says which).
bool prepare_job(const GenerationJob& job, const PipelineLoader& load, GenerationRun& r, JobStage& stage) {
  stage.start = Clock::now();
  auto failed = [&](JobStep step, Status status) {
    r.failed_step = step;
    r.status = std::move(status);
    r.wall_ms = ms_since(stage.start);
    return false;
  };
  // 1. Before any device work: an unwritable output fails now, not after the
  // run. Every job of a batch writes under the same root, so it is a
  // configuration error (FailedPrecondition): the batch stops instead of retrying.
  // A directory that kept vanishing while it was checked (Unavailable) is
  // someone deleting it, not a configuration: that job is retried.
  if (Status w = check_writable_directory(job.output_dir); !w.ok()) {
    if (w.code() == StatusCode::kUnavailable) return failed(JobStep::kOutputDir, std::move(w));
    return failed(JobStep::kOutputDir, Status::FailedPrecondition("output directory: " + w.message()));
  }

  // An init image that cannot be used (missing, not PNG/JPEG, damaged, not
  // the job's size) fails before the model loads; generate() reads it again.
  if (!job.settings.init_image.empty()) {
    auto image = spec::read_init_image(job.settings.init_image, {job.settings.width, job.settings.height});
    if (!image.ok()) return failed(JobStep::kGenerate, image.status());
    auto digest = sha256_file(job.settings.init_image);
    if (!digest.ok()) return failed(JobStep::kGenerate, digest.status());
    if (!job.inputs.init_image.empty() && *digest != job.inputs.init_image) {
      return failed(JobStep::kGenerate, changed_since_submitted("init image", job.settings.init_image,
                                                                job.inputs.init_image, *digest));
    }
    r.inputs.init_image = *digest;
  }

  // 2. load
  const auto load_start = Clock::now();
  auto loaded = load(&r.loaded_now);
  if (!loaded.ok()) return failed(JobStep::kLoad, loaded.status());
  Pipeline& pipeline = **loaded;
  r.pipeline = &pipeline;
  // The job's LoRA set, switched from the retained base when the pipeline
  // holds another (or the same paths whose files changed since).
  if (!holds_loras(pipeline, job.settings.loras, job.inputs.loras)) {
    if (Status st = pipeline.set_loras(job.settings.loras); !st.ok()) return failed(JobStep::kLoad, st);
    stage.switched = true;
  }
  for (size_t i = 0; i < job.inputs.loras.size() && i < pipeline.loras().size(); ++i) {
    const lora::AppliedLora& held = pipeline.loras()[i];
    if (held.sha256 != job.inputs.loras[i]) {
      return failed(JobStep::kLoad,
                    changed_since_submitted("LoRA file", held.spec.path, job.inputs.loras[i], held.sha256));
    }
  }
  for (const lora::AppliedLora& l : pipeline.loras()) r.inputs.loras.push_back(l.sha256);
  r.inputs.refiner_weights = job.inputs.refiner_weights;
  if (!job.settings.refiner.empty()) {
    if (!job.load_refiner)
      return failed(JobStep::kLoad,
                    Status::FailedPrecondition("the job names refiner " + job.settings.refiner +
                                               " but this runner cannot load a refiner model"));
    bool refiner_loaded_now = false;
    auto refiner = job.load_refiner(&refiner_loaded_now);
    if (!refiner.ok()) return failed(JobStep::kLoad, refiner.status().WithContext("refiner"));
    r.refiner = *refiner;
    // The refiner's weights enter the golden key by content; the coordinator
    // cannot know them, the loaded model does.
    r.inputs.refiner_weights = (*refiner)->weights_sha256();
    r.loaded_now = r.loaded_now || refiner_loaded_now;
  }
  stage.load_ms = ms_since(load_start);

  // 3. golden lookup (timed as part of parity)
  if (job.check_parity) {
    if (job.golden_found) {
      r.golden = *job.golden_found;
    } else {
      const auto lookup_start = Clock::now();
      auto found = look_up_golden(job.golden, pipeline.weights_sha256(), job.settings, r.inputs);
      if (!found.ok()) return failed(JobStep::kGolden, found.status());
      r.golden = std::move(*found);
      stage.lookup_ms = ms_since(lookup_start);
    }
  } else {
    r.golden.key = job.golden.key.empty()
                       ? spec::golden_key(pipeline.weights_sha256(), job.settings, r.inputs)
                       : job.golden.key;
  }

  return true;
}

// Steps 5-7 (write, parity, timings.json) after r.output was generated.
void finish_job(const GenerationJob& job, GenerationRun& r, const JobStage& st) {
  auto failed = [&](JobStep step, Status status) {
    r.failed_step = step;
    r.status = std::move(status);
    r.wall_ms = ms_since(st.start);
  };
  Pipeline& pipeline = *r.pipeline;
  if ((r.loaded_now || st.switched) &&
      std::none_of(r.output.phases.begin(), r.output.phases.end(),
                   [](const PhaseTiming& t) { return t.phase == spec::kPhaseLoad; })) {
    r.phases.push_back(PhaseTiming{std::string(spec::kPhaseLoad), st.load_ms, 0});
  }
  r.phases.insert(r.phases.end(), r.output.phases.begin(), r.output.phases.end());
  // 5. write
  const OutputInfo info{job.model_spec.empty() ? pipeline.model_spec() : job.model_spec,
                        pipeline.weights_sha256(), pipeline.scheduler_config(),
                        pipeline.backend().info().name, pipeline.backend().info().device_name};
  const auto write_start = Clock::now();
  if (Status w = write_images(job, pipeline, r.output, info, r.files); !w.ok()) {
    return failed(JobStep::kWrite, std::move(w));
  }
  r.phases.push_back(PhaseTiming{std::string(spec::kPhaseWrite), ms_since(write_start), 0});

  // 6. parity
  if (job.check_parity) {
    const auto parity_start = Clock::now();
    auto judged = check_parity(r.output, r.golden.golden ? &*r.golden.golden : nullptr, job.gate);
    if (!judged.ok()) return failed(JobStep::kParity, judged.status());
    r.parity = std::move(*judged);
    r.phases.push_back(
        PhaseTiming{std::string(spec::kPhaseParity), st.lookup_ms + ms_since(parity_start), 0});
  }

  // 7. timings.json
  if (job.save_timings) {
    if (Status w = write_timings(job, r, info, r.files); !w.ok()) {
      return failed(JobStep::kWrite, std::move(w));
    }
  }
  // A file written early (the latent) and removed while later ones were
  // written is not reported as an output: the job runs again.
  for (const JobFile& f : r.files) {
    std::error_code ec;
    if (!fs::is_regular_file(f.path, ec)) return failed(JobStep::kWrite, removed_after_writing(f.path));
  }
  r.wall_ms = ms_since(st.start);
}

}  // namespace

GenerationRun run_job(const GenerationJob& job, const PipelineLoader& load) {
  GenerationRun r;
  JobStage st;
  if (!prepare_job(job, load, r, st)) return r;
  // 4. generate
  Pipeline& pipeline = *r.pipeline;
  auto generated = pipeline.generate(job.settings, job.progress, job.cancel, r.refiner);
  if (!generated.ok() && generated.status().code() == StatusCode::kResourceExhausted && job.release_memory &&
      job.release_memory()) {
    generated = pipeline.generate(job.settings, job.progress, job.cancel, r.refiner);
  }
  if (!generated.ok()) {
    r.failed_step = JobStep::kGenerate;
    r.status = generated.status();
    r.wall_ms = ms_since(st.start);
    return r;
  }
  r.output = std::move(*generated);
  finish_job(job, r, st);
  return r;
}

std::vector<GenerationRun> run_job_batch(const std::vector<GenerationJob>& jobs, const PipelineLoader& load) {
  const size_t n = jobs.size();
  std::vector<GenerationRun> runs(n);
  std::vector<JobStage> stages(n);
  std::vector<size_t> ready;  // prepared, in order
  for (size_t i = 0; i < n; ++i)
    if (prepare_job(jobs[i], load, runs[i], stages[i])) ready.push_back(i);
  // The jobs that share a pipeline with the first prepared one run as one
  // batch (the loader hands the same pipeline to jobs of one batch key).
  std::vector<size_t> together;
  for (size_t i : ready)
    if (runs[i].pipeline == runs[ready.front()].pipeline && runs[i].refiner == nullptr) together.push_back(i);
  for (size_t i : ready) {
    if (std::find(together.begin(), together.end(), i) != together.end()) continue;
    GenerationRun alone = run_job(jobs[i], load);
    runs[i] = std::move(alone);
  }
  if (together.empty()) return runs;
  Pipeline& pipeline = *runs[together.front()].pipeline;
  std::vector<spec::GenerationSettings> settings;
  std::vector<ProgressFn> progress;
  std::vector<const std::atomic<bool>*> cancel;
  for (size_t i : together) {
    settings.push_back(jobs[i].settings);
    progress.push_back(jobs[i].progress);
    cancel.push_back(jobs[i].cancel);
  }
  // Each job's steps 5-7 (write, parity, timings) run on a thread of their
  // own as soon as it is decoded, while the device decodes the next job: the
  // writes leave the critical path, and every job is still finished (files
  // written) before run_job_batch returns and the caller reports it.
  std::vector<std::thread> writers;
  struct JoinAll {
    std::vector<std::thread>& threads;
    ~JoinAll() {
      for (std::thread& t : threads)
        if (t.joinable()) t.join();
    }
  } join_all{writers};
  std::vector<bool> written(together.size(), false);
  auto on_decoded = [&](size_t k, const GenerationOutput& out) {
    const size_t i = together[k];
    runs[i].output = out;
    written[k] = true;
    writers.emplace_back([&jobs, &runs, &stages, i] {
      try {
        finish_job(jobs[i], runs[i], stages[i]);
      } catch (const std::exception& e) {
        runs[i].failed_step = JobStep::kWrite;
        runs[i].status = Status::Internal(std::string("writing the job's outputs threw: ") + e.what());
      }
    });
  };
  auto generated = pipeline.generate_batch(settings, progress, cancel, on_decoded);
  const GenerationJob& first = jobs[together.front()];
  if (!generated.ok() && generated.status().code() == StatusCode::kResourceExhausted &&
      std::none_of(written.begin(), written.end(), [](bool w) { return w; }) && first.release_memory &&
      first.release_memory()) {
    generated = pipeline.generate_batch(settings, progress, cancel, on_decoded);
  }
  for (std::thread& t : writers) t.join();
  // Batching only saves time: a batch that fails as a whole for want of
  // memory (its plan no longer fits, the device ran out) or a plan runs its
  // jobs alone instead, each then failing or not as it would have alone.
  const bool alone = !generated.ok() && (generated.status().code() == StatusCode::kFailedPrecondition ||
                                         generated.status().code() == StatusCode::kResourceExhausted);
  for (size_t k = 0; k < together.size(); ++k) {
    if (written[k]) continue;  // finished by its writer
    const size_t i = together[k];
    GenerationRun& r = runs[i];
    Result<GenerationOutput> out = generated.ok() ? std::move((*generated)[k])
                                   : alone
                                       ? pipeline.generate(jobs[i].settings, jobs[i].progress, jobs[i].cancel)
                                       : Result<GenerationOutput>(generated.status());
    if (!out.ok()) {
      r.failed_step = JobStep::kGenerate;
      r.status = out.status();
      r.wall_ms = ms_since(stages[i].start);
      continue;
    }
    r.output = std::move(*out);
    finish_job(jobs[i], r, stages[i]);
  }
  return runs;
}

}  // namespace hipq::engine
